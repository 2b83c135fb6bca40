#!/usr/bin/env bash
# tests/ui/browser_test.sh BUILD_DIR SOURCE_DIR — the web UI in a real browser:
# headless Chromium (Debian `chromium`, scripts/deps.sh) loads the search page,
# a trace page and the status page of a real deployment (deploy.sh), the DOM it
# built is checked against what the retrace CLI reports for the same store, and
# screenshots are saved under BUILD_DIR/tests/ui/browser/. Without Chromium the
# test exits 77, which ctest reports as skipped (never as passed).
set -euo pipefail
B=$1 SRC=$2
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ]; then
  echo "ui browser test: SKIPPED: no chromium (apt-get install chromium, or bash scripts/deps.sh)"
  exit 77
fi
D=$B/tests/ui/browser
rm -rf "$D" && mkdir -p "$D/profile"
source "$SRC/tests/ui/deploy.sh"

# --virtual-time-budget lets the page's fetches finish before the DOM is dumped.
browse() { # URL OUT.html OUT.png
  local args=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run
              --user-data-dir="$D/profile" --virtual-time-budget=15000 --window-size=1400,1000)
  timeout 90 "$CHROMIUM" "${args[@]}" --dump-dom "$1" > "$2" 2> "$2.log" || {
    echo "ui browser test: chromium failed on $1:" >&2; tail -20 "$2.log" >&2; return 1; }
  timeout 90 "$CHROMIUM" "${args[@]}" --screenshot="$3" "$1" > /dev/null 2>> "$2.log" || {
    echo "ui browser test: no screenshot of $1:" >&2; tail -20 "$2.log" >&2; return 1; }
  [ -s "$3" ] || { echo "ui browser test: empty screenshot $3" >&2; return 1; }
}

"$R" traces --store "$STORE" --json > "$D/traces.json"
# the traces to open: a coherent one across the three hosts and an incoherent one
# (host 3 missing), as the CLI lists them
pick() { python3 -c 'import json,sys
print([x for x in json.load(open(sys.argv[1])) if eval(sys.argv[2])][0]["trace_id"])' "$D/traces.json" "$1"; }
TRACE=$(pick 'x["coherent"] and len(x["agents"]) == 3')
BROKEN=$(pick 'not x["coherent"] and x["missing"] == [3]')
"$R" show --store "$STORE" --json "$TRACE" > "$D/show.json"
"$R" show --store "$STORE" --json "$BROKEN" > "$D/show-incoherent.json"
"$R" status --coordinator "$COORD" --json > "$D/status.json"
# an alarm set by the CLI, which the status page must list
"$R" alarm frontend "GET /checkout" --for 10m --coordinator "$COORD" > /dev/null

browse "${UI}#/" "$D/search.html" "$D/search.png"
browse "${UI}#/?coherent=true&limit=5" "$D/filtered.html" "$D/filtered.png"
browse "${UI}#/trace/$TRACE" "$D/trace.html" "$D/trace.png"
browse "${UI}#/trace/$BROKEN" "$D/incoherent.html" "$D/incoherent.png"
browse "${UI}#/status" "$D/status.html" "$D/status.png"
# The page drew what the coordinator knew while it loaded: between status.json and
# this second snapshot (host 3's killed agent may leave the directory meanwhile).
"$R" status --coordinator "$COORD" --json > "$D/status-after.json"
python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())' \
  "${UI}api/history" > "$D/history.json"
browse "${UI}#/history" "$D/history.html" "$D/history.png"
python3 "$SRC/tests/ui/dom_check.py" "$D" "$TRACE" "$BROKEN"
echo "ui browser test: screenshots in $D (search.png, filtered.png, trace.png, incoherent.png, status.png, history.png)"
