#!/usr/bin/env bash
# tests/ui/api_test.sh BUILD_DIR SOURCE_DIR — the web UI's JSON API on a real
# deployment (deploy.sh), checked against the retrace CLI by api_check.py.
set -euo pipefail
B=$1 SRC=$2
D=$B/tests/ui/api
rm -rf "$D" && mkdir -p "$D"
source "$SRC/tests/ui/deploy.sh"
python3 "$SRC/tests/ui/api_check.py" "$UI" "$R" "$STORE" "$COORD" "$SRC/ui"

# --http-listen errors name the flag and leave nothing behind.
CO=$B/coordinator/retrace-coordinator
expect_refused() { # WHY ARGS...
  local why=$1
  shift
  if "$CO" --listen tcp://127.0.0.1:0 --collector tcp://127.0.0.1:0 --store "$D/refused.db" "$@" \
       2> "$D/refused.err"; then
    echo "FAIL: retrace-coordinator $* started ($why)" >&2; exit 1
  fi
  grep -q -- "--http-listen" "$D/refused.err" || {
    echo "FAIL: $why: the error does not name --http-listen:" >&2; cat "$D/refused.err" >&2; exit 1; }
  [ ! -e "$D/refused.db" ] || { echo "FAIL: $why: a store file was left behind" >&2; exit 1; }
}
expect_refused "not loopback" --http-listen http://192.0.2.1:9480 --check-config
expect_refused "a path" --http-listen http://127.0.0.1:9480/ui --check-config
expect_refused "not http" --http-listen https://127.0.0.1:9480 --check-config
expect_refused "busy port" --http-listen "$UI"
echo "ui api test: --http-listen errors name the flag"
