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

# A TLS deployment: the UI cannot set alarms (no operator certificate), and says so.
bash "$SRC/scripts/retrace-keys.sh" "$D/keys" > /dev/null 2>&1
"$CO" --listen tcp://127.0.0.1:0 --collector tcp://127.0.0.1:0 --store "$D/tls.db" \
  --tls-ca "$D/keys/ca.crt" --tls-cert "$D/keys/coordinator.crt" --tls-key "$D/keys/coordinator.key" \
  --http-listen http://127.0.0.1:0 --ready-file "$D/tls.ready" 2> "$D/tls.log" &
pids+=($!)
wait_for "$D/tls.ready" "the TLS coordinator" "$D/tls.log"
TUI=$(sed -n 3p "$D/tls.ready")
# HTTP status of METHOD URL [HEADER], the body into $D/tls.out (python3: no curl needed)
http() {
  python3 - "$@" > "$D/tls.code" <<'PY'
import os, sys, urllib.request, urllib.error
method, url = sys.argv[1:3]
req = urllib.request.Request(url, method=method)
if len(sys.argv) > 3:
    k, v = sys.argv[3].split(": ", 1)
    req.add_header(k, v)
try:
    r = urllib.request.urlopen(req, timeout=30); code, body = r.status, r.read()
except urllib.error.HTTPError as e:
    code, body = e.code, e.read()
print(code)
open(os.environ["TLS_OUT"], "wb").write(body)
PY
  cat "$D/tls.code"
}
export TLS_OUT=$D/tls.out
code=$(http POST "${TUI}api/alarms?service=a&operation=b" "X-Retrace-Request: 1")
[ "$code" = 403 ] && grep -q "operator certificate" "$D/tls.out" || {
  echo "FAIL: an alarm from the UI of a TLS coordinator: HTTP $code $(cat "$D/tls.out")" >&2; exit 1; }
code=$(http GET "${TUI}api/traces")
[ "$code" = 200 ] || { echo "FAIL: /api/traces of a TLS coordinator: HTTP $code" >&2; exit 1; }
echo "ui api test: a TLS coordinator's UI refuses alarms (403) and still serves the API"

# The UI may share /metrics' listener: the same HOST:PORT for both flags.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$CO" --listen tcp://127.0.0.1:0 --collector tcp://127.0.0.1:0 --store "$D/shared.db" \
  --http-listen "http://127.0.0.1:$PORT" --metrics-listen "http://127.0.0.1:$PORT" \
  --ready-file "$D/shared.ready" 2> "$D/shared.log" &
shared=$!
pids+=($shared)
wait_for "$D/shared.ready" "the coordinator sharing a listener" "$D/shared.log"
for path in metrics api/traces api/status ""; do
  code=$(http GET "http://127.0.0.1:$PORT/$path")
  [ "$code" = 200 ] || { echo "FAIL: shared listener: /$path HTTP $code" >&2; exit 1; }
done
kill -TERM "$shared"
wait "$shared" || { echo "FAIL: the coordinator sharing a listener did not stop cleanly" >&2; exit 1; }
echo "ui api test: --http-listen and --metrics-listen share one HOST:PORT"
