#!/usr/bin/env bash
# The demo on embedded defaults: retrace-agent owns a pool, the two-tier demo service
# traces every request into it, and `retrace status` shows what the agent holds.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
pool=/retrace-demo-$$
ready=$(mktemp -u)
./build/agent/retrace-agent --pool "$pool" --buffers 4096 --listen tcp://127.0.0.1:0 \
  --unlink --ready-file "$ready" 2> build/demo-agent.log &
agent=$!
trap 'kill $agent 2>/dev/null || true; rm -f "$ready"' EXIT INT TERM
for _ in $(seq 100); do [ -e "$ready" ] && break; sleep 0.05; done
[ -e "$ready" ] || { echo "demo: the agent did not start:" >&2; cat build/demo-agent.log >&2; exit 1; }
echo "== demo-service: 20000 requests, 2 frontend + 2 backend threads, 1% errors fire triggers"
RETRACE_POOL=$pool ./build/examples/demo-service -n 20000
echo "== retrace status (what the agent indexed, evicted, pinned for reporting):"
./build/tools/retrace/retrace status --pool "$pool" |
  sed -n '/^buffers:/,/^queues:/p;/^trigger\./,/abandoned_traces/p' |
  grep -E '^[a-z]|total|free|indexed|pinned|evicted |event_horizon|null_buffers|triggers |traces_pinned|abandoned_traces'
kill -TERM $agent
wait $agent || true
echo "== agent log:"
cat build/demo-agent.log
