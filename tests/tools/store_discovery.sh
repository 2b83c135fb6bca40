#!/usr/bin/env bash
# tests/tools/store_discovery.sh BUILD_DIR — `retrace traces|show|export|estimate`
# without --store and $RETRACE_STORE ask the coordinator (--coordinator, or
# $RETRACE_COORDINATOR) for its store: a real coordinator started in another
# directory with a relative --store, the CLI run where no retrace.db is. The
# order (--store, $RETRACE_STORE, the coordinator, ./retrace.db) and the errors
# (they name --store) are checked too.
set -euo pipefail
B=$(cd "$1" && pwd)
R=$B/tools/retrace/retrace
D=$(mktemp -d /tmp/rt-storedisc-XXXXXX)
co=
cleanup() {
  local rc=$?
  [ -n "$co" ] && { kill -TERM "$co" 2>/dev/null || true; wait "$co" 2>/dev/null || true; }
  # under ASan/UBSan a report lands in the coordinator's or the CLI's stderr
  if grep -q "Sanitizer\|runtime error:" "$D"/*.err 2>/dev/null; then
    echo "store discovery: a sanitizer report:" >&2; grep -h -A20 "Sanitizer\|runtime error:" "$D"/*.err | head -40 >&2
    rc=1
  fi
  rm -rf "$D"
  exit $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$D"/*.err; do echo "--- $f" >&2; cat "$f" >&2; done; exit 1; }
mkdir -p "$D/coord" "$D/elsewhere"
unset RETRACE_STORE RETRACE_COORDINATOR

(cd "$D/coord" && exec "$B/coordinator/retrace-coordinator" --listen tcp://127.0.0.1:0 \
   --collector tcp://127.0.0.1:0 --store rel.db --ready-file "$D/ready") 2> "$D/coordinator.err" &
co=$!
for _ in $(seq 400); do [ -s "$D/ready" ] && break; sleep 0.05; done
[ -s "$D/ready" ] || fail "the coordinator did not start"
COORD=$(sed -n 1p "$D/ready")
STORE=$D/coord/rel.db

cd "$D/elsewhere"
# asked through --coordinator and through $RETRACE_COORDINATOR: the absolute path
"$R" traces --coordinator "$COORD" > "$D/t1.out" 2> "$D/t1.err" || fail "traces --coordinator"
grep -qF "store $STORE)" "$D/t1.err" || fail "traces did not read the coordinator's store"
RETRACE_COORDINATOR=$COORD "$R" traces --json > "$D/t2.out" 2> "$D/t2.err" || fail "traces with \$RETRACE_COORDINATOR"
[ "$(cat "$D/t2.out")" = "[]" ] || fail "traces --json: $(cat "$D/t2.out")"
if "$R" show 00000000000000000000000000000abc -C "$COORD" > /dev/null 2> "$D/s.err"; then fail "show found a trace"; fi
grep -qF "in $STORE" "$D/s.err" || fail "show did not read the coordinator's store"
"$R" export --all -q -C "$COORD" > "$D/e.out" 2> "$D/e.err" || fail "export --all"
"$R" estimate --where all -C "$COORD" > "$D/est.out" 2> "$D/est.err" || fail "estimate"
grep -qF "$STORE" "$D/est.out" || fail "estimate did not read the coordinator's store: $(cat "$D/est.out")"
echo "store discovery: traces, show, export and estimate read $STORE, asked of $COORD"

# --store and $RETRACE_STORE come first; a store that cannot be opened names --store
if "$R" traces --store "$D/none.db" -C "$COORD" 2> "$D/n.err"; then fail "--store none.db opened"; fi
grep -qF "$D/none.db (--store)" "$D/n.err" || fail "--store was not used first, or the error does not name --store"
if RETRACE_STORE=$D/none2.db "$R" traces -C "$COORD" 2> "$D/n2.err"; then fail "\$RETRACE_STORE none2.db opened"; fi
grep -qF "$D/none2.db" "$D/n2.err" || fail "\$RETRACE_STORE was not used before the coordinator"

# no coordinator and no ./retrace.db: an error that names --store
for cmd in traces "show 0abc" "export --all" "estimate --where all"; do
  # shellcheck disable=SC2086
  if "$R" $cmd --coordinator tcp://127.0.0.1:1 > /dev/null 2> "$D/x.err"; then fail "$cmd without a store succeeded"; fi
  grep -q -- "--store" "$D/x.err" && grep -q "no coordinator answered at tcp://127.0.0.1:1" "$D/x.err" ||
    fail "$cmd: the error names neither --store nor the coordinator: $(cat "$D/x.err")"
done
# ... and with a ./retrace.db, that one
cp "$STORE" "$D/elsewhere/retrace.db"
"$R" traces --coordinator tcp://127.0.0.1:1 2> "$D/l.err" || fail "./retrace.db was not used"
grep -qF "store retrace.db)" "$D/l.err" || fail "./retrace.db: $(cat "$D/l.err")"
echo "store discovery: --store, \$RETRACE_STORE, the coordinator, ./retrace.db, in that order; errors name --store"
