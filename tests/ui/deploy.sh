# tests/ui/deploy.sh — sourced by the UI tests: a real deployment on loopback.
# A retrace-coordinator with --http-listen (port 0), three retrace-agents ("hosts"),
# and retrace-shop services across them (frontend on host 1 calling catalog on
# host 2, which calls inventory on host 3; inventory and frontend fail a share of
# their requests, which fires triggers), then load, until the store holds
# coherent traces that span the hosts. Then host 3's agent is killed (-9) and more
# load runs: traces that reach host 3 are stored incoherent, host 3 missing. The
# coordinator never forgets a silent agent here (--agent-ttl 0): the pages list
# host 3 however long a loaded machine makes the test run.
# Everything started here is stopped on exit.
# Needs: B (build dir), D (a fresh work dir). Sets: UI (the UI's base URL),
# COORD (control URL), STORE, R (the retrace CLI).
set -euo pipefail
R=$B/tools/retrace/retrace
STORE=$D/retrace.db
pids=()
agent_pid=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  # A daemon that does not stop within 15 s of SIGTERM is a product bug to
  # find: its threads' stacks (gdb, when installed) go to $D/hung-PID.txt, then
  # it is killed. (An unbounded wait here held a stress run until ctest's
  # 300 s limit, and the next run overwrote the evidence.)
  local deadline=$((SECONDS + 15)) hung=0
  for p in "${pids[@]}"; do
    while kill -0 "$p" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then
      hung=1
      echo "ui test: pid $p ($(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-120)) did not stop within 15 s of SIGTERM" >&2
      if command -v gdb > /dev/null; then
        timeout 60 gdb -p "$p" -batch -nx -ex 'thread apply all bt' > "$D/hung-$p.txt" 2>&1 || true
      fi
      kill -KILL "$p" 2>/dev/null || true
    fi
    wait "$p" 2>/dev/null || true
  done
  ((hung == 0)) || rc=1
  rm -f "/dev/shm/retrace-uitest-$$-3" # the killed agent's pool (the others unlink theirs)
  # under ASan/UBSan a daemon's report lands in its log: that fails the test
  if grep -l "Sanitizer\|runtime error:" "$D"/*.log 2>/dev/null; then
    echo "ui test: a sanitizer report in the logs above" >&2
    grep -h -A20 "Sanitizer\|runtime error:" "$D"/*.log | head -60 >&2
    rc=1
  fi
  # a failed run's directory is kept beside the next run's
  if ((rc != 0)); then
    rm -rf "$D.failed" && cp -a "$D" "$D.failed" 2>/dev/null &&
      echo "ui test: this run's logs and store are kept in $D.failed" >&2
  fi
  exit $rc
}
trap cleanup EXIT

wait_for() { # FILE WHAT LOG [-e: exists is enough]
  for _ in $(seq 400); do [ -s "$1" ] || { [ "${4:-}" = -e ] && [ -e "$1" ]; } && return 0; sleep 0.05; done
  echo "ui test: $2 did not start; its log:" >&2; cat "$3" >&2; exit 1
}

"$B/coordinator/retrace-coordinator" --listen tcp://127.0.0.1:0 --collector tcp://127.0.0.1:0 \
  --store "$STORE" --settle 0.5 --select-window 1 --ready-file "$D/coord.ready" \
  --agent-timeout 0.3 --agent-retries 0 --collect-timeout 3 --agent-ttl 0 \
  --http-listen http://127.0.0.1:0 --history-interval 0.25 2> "$D/coordinator.log" &
pids+=($!)
wait_for "$D/coord.ready" coordinator "$D/coordinator.log"
COORD=$(sed -n 1p "$D/coord.ready")
COLLECT=$(sed -n 2p "$D/coord.ready")
UI=$(sed -n 3p "$D/coord.ready")
case "$UI" in http://127.0.0.1:*/) ;; *) echo "ui test: no UI URL in the ready file: '$UI'" >&2; exit 1 ;; esac

for h in 1 2 3; do
  "$B/agent/retrace-agent" --pool "/retrace-uitest-$$-$h" --agent-id $h --buffers 1024 \
    --listen tcp://127.0.0.1:0 --coordinator "$COORD" --collector "$COLLECT" \
    --host "uihost$h" --unlink --ready-file "$D/agent$h.ready" 2> "$D/agent$h.log" &
  pids+=($!)
  agent_pid[$h]=$!
done
for h in 1 2 3; do wait_for "$D/agent$h.ready" "agent $h" "$D/agent$h.log" -e; done

SHOP=$B/examples/retrace-shop
serve() { # HOST NAME ARGS...
  local h=$1 name=$2
  shift 2
  RETRACE_POOL="/retrace-uitest-$$-$h" "$SHOP" serve "$name" --listen 0 \
    --ready-file "$D/$name.port" "$@" 2> "$D/$name.log" &
  pids+=($!)
  wait_for "$D/$name.port" "$name" "$D/$name.log"
}
url() { echo "http://127.0.0.1:$(tr -dc 0-9 < "$D/$1.port")"; }
serve 3 inventory --error-rate 0.05
serve 2 catalog --call "inventory=$(url inventory)"
serve 1 frontend --error-rate 0.03 --call "catalog=$(url catalog)"
"$SHOP" load --target "$(url frontend)" --requests "${UI_TEST_REQUESTS:-400}" --concurrency 2 \
  > "$D/load.out" 2> "$D/load.err"

# Until the store holds what WANT (python, on the list x) asks and is quiet (the
# row count the same for 2 s, selection's 1 s windows closed).
settle() { # WANT
  local last=-1 same=0 n
  for _ in $(seq 120); do
    n=$("$R" traces --store "$STORE" --json | python3 -c 'import json,sys
x=json.load(sys.stdin)
print(len(x) if ('"$1"') else -1)')
    if [ "$n" -gt 0 ] && [ "$n" = "$last" ]; then same=$((same + 1)); else same=0; fi
    last=$n
    [ "$same" -ge 4 ] && return 0
    sleep 0.5
  done
  echo "ui test: no settled store with $1 (last count $last)" >&2
  tail -20 "$D/coordinator.log" >&2
  exit 1
}
settle 'any(t["coherent"] and len(t["agents"]) == 3 for t in x)'

# host 3's agent dies; its data can no longer be had
kill -KILL "${agent_pid[3]}"
"$SHOP" load --target "$(url frontend)" --requests "${UI_TEST_REQUESTS_AFTER:-250}" --concurrency 2 \
  >> "$D/load.out" 2>> "$D/load.err"
settle 'any(not t["coherent"] and 3 in t["missing"] for t in x)'
echo "ui test: $("$R" traces --store "$STORE" | tail -n +2 | wc -l) traces stored, UI at $UI"
