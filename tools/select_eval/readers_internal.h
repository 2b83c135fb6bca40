/* readers_internal.h — what the dataset readers of tools/select_eval/ share
 * (nezha.c, otlp_json.c): the dataset builder of select/ and two file helpers. */
#ifndef RETRACE_TOOLS_READERS_INTERNAL_H
#define RETRACE_TOOLS_READERS_INTERNAL_H

#include "dataset_build.h"
#include "dataset_read.h"

/* Sorted list of DIR/<name> paths ending in suffix; -1 if DIR cannot be opened (files.c). */
int rt_sel_ds_list(const char *dir, const char *suffix, char ***out, size_t *n);
void rt_sel_ds_list_free(char **v, size_t n);
/* Parse up to 16 hex digits; 32 digits fill hi and lo. Returns false on bad input (nezha.c). */
bool rt_sel_ds_parse_hex_id(const char *s, size_t n, uint64_t *hi, uint64_t *lo);

#endif
