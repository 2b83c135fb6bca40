#!/usr/bin/env bash
# The demo on embedded defaults: three "hosts" (one retrace-agent and pool each), a
# retrace-coordinator with its SQLite store, and the five-service retrace-shop over HTTP
# on loopback. Load runs for a while with a progress line; errors injected in the shop
# fire triggers; the coordinator follows the breadcrumbs to every host and stores the
# coherent end-to-end traces. Then a summary and one collected trace. Everything started
# here is stopped at the end, also on Ctrl-C.
# The coordinator also serves the web UI on a free loopback port (docs/ui.md): the
# summary prints its URL; KEEP=1 keeps everything running after the summary until
# Ctrl-C, so the UI can be opened.
#   REQUESTS=N (default 3000)   CONCURRENCY=C (default 4)   KEEP=1
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
B=$PWD/build
D=$B/demo
rm -rf "$D" && mkdir -p "$D"
REQUESTS=${REQUESTS:-3000}
CONCURRENCY=${CONCURRENCY:-4}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted, stopping everything"; exit 130' INT TERM

wait_for() { # FILE WHAT LOG
  for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.05; done
  echo "demo: $2 did not start; its log:" >&2; cat "$3" >&2; exit 1
}

echo "== retrace-coordinator (store $D/retrace.db)"
"$B/coordinator/retrace-coordinator" --listen tcp://127.0.0.1:0 --collector tcp://127.0.0.1:0 \
  --store "$D/retrace.db" --settle 0.5 --ready-file "$D/coord.ready" \
  --http-listen http://127.0.0.1:0 2> "$D/coordinator.log" &
pids+=($!)
wait_for "$D/coord.ready" coordinator "$D/coordinator.log"
COORD=$(sed -n 1p "$D/coord.ready")
COLLECT=$(sed -n 2p "$D/coord.ready")
UI=$(sed -n 3p "$D/coord.ready")

echo "== three hosts: retrace-agent 1, 2, 3 (one pool each)"
for h in 1 2 3; do
  "$B/agent/retrace-agent" --pool "/retrace-demo-$$-$h" --agent-id $h --buffers 2048 \
    --listen tcp://127.0.0.1:0 --coordinator "$COORD" --collector "$COLLECT" \
    --host "host$h" --unlink --ready-file "$D/agent$h.ready" 2> "$D/agent$h.log" &
  pids+=($!)
done
for h in 1 2 3; do
  for _ in $(seq 200); do [ -e "$D/agent$h.ready" ] && break; sleep 0.05; done
  [ -e "$D/agent$h.ready" ] || { echo "demo: agent $h did not start:" >&2; cat "$D/agent$h.log" >&2; exit 1; }
done

SHOP=$B/examples/retrace-shop
serve() { # HOST NAME ARGS...
  local h=$1 name=$2
  shift 2
  RETRACE_POOL="/retrace-demo-$$-$h" "$SHOP" serve "$name" --listen 0 \
    --ready-file "$D/$name.port" "$@" 2> "$D/$name.log" &
  pids+=($!)
  wait_for "$D/$name.port" "$name" "$D/$name.log"
}
url() { echo "http://127.0.0.1:$(tr -dc 0-9 < "$D/$1.port")"; }
echo "== retrace-shop: frontend+cart on host 1, catalog+payment on host 2, inventory on host 3"
serve 3 inventory --error-rate 0.02
serve 2 catalog --slow-rate 0.01 --call "inventory=$(url inventory)"
serve 2 payment --error-rate 0.01
serve 1 cart
serve 1 frontend --call "cart=$(url cart)" --call "catalog=$(url catalog)" --call "payment=$(url payment)"

echo "== load: $REQUESTS checkout requests, $CONCURRENCY at a time (2% inventory errors, 1% payment errors, 1% slow catalog)"
"$SHOP" load --target "$(url frontend)" --requests "$REQUESTS" --concurrency "$CONCURRENCY" \
  --progress > "$D/load.out"
sleep 2 # the last triggers settle and close

R="$B/tools/retrace/retrace"
st=$("$R" status --all --coordinator "$COORD")
fig() { echo "$st" | awk -v k="$1" '$1 == k { print $2; exit }'; }
echo
echo "== summary"
echo "requests            $(grep -o 'requests=[0-9]*' "$D/load.out" | cut -d= -f2) ($(grep -o 'errors=[0-9]*' "$D/load.out" | cut -d= -f2) failed)"
echo "triggers            $(fig triggers) received by the coordinator"
echo "traces collected    $(fig traces_coherent) coherent, $(fig traces_incoherent) incoherent ($(fig coherent_pct) % coherent)"
echo "traversal latency   p50 $(fig latency_p50_ms) ms, p99 $(fig latency_p99_ms) ms"
echo "slices stored       $(fig slices) ($(fig slice_bytes) bytes)"
echo "store               $D/retrace.db   (retrace traces --store $D/retrace.db)"
echo "web UI              $UI   (KEEP=1 bash scripts/demo.sh keeps it running)"
echo
id=$("$R" traces --store "$D/retrace.db" --limit 50 | awk '$2 == "yes" && NF >= 8 { print $1 }' |
     while read -r t; do n=$("$R" show --store "$D/retrace.db" "$t" | grep -c '^  agent'); \
       [ "$n" -ge 3 ] && { echo "$t"; break; }; done || true)
[ -n "$id" ] || id=$("$R" traces --store "$D/retrace.db" --limit 1 | awk 'NR == 2 { print $1 }')
if [ -n "$id" ]; then
  echo "== one collected trace: retrace show $id"
  "$R" show --store "$D/retrace.db" "$id"
else
  echo "demo: no trace was collected; see $D/*.log" >&2
  exit 1
fi
if [ "${KEEP:-0}" = 1 ]; then
  echo
  echo "== everything keeps running: open ${UI}#/trace/$id (Ctrl-C stops it all)"
  sleep infinity &  # waited for, so that a signal runs the trap at once
  pids+=($!)
  wait $!
fi
