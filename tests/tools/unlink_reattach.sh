#!/usr/bin/env bash
# tests/tools/unlink_reattach.sh BUILD_DIR — a service keeps tracing across its
# agent's --unlink and --replace (real processes, a real pool):
#   1. agent A (--unlink) and a retrace-shop service under load: A indexes its buffers.
#   2. A stops: it retires the pool (state CLOSED) and unlinks it. Agent B starts
#      with the same pool name; the service, still running, notices the retired
#      pool at its next fresh buffer, says so once, re-attaches by name, and B
#      indexes its buffers, none malformed (no id of the old pool reaches B).
#   3. B is killed (-9) and its pool's header damaged so that it cannot be taken
#      over; agent C starts with --replace: it retires the old pool before
#      replacing it, and the service re-attaches to C's pool the same way.
set -euo pipefail
B=$(cd "$1" && pwd)
R=$B/tools/retrace/retrace
SHOP=$B/examples/retrace-shop
D=$(mktemp -d /tmp/rt-reattach-XXXXXX)
POOL=/rt-reattach-$$
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -f "/dev/shm${POOL}"
  # under ASan/UBSan a process's report lands in its log: that fails the test
  if grep -q "Sanitizer\|runtime error:" "$D"/*.log 2>/dev/null; then
    echo "unlink/reattach: a sanitizer report in the logs" >&2; rc=1
  fi
  [ $rc = 0 ] || { for f in "$D"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done; }
  rm -rf "$D"
  exit $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
wait_for() { # FILE WHAT
  for _ in $(seq 400); do [ -e "$1" ] && return 0; sleep 0.05; done
  fail "$2 did not start"
}
fig() { # SECTION KEY: the agent's figure (0 when it does not answer)
  "$R" status --pool "$POOL" --json 2>/dev/null | python3 -c '
import json, sys
try: print(int(json.load(sys.stdin)[sys.argv[1]][sys.argv[2]]))
except Exception: print(0)' "$1" "$2"
}
agent() { # NAME FLAGS...: start an agent on POOL
  local name=$1
  shift
  rm -f "$D/$name.ready"
  "$B/agent/retrace-agent" --pool "$POOL" --agent-id 7 --buffers 256 --listen tcp://127.0.0.1:0 \
    --ready-file "$D/$name.ready" "$@" 2> "$D/agent-$name.log" &
  pids+=($!)
  last_agent=$!
  wait_for "$D/$name.ready" "agent $name"
}
load() { "$SHOP" load --target "$URL" --requests "$1" --concurrency 2 >> "$D/load.out" 2>> "$D/load.log"; }
# Load until the running agent has indexed more than it had (bounded: 60 rounds).
until_indexed() { # WHAT
  local before n
  before=$(fig queues complete_entries)
  for _ in $(seq 60); do
    load 20
    n=$(fig queues complete_entries)
    [ "$n" -gt "$before" ] && return 0
    sleep 0.2
  done
  fail "$1: the agent indexed nothing from the service (complete_entries $n)"
}
malformed() {
  "$R" status --pool "$POOL" --json | python3 -c '
import json, sys
print(sum(v for v in json.load(sys.stdin)["malformed"].values() if isinstance(v, (int, float))))'
}

agent A --unlink
RETRACE_POOL=$POOL "$SHOP" serve frontend --listen 0 --ready-file "$D/shop.port" 2> "$D/shop.log" &
pids+=($!)
for _ in $(seq 400); do [ -s "$D/shop.port" ] && break; sleep 0.05; done
URL="http://127.0.0.1:$(tr -dc 0-9 < "$D/shop.port")"
until_indexed "agent A"
echo "unlink/reattach: agent A indexes the service's buffers"

# 2. --unlink at A's exit, then B on the same name
kill -TERM "$last_agent"
wait "$last_agent" || fail "agent A did not stop cleanly"
[ ! -e "/dev/shm$POOL" ] || fail "agent A --unlink left its pool"
grep -q "retired and unlinked" "$D/agent-A.log" || fail "agent A did not log the retirement"
load 20 # the service meets the retired pool while no agent runs: discard, no crash
agent B --unlink
until_indexed "agent B after A's --unlink"
[ "$(malformed)" = 0 ] || fail "agent B saw malformed entries: $("$R" status --pool "$POOL" --json)"
[ "$(grep -c "was retired by its agent" "$D/shop.log")" = 1 ] ||
  fail "the service did not log the retirement exactly once: $(cat "$D/shop.log")"
grep -q "attached to pool $POOL" "$D/shop.log" || fail "the service did not log its re-attach"
echo "unlink/reattach: after A's --unlink the service re-attached to B's pool (logged once)"

# 3. B dies; its pool cannot be taken over (damaged geometry); C --replace
kill -KILL "$last_agent"
wait "$last_agent" 2>/dev/null || true
python3 - "/dev/shm$POOL" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:  # buffer_count (offset 36) = 0: attach refuses it
    f.seek(36); f.write(struct.pack("<I", 0))
PY
agent C --unlink --replace
grep -q "replacing pool" "$D/agent-C.log" || fail "agent C did not replace the pool: $(cat "$D/agent-C.log")"
until_indexed "agent C after --replace"
[ "$(malformed)" = 0 ] || fail "agent C saw malformed entries"
[ "$(grep -c "was retired by its agent" "$D/shop.log")" = 2 ] ||
  fail "the service did not log the second retirement once: $(cat "$D/shop.log")"
echo "unlink/reattach: after C's --replace the service re-attached to C's pool (logged once)"
