#!/usr/bin/env bash
# tests/ui/api_test.sh BUILD_DIR SOURCE_DIR — the web UI's JSON API on a real
# deployment (deploy.sh), checked against the retrace CLI by api_check.py.
set -euo pipefail
B=$1 SRC=$2
D=$B/tests/ui/api
rm -rf "$D" && mkdir -p "$D"
source "$SRC/tests/ui/deploy.sh"
python3 "$SRC/tests/ui/api_check.py" "$UI" "$R" "$STORE" "$COORD" "$SRC/ui"
