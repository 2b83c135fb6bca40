/*
 * ui/ui_assets.h — the web UI's files, compiled into the binary.
 *
 * Owns: the static assets of the coordinator's web UI (index.html, app.js,
 * style.css in this folder: plain HTML/CSS/JS, no build step, nothing loaded
 * from the internet). ui/embed.cmake turns them into C arrays at build time,
 * so the coordinator has no runtime file dependency (docs/ui.md).
 */
#ifndef RETRACE_UI_ASSETS_H
#define RETRACE_UI_ASSETS_H

#include <stddef.h>

struct rt_ui_asset {
	const char *path;          /* "/index.html", "/app.js", ... */
	const char *content_type;  /* "text/html; charset=utf-8", ... */
	const unsigned char *data;
	size_t len;
};

extern const struct rt_ui_asset rt_ui_assets[];
extern const size_t rt_ui_asset_count;

#endif
