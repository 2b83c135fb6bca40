#!/usr/bin/env python3
"""tests/ui/dom_check.py DIR TRACE — the DOM headless Chromium built for the UI's
pages (DIR/search.html, trace.html, status.html, dumped after the page's own
fetches ran) against what the retrace CLI reported for the same store
(DIR/traces.json, show.json, status.json and status-after.json, taken before and
after the status page loaded). Exits 1 with a line per failure."""
import html
import json
import sys
from html.parser import HTMLParser

D, TRACE, BROKEN = sys.argv[1:4]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


class Dom(HTMLParser):
    """Every element's tag and attributes, in order, and the page's text."""

    def __init__(self, path):
        super().__init__()
        self.elements, self.text = [], []
        with open(path, encoding="utf-8") as f:
            self.feed(f.read())
        self.text = " ".join(self.text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        if data.strip():
            self.text.append(html.unescape(data.strip()))

    def with_attr(self, name):
        return [a for _, a in self.elements if name in a]

    def state(self):
        return next((a.get("data-state") for t, a in self.elements if a.get("id") == "view"), None)


traces = json.load(open(f"{D}/traces.json"))
show = json.load(open(f"{D}/show.json"))
status = json.load(open(f"{D}/status.json"))

# ------------------------------------------------------------ search page ----
dom = Dom(f"{D}/search.html")
check(dom.state() == "ready", f"search page drawn (data-state {dom.state()!r})")
rows = [a["data-trace"] for a in dom.with_attr("data-trace")]
want = [t["trace_id"] for t in traces][:100]
check(rows == want, f"search table lists the CLI's traces newest first ({len(rows)} rows, CLI {len(want)})")
check(TRACE in dom.text, "the trace id is on the search page")
check(any(a.get("name") == "service" for t, a in dom.elements if t == "input"), "a service filter")
check(any(a.get("name") == "coherent" for t, a in dom.elements if t == "select"), "a coherent filter")

# a search with filters in the URL: the filters are shown, the rows filtered
dom = Dom(f"{D}/filtered.html")
check(dom.state() == "ready", f"filtered search drawn (data-state {dom.state()!r})")
frows = [a["data-trace"] for a in dom.with_attr("data-trace")]
fwant = [t["trace_id"] for t in traces if t["coherent"]][:5]
check(frows == fwant, f"coherent=true&limit=5 lists the CLI's first 5 coherent traces ({frows} vs {fwant})")
check(any(t == "option" and a.get("value") == "true" and "selected" in a for t, a in dom.elements),
      "the coherent filter shows the URL's value")

# ------------------------------------------------------------- trace page ----
dom = Dom(f"{D}/trace.html")
check(dom.state() == "ready", f"trace page drawn (data-state {dom.state()!r})")
check(TRACE in dom.text, "the trace id is on the trace page")
check(("coherent" if show["coherent"] else "incoherent") in dom.text, "the coherence badge")
spans = {}
for rs in show["otlp"]["resourceSpans"]:
    attrs = {a["key"]: a["value"].get("stringValue") for a in rs["resource"]["attributes"]}
    for ss in rs["scopeSpans"]:
        for s in ss["spans"]:
            spans[s["spanId"]] = (s, attrs.get("service.name"), attrs.get("host.name"))
drawn = {a["data-span"]: a.get("data-service") for a in dom.with_attr("data-span")}
check(set(drawn) == set(spans), f"one waterfall row per span ({len(drawn)} drawn, show has {len(spans)})")
services = set()
for sid, (s, svc, host) in spans.items():
    services.add(svc)
    check(drawn.get(sid) == svc, f"span {sid} drawn under service {svc}")
    check(s["name"] in dom.text, f"span name {s['name']!r} on the page")
    if host:
        check("@" + host in dom.text, f"host {host} on the page")
    for e in s.get("events", []):
        check(e["name"] in dom.text, f"log {e['name']!r} inline")
    for a in s.get("attributes", []):
        if not a["key"].startswith("retrace."):
            check(a["key"] in dom.text, f"attribute {a['key']} inline")
check(len(services) >= 2, f"spans from several services ({services})")
agents = {a["value"].get("intValue") for s, _, _ in spans.values() for a in s.get("attributes", [])
          if a["key"] == "retrace.agent_id"}
hosts = {int(k.split(".")[1]): v.split("host=")[1].split()[0] for k, v in status["agents"].items()
         if k.startswith("agent.")}
check(len(agents) == 3 and all(f"agent {n} ({hosts.get(int(n))})" in dom.text for n in agents),
      f"spans recorded on the three hosts (agents {agents}), each span's agent and its host shown")
root = next(s for s, _, _ in spans.values() if "parentSpanId" not in s)
check(any(a.get("id") == "alarm-form" for _, a in dom.elements) and
      f"{drawn.get(root['spanId'])} {root['name']}" in dom.text,
      "the trace page offers to alarm its entry API (root span's service and name)")
bars = [a for _, a in dom.elements if "bar" in a.get("class", "").split()]
check(len(bars) == len(spans), f"one waterfall bar per span ({len(bars)})")

# an incoherent trace: badged, the missing host named
dom = Dom(f"{D}/incoherent.html")
check(dom.state() == "ready", f"incoherent trace drawn (data-state {dom.state()!r})")
check(BROKEN in dom.text and "incoherent" in dom.text, "the incoherent trace is badged incoherent")
check("missing slices from agent(s) 3" in dom.text, "the missing host is named")
broken = json.load(open(f"{D}/show-incoherent.json"))
unmatched = [s["spanId"] for rs in broken["otlp"]["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"] for a in s.get("attributes", []) if a["key"] == "retrace.unmatched"]
check(unmatched and dom.text.count("unmatched") >= len(unmatched),
      f"spans retrace show flags unmatched ({len(unmatched)}) are marked")

# ------------------------------------------------------------ status page ----
dom = Dom(f"{D}/status.html")
check(dom.state() == "ready", f"status page drawn (data-state {dom.state()!r})")
def agent_ids_of(st):
    return sorted(int(k.split(".")[1]) for k in st["agents"] if k.startswith("agent."))
drawn = sorted(int(a["data-agent"]) for a in dom.with_attr("data-agent"))
# The page loaded between the two snapshots of retrace status: it must match one.
snapshots = [status, json.load(open(f"{D}/status-after.json"))]
seen = [s for s in snapshots if agent_ids_of(s) == drawn]
check(bool(seen), f"agents table {drawn} vs retrace status {[agent_ids_of(s) for s in snapshots]}")
status = seen[0] if seen else status
sections = {a["data-section"] for a in dom.with_attr("data-section")}
want = {k for k, v in status.items() if isinstance(v, dict)}
check(sections == want, f"a card per figures section: {sorted(sections ^ want)} differ")
for k, v in status["agents"].items():
    if k.startswith("agent."):
        check(v.split()[0] in dom.text, f"agent address {v.split()[0]} shown")

alarms = [a["data-alarm"] for a in dom.with_attr("data-alarm")]
check("operator" in alarms and "frontend GET /checkout" in dom.text,
      f"the alarm set with retrace alarm is listed ({alarms})")

# ----------------------------------------------------------- history page ----
# Drawn from /api/history (fetched just before: the page has at least those
# samples): one SVG line per trigger id, per agent (event horizon, drops) and
# per selection counter; the newest sample's agents as a table.
hist = json.load(open(f"{D}/history.json"))
dom = Dom(f"{D}/history.html")
check(dom.state() == "ready", f"history page drawn (data-state {dom.state()!r})")
meta = next((a for _, a in dom.elements if a.get("id") == "history-meta"), {})
check(int(meta.get("data-samples", 0)) >= len(hist["history"]["samples"]) > 3,
      f"history page has the samples ({meta.get('data-samples')} vs {len(hist['history']['samples'])})")
charts = {}
chart = None
for t, a in dom.elements:
    if a.get("class") == "chart":
        chart = a.get("id")
    if t == "path" and "data-series" in a:
        charts.setdefault(chart, {})[a["data-series"]] = a
trig_ids = {t["id"] for s in hist["history"]["samples"] for t in s["triggers"]}
check({f"trigger-{i}" for i in trig_ids} <= set(charts.get("chart-triggers", {})),
      f"a rate line per trigger id {sorted(trig_ids)}: {sorted(charts.get('chart-triggers', {}))}")
check(all(int(a["data-points"]) >= 2 for a in charts.get("chart-triggers", {}).values()),
      "each trigger line has points")
check("shop-error (100)" in dom.text, "the trigger's name in the legend")
for c in ("chart-horizon", "chart-drops"):
    check({"agent-1", "agent-2", "agent-3"} <= set(charts.get(c, {})), f"{c}: a line per agent: {sorted(charts.get(c, {}))}")
    check(all(int(charts[c][k]["data-points"]) >= 2 for k in ("agent-1", "agent-2") if k in charts.get(c, {})),
          f"{c}: agents 1 and 2 have points")
check({"kept", "dropped", "windows"} <= set(charts.get("chart-selection", {})), "selection lines")
rows = {a["data-hist-agent"] for a in dom.with_attr("data-hist-agent")}
check(rows == {"1", "2", "3"}, f"newest sample's agents {rows}")
check(sum(1 for t, a in dom.elements if t == "svg") >= 4, "four SVG charts")

print(f"dom check: {len(spans)} spans, {len(rows)} search rows, {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
