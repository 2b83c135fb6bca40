#!/usr/bin/env bash
# The demo on embedded defaults: a pool owned by a stand-in agent (retrace-drain),
# the two-tier demo service tracing every request into it, and what came out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
pool=/retrace-demo-$$
ready=$(mktemp -u)
./build/tools/retrace-drain --pool "$pool" --buffers 2048 --ready-file "$ready" --interval 1 > build/demo-drain.log &
drain=$!
trap 'kill $drain 2>/dev/null || true; rm -f "$ready"' EXIT
for _ in $(seq 100); do [ -e "$ready" ] && break; sleep 0.05; done
[ -e "$ready" ] || { echo "demo: the drainer did not start" >&2; exit 1; }
echo "== demo-service: 20000 requests, 2 frontend + 2 backend threads, 1% errors fire triggers"
RETRACE_POOL=$pool ./build/examples/demo-service -n 20000
kill -INT $drain
wait $drain || true
echo "== what the stand-in agent saw (buffers, records, breadcrumbs, trigger groups):"
grep '^drain ' build/demo-drain.log
