#!/usr/bin/env python3
"""tests/ui/api_check.py — the web UI's JSON API against the retrace CLI.

Ground truth is what `retrace traces --json`, `retrace show --json` and
`retrace status --json` report for the same store and coordinator, never the
API's own word. Usage: api_check.py UI_URL RETRACE_CLI STORE COORD_URL UI_DIR
Exits 1 with a line per failed check.
"""
import json
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

UI, CLI, STORE, COORD, UI_DIR = sys.argv[1:6]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def get(path):
    """(status, content type, body bytes) of GET UI+path."""
    try:
        with urllib.request.urlopen(UI.rstrip("/") + path, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def get_json(path, want=200):
    st, ct, body = get(path)
    check(st == want, f"GET {path}: HTTP {st}, wanted {want}: {body[:200]!r}")
    check(ct.startswith("application/json"), f"GET {path}: Content-Type {ct!r}")
    return json.loads(body)


def cli(*args):
    out = subprocess.run([CLI, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def cli_traces(*args):
    return cli("traces", "--store", STORE, "--json", *args)


# ------------------------------------------------------------ static UI ----
st, ct, body = get("/")
check(st == 200 and ct.startswith("text/html"), f"/ is HTML: {st} {ct}")
check(b'src="/app.js"' in body and b'href="/style.css"' in body, "/ loads /app.js and /style.css")
for path, kind in (("/index.html", "text/html"), ("/app.js", "text/javascript"),
                   ("/style.css", "text/css")):
    st, ct, served = get(path)
    check(st == 200 and ct.startswith(kind), f"{path}: {st} {ct!r}, wanted {kind}")
    with open(f"{UI_DIR}/{path.lstrip('/')}", "rb") as f:
        check(served == f.read(), f"{path} is served byte for byte as in ui/")
    # nothing loaded from the internet: no absolute or protocol-relative URLs
    check(not re.search(rb"""(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import|fetch\(\s*["'`]https?:""",
                        served), f"{path} loads nothing from elsewhere")

# ------------------------------------------------ search: every trace ----
ROW_KEYS = ["trace_id", "group", "triggers", "trigger_names", "agents", "missing", "coherent", "bytes", "slices",
            "late_slices", "first_ns", "last_ns", "triggered_ns", "closed_ns", "traversal_ns",
            "selection"]

for attempt in range(5):  # a snapshot: the CLI's answer the same before and after
    before = cli_traces()
    api_all = get_json("/api/traces?limit=1000")
    after = cli_traces()
    if before == after:
        break
else:
    check(False, "the store did not hold still for a snapshot")
rows = before
check(len(rows) >= 2, f"at least 2 traces stored ({len(rows)})")
check(api_all["count"] == len(rows) == len(api_all["traces"]),
      f"/api/traces count {api_all['count']} == retrace traces {len(rows)}")
check(api_all["truncated"] is False and api_all["limit"] == 1000, "not truncated, limit echoed")
check([t["trace_id"] for t in api_all["traces"]] == [r["trace_id"] for r in rows],
      "same traces in the same order (newest first) as retrace traces")
for a, r in zip(api_all["traces"], rows):
    for k in ROW_KEYS:
        check(a[k] == r[k], f"trace {r['trace_id']} {k}: api {a[k]!r} cli {r[k]!r}")

# ------------------------------------------ every trace against `show` ----
def otlp_spans(doc):
    """{spanId: (span, service, host)} from show --json's OTLP document."""
    out = {}
    for rs in doc["otlp"]["resourceSpans"]:
        attrs = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
        svc = attrs.get("service.name", {}).get("stringValue", "unknown_service")
        host = attrs.get("host.name", {}).get("stringValue", "")
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                out[s["spanId"]] = (s, svc, host)
    return out


def otlp_value(v):
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "boolValue" in v:
        return v["boolValue"]
    if "doubleValue" in v:
        return float(v["doubleValue"])
    return None


shows = {}
summaries = {t["trace_id"]: t for t in api_all["traces"]}
FLAG_ATTRS = {"retrace.partial": "partial", "retrace.no_start": "no_start",
              "retrace.no_end": "no_end", "retrace.unmatched": "unmatched"}
for r in rows:
    tid = r["trace_id"]
    show = cli("show", "--store", STORE, "--json", tid)
    shows[tid] = show
    api = get_json(f"/api/traces/{tid}")
    for k in ("trace_id", "coherent", "triggers", "agents", "missing", "bytes", "slices",
              "late_slices"):
        check(api[k] == show[k], f"{tid} {k}: api {api[k]!r} show {show[k]!r}")
    for k, v in show["decode"].items():
        if k in api["decode"]:
            check(api["decode"][k] == v, f"{tid} decode.{k}: api {api['decode'][k]} show {v}")
    spans = otlp_spans(show)
    check(len(api["spans"]) == show["spans"] == len(spans),
          f"{tid}: {len(api['spans'])} spans, show says {show['spans']}")
    by_id = {s["span_id"]: s for s in api["spans"]}
    check(set(by_id) == set(spans), f"{tid}: the same span ids as show")
    for sid, (o, svc, host) in spans.items():
        a = by_id.get(sid)
        if not a:
            continue
        where = f"{tid} span {sid}"
        check(a["name"] == o["name"], f"{where} name {a['name']!r} vs {o['name']!r}")
        check(a["service"] == svc and a["host"] == host, f"{where} {a['service']}@{a['host']} vs {svc}@{host}")
        check(a["parent_id"] == o.get("parentSpanId"), f"{where} parent {a['parent_id']} vs {o.get('parentSpanId')}")
        check(str(a["start_ns"]) == o["startTimeUnixNano"] and str(a["end_ns"]) == o["endTimeUnixNano"],
              f"{where} times")
        check({"unset": 0, "ok": 1, "error": 2}[a["status"]] == o["status"]["code"], f"{where} status")
        if a["status"] == "error":
            check(a["status_message"] == o["status"].get("message", ""), f"{where} status message")
        oattrs = [(x["key"], otlp_value(x["value"])) for x in o.get("attributes", [])]
        mine = [(x["key"], x["value"]) for x in a["attributes"]]
        check(mine == [kv for kv in oattrs if not kv[0].startswith("retrace.")],
              f"{where} attributes {mine} vs {oattrs}")
        flags = sorted(FLAG_ATTRS[k] for k, v in oattrs if k in FLAG_ATTRS and v)
        check(sorted(a["flags"]) == flags, f"{where} flags {a['flags']} vs {flags}")
        check([l["body"] for l in a["logs"]] == [e["name"] for e in o.get("events", [])],
              f"{where} logs")
        if a["parent"] is not None:
            check(api["spans"][a["parent"]]["span_id"] == a["parent_id"], f"{where} parent index")
    # the search result's summary agrees with the decoded spans
    s = summaries[tid]
    starts = [int(o["startTimeUnixNano"]) for o, _, _ in spans.values() if int(o["startTimeUnixNano"])]
    ends = [int(o["endTimeUnixNano"]) for o, _, _ in spans.values()]
    dur = (max(ends) - min(starts)) if starts else 0
    check(s["duration_ns"] == dur, f"{tid} summary duration {s['duration_ns']} vs {dur}")
    check(s["spans"] == show["spans"], f"{tid} summary spans")
    check(set(s["services"]) == {svc for _, svc, _ in spans.values()}, f"{tid} summary services")
    check(s["errors"] == sum(o["status"]["code"] == 2 for o, _, _ in spans.values()), f"{tid} summary errors")
    shows[tid]["duration_ns"] = dur

check(any(r["coherent"] and len(r["agents"]) == 3 for r in rows), "a coherent trace across the three hosts")
check(any(not r["coherent"] and r["missing"] == [3] for r in rows), "an incoherent trace, host 3 missing")

# --------------------------------------------- filters against the CLI ----
def ids(path):
    return [t["trace_id"] for t in get_json(path)["traces"]]


def cli_ids(*args):
    return [t["trace_id"] for t in cli_traces(*args)]


all_ids = [r["trace_id"] for r in rows]
check(ids("/api/traces?coherent=false") == cli_ids("--incoherent"), "coherent=false is --incoherent")
check(ids("/api/traces?coherent=true") == [r["trace_id"] for r in rows if r["coherent"]], "coherent=true")
check(ids("/api/traces?limit=3") == cli_ids("--limit", "3"), "limit=3 is --limit 3")
check(ids("/api/traces") == all_ids[:100], "default limit 100")
for trig in sorted({t for r in rows for t in r["triggers"]}):
    check(ids(f"/api/traces?trigger={trig}") == cli_ids("--trigger", str(trig)), f"trigger={trig}")
# Trigger names: the shop names its error trigger (100) "shop-error" with
# retrace_trigger_name and its percentile autotrigger (101) is "percentile-p99";
# they travel in the traces to the coordinator's store. The CLI and the API show
# the same names and filter by name as by id.
named = {}
for r in rows:
    check(len(r.get("trigger_names", [])) == len(r["triggers"]), f"CLI trigger_names beside triggers: {r}")
    for tid, name in zip(r["triggers"], r.get("trigger_names", [])):
        if name is not None:
            named[tid] = name
check(named.get(100) == "shop-error", f"trigger 100 is named shop-error in the CLI: {named}")
check(named.get(0xFFFFFFF1) in (None, "upstream"), f"the built-in upstream trigger's name: {named}")
api_named = {tid: name for r in api_all["traces"] for tid, name in zip(r["triggers"], r["trigger_names"])
             if name is not None}
check(api_named == {t: n for t, n in named.items() if t in api_named} and 100 in api_named,
      f"the API's trigger names are the CLI's: {api_named} vs {named}")
for tid, name in named.items():
    check(ids(f"/api/traces?trigger={urllib.parse.quote(name)}") == cli_ids("--trigger", str(tid)),
          f"trigger={name} is trigger={tid}")
    check(cli_ids("--trigger", name) == cli_ids("--trigger", str(tid)), f"--trigger {name} is --trigger {tid}")
e = get_json("/api/traces?trigger=no-such-trigger", want=400)
check(e.get("parameter") == "trigger" and "no-such-trigger" in e.get("error", ""), f"unknown trigger name: {e}")
r = subprocess.run([CLI, "traces", "--store", STORE, "--trigger", "no-such-trigger"], capture_output=True, text=True)
check(r.returncode == 2 and "no-such-trigger" in r.stderr, f"--trigger with an unknown name: {r.returncode} {r.stderr!r}")
shop_err = cli_ids("--trigger", "shop-error")
if check(shop_err, "some trace fired shop-error"):
    text = subprocess.run([CLI, "show", "--store", STORE, shop_err[0]], check=True, capture_output=True,
                          text=True).stdout
    check("shop-error(100)" in text.splitlines()[0], f"retrace show names the trigger: {text.splitlines()[0]!r}")
    one = get_json(f"/api/traces/{shop_err[0]}")
    check("shop-error" in one["trigger_names"], f"/api/traces/ID names the trigger: {one['trigger_names']}")

mid = rows[len(rows) // 2]["closed_ns"] // 1000000
check(ids(f"/api/traces?since={mid}") == [r["trace_id"] for r in rows if r["closed_ns"] >= mid * 1000000],
      "since (Unix ms, on closed_ns)")
check(ids(f"/api/traces?until={mid}") == [r["trace_id"] for r in rows if r["closed_ns"] <= mid * 1000000],
      "until (Unix ms, on closed_ns)")
check(ids("/api/traces?until=0") == [], "until=0: nothing closed before 1970")
check(ids("/api/traces?since=0") == all_ids[:100], "since=0: everything")
groups = sorted({r["selection"]["group"] for r in rows if r["selection"]["selected"]})
for g in groups[:3]:
    q = urllib.parse.quote(g)
    check(ids(f"/api/traces?group={q}") == [r["trace_id"] for r in rows
                                            if r["selection"]["selected"] and r["selection"]["group"] == g],
          f"group={g!r}")
services = sorted({svc for tid in all_ids for _, svc, _ in otlp_spans(shows[tid]).values()})
check({"frontend", "catalog", "inventory"} <= set(services), f"the shop's services in the traces: {services}")
for svc in services:
    want = [tid for tid in all_ids if any(s == svc for _, s, _ in otlp_spans(shows[tid]).values())]
    check(ids(f"/api/traces?service={urllib.parse.quote(svc)}&limit=1000") == want, f"service={svc}")
names = sorted({o["name"] for tid in all_ids for o, _, _ in otlp_spans(shows[tid]).values()})
for name in names[:4]:
    want = [tid for tid in all_ids if any(o["name"] == name for o, _, _ in otlp_spans(shows[tid]).values())]
    check(ids(f"/api/traces?operation={urllib.parse.quote(name)}&limit=1000") == want, f"operation={name!r}")
durs = sorted(shows[t]["duration_ns"] for t in all_ids)
thr = durs[len(durs) // 2] / 1e6
check(ids(f"/api/traces?min_ms={thr!r}&limit=1000") ==
      [t for t in all_ids if shows[t]["duration_ns"] / 1e6 >= thr], f"min_ms={thr}")
check(ids(f"/api/traces?max_ms={thr!r}&limit=1000") ==
      [t for t in all_ids if shows[t]["duration_ns"] / 1e6 <= thr], f"max_ms={thr}")

# ------------------------------------------------------------ history ----
# The coordinator samples every 0.25 s (deploy.sh): per-trigger counters, the
# agents' own figures (asked of each agent), selection's counters. Checked
# against `retrace status --json` of the coordinator and of each agent.
import time
status_now = cli("status", "--coordinator", COORD, "--json")
h = get_json("/api/history")
hist = h["history"]
samples = hist["samples"]
check(hist["interval_s"] == 0.25 and hist["capacity"] >= len(samples) > 3,
      f"history: {len(samples)} samples every {hist['interval_s']} s")
check(h["trigger_names"].get("100") == "shop-error" and h["trigger_names"].get(str(0xFFFFFFF0)) == "head-sampled",
      f"history names the triggers: {h['trigger_names']}")
ts = [s["t_ms"] for s in samples]
check(ts == sorted(ts) and len(set(ts)) == len(ts), "samples oldest first")
for key in ("triggers_received", "coherent", "incoherent"):
    vals = [s[key] for s in samples]
    check(vals == sorted(vals), f"{key} never decreases")
for key in ("windows", "kept", "dropped"):
    vals = [s["selection"][key] for s in samples]
    check(vals == sorted(vals), f"selection.{key} never decreases")
last = samples[-1]
cs = status_now
check(last["triggers_received"] <= cs["coordinator"]["triggers"] if "triggers" in cs.get("coordinator", {}) else True,
      "triggers_received at most what status shows")
shares = cs.get("trigger_shares", {})
for t in last["triggers"]:
    k = f"trigger_{t['id']}_opened"
    if k in shares:
        check(0 < t["opened"] <= shares[k], f"trigger {t['id']}: opened {t['opened']} vs status {shares[k]}")
check({t["id"] for t in last["triggers"]} >= {100}, f"trigger 100 sampled: {last['triggers']}")
check(any(t["opened"] > 0 for t in last["triggers"] if t["id"] == 100), "trigger 100 opened groups")
agents_last = {a["id"]: a for a in last["agents"]}
check(set(agents_last) == {1, 2, 3}, f"the three agents are sampled: {sorted(agents_last)}")
check(not agents_last.get(3, {}).get("ok", True), "agent 3 (killed) is sampled as not answering")


def answered(sample, aid):
    return any(x["id"] == aid and x["ok"] for x in sample["agents"])


for aid in (1, 2):
    earlier = [s for s in samples if answered(s, aid)]
    check(len(earlier) >= 2, f"agent {aid} sampled more than once ({len(earlier)})")
# A poll has one second to connect and one to answer (history.c), so on a loaded
# machine one sample may record a live agent as not answering: that is the sample
# telling the truth, not a fault. What must hold is that the live agents go on
# answering after agent 3 was killed: wait (bounded) for a sample newer than the
# ones read above in which agents 1 and 2 answered, and agent 3 did not.
fresh, deadline = None, time.time() + 60
while fresh is None and time.time() < deadline:
    newer = get_json(f"/api/history?since={last['t_ms']}")["history"]["samples"]
    fresh = next((s for s in newer if answered(s, 1) and answered(s, 2)), None)
    if fresh is None:
        time.sleep(0.25)
check(fresh is not None, "agents 1 and 2 answer the history's polls after agent 3 was killed")
check(fresh is None or not answered(fresh, 3), "agent 3 (killed) never answers again")
# since=: only newer samples; bad parameters are 400
newer = get_json(f"/api/history?since={samples[-2]['t_ms']}")["history"]["samples"]
check(newer and all(s["t_ms"] > samples[-2]["t_ms"] for s in newer), "since= returns newer samples only")
for q, param in (("since=yesterday", "since"), ("colour=red", "colour")):
    e = get_json(f"/api/history?{q}", want=400)
    check(e.get("parameter") == param, f"/api/history?{q}: 400 names {param}: {e}")
check("history" in cs and cs["history"]["samples"] > 0, "retrace status shows the history section")
# One socket per agent, kept from poll to poll (history.c): a socket per poll
# dials and closes the dead agent 3 every 0.25 s, which wedges nng's reaper.
hs = cs.get("history", {})
check(0 < hs.get("agent_sockets_opened", 0) <= 3 < hs.get("agent_polls", 0),
      f"the history polls three agents over one socket each: {hs}")

# ------------------------------------------------------ 400 and 404 ----
BAD = [("limit=0", "limit"), ("limit=1001", "limit"), ("limit=ten", "limit"), ("limit=-1", "limit"),
       ("trigger=-1", "trigger"), ("trigger=99999999999", "trigger"), ("since=yesterday", "since"),
       ("until=1.5", "until"), ("coherent=maybe", "coherent"), ("min_ms=-3", "min_ms"),
       ("max_ms=nan", "max_ms"), ("min_ms=5&max_ms=1", "max_ms"), ("since=20&until=10", "until"),
       ("colour=red", "colour"), ("service=%zz", "service"), ("group=" + "g" * 200, "group")]
bad_sent = 0
for q, param in BAD:
    e = get_json(f"/api/traces?{q}", want=400)
    bad_sent += 1
    check(e.get("parameter") == param and param in e.get("error", ""),
          f"?{q}: 400 names {param!r}: {e}")
for tid in ("xyz", "0" * 32, "1" * 33, "12345678901234567"):
    e = get_json(f"/api/traces/{tid}", want=400)
    bad_sent += 1
    check(e.get("parameter") == "traceid", f"/api/traces/{tid}: 400 names traceid")
unknown = next(f"{n:032x}" for n in range(0xabc0, 0xffff) if f"{n:032x}" not in all_ids)
e = get_json(f"/api/traces/{unknown}", want=404)
check(unknown in e.get("error", ""), f"404 names the trace: {e}")
short = rows[0]["trace_id"][16:]  # the low 16 digits, as retrace show takes them
check(get_json(f"/api/traces/{short}")["trace_id"] == rows[0]["trace_id"], "a trace by its low 16 digits")
get_json("/api/agents?x=1", want=400)
bad_sent += 1

# ----------------------------------------------- agents and status ----
status = json.loads(subprocess.run([CLI, "status", "--coordinator", COORD, "--json"], check=True,
                                   capture_output=True, text=True).stdout)
agents = get_json("/api/agents")["agents"]
want = {}
for k, v in status["agents"].items():
    m = re.match(r"agent\.(\d+)$", k)
    if m:
        addr, host = re.match(r"(\S+) host=(\S*)", v).groups()
        want[int(m.group(1))] = (addr, host)
check({a["agent_id"]: (a["address"], a["host"]) for a in agents} == want,
      f"/api/agents {agents} vs retrace status {want}")
check(all(a["last_seen_ns"] > 0 and a["pid"] > 0 for a in agents), "agents have pid and last seen")
api_status = get_json("/api/status")
check(set(api_status) == set(status), f"/api/status sections {sorted(api_status)} vs {sorted(status)}")
for sec, figs in status.items():
    if isinstance(figs, dict) and isinstance(api_status.get(sec), dict):
        check(set(api_status[sec]) == set(figs), f"/api/status {sec} keys")
check(api_status["coordinator"]["pid"] == status["coordinator"]["pid"], "the same coordinator")
check(api_status["store"]["traces"] == len(rows), "status store.traces == traces listed")
check(api_status["http"]["bad_requests"] >= bad_sent and api_status["http"]["not_found"] >= 1,
      f"the API counted its 400s ({api_status['http']['bad_requests']} >= {bad_sent}) and 404s")

# ------------------------------------------------------------ alarms ----
def send(method, path, headers=None):
    req = urllib.request.Request(UI.rstrip("/") + path, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def cli_alarms():
    """`retrace alarm --list`: {(kind, service or group, operation or key)}."""
    out = subprocess.run([CLI, "alarm", "--list", "--coordinator", COORD], check=True,
                         capture_output=True, text=True).stdout
    got = set()
    for line in out.splitlines()[1:]:
        f = line.split("\t")
        got.add(("operator", f[2], f[3]) if f[0] == "operator" else ("trigger", f[2], f[3]))
    return got


def api_alarms():
    got = set()
    for a in get_json("/api/alarms")["alarms"]:
        got.add(("operator", a["service"], a["operation"]) if a["kind"] == "operator"
                else ("trigger", a["group"], a["group_key"]))
    return got


check(api_alarms() == cli_alarms(), f"/api/alarms {api_alarms()} vs retrace alarm --list {cli_alarms()}")
ALARM = "/api/alarms?service=catalog&operation=GET%20%2Fitem&seconds=600"
OK_HDR = {"X-Retrace-Request": "1"}
st, e = send("POST", ALARM)
check(st == 403 and e.get("parameter") == "X-Retrace-Request", f"an alarm without the header: 403 ({st} {e})")
st, e = send("POST", ALARM, {**OK_HDR, "Host": "attacker.example:80"})
check(st == 403 and e.get("parameter") == "Host", f"an alarm with another Host: 403 ({st} {e})")
check(("operator", "catalog", "GET /item") not in cli_alarms(), "refused alarms were not set")
for q, param in (("service=catalog", "operation"), ("service=catalog&operation=x&seconds=0", "seconds"),
                 ("service=catalog&operation=x&colour=red", "colour")):
    st, e = send("POST", f"/api/alarms?{q}", OK_HDR)
    check(st == 400 and e.get("parameter") == param, f"POST ?{q}: 400 names {param} ({st} {e})")
st, e = send("POST", ALARM, OK_HDR)
check(st == 200 and "catalog GET /item" in e.get("ok", ""), f"an alarm set: {st} {e}")
check(("operator", "catalog", "GET /item") in cli_alarms(), "retrace alarm --list shows the UI's alarm")
check(api_alarms() == cli_alarms(), "/api/alarms agrees with retrace alarm --list")
st, e = send("DELETE", "/api/alarms?service=catalog&operation=GET%20%2Fitem", OK_HDR)
check(st == 200, f"the alarm cleared: {st} {e}")
check(("operator", "catalog", "GET /item") not in cli_alarms(), "retrace alarm --list: cleared")
st, e = send("DELETE", "/api/alarms?service=catalog&operation=GET%20%2Fitem", OK_HDR)
check(st == 409 and "not alarmed" in e.get("error", ""), f"clearing it again: 409 ({st} {e})")

print(f"api check: {len(rows)} traces, {sum(len(otlp_spans(s)) for s in shows.values())} spans compared, "
      f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
