#!/usr/bin/env bash
# Install the Debian packages retrace needs, if any is missing (run as root).
set -euo pipefail
# libmbedtls-dev: daemon/tls.c's nng TLS engine (the mbedTLS nng itself uses);
# openssl: scripts/retrace-keys.sh makes the certificates; python3:
# scripts/check-deps.py (the architecture table checked against the includes);
# prometheus: the scraper (and promtool) tests/coordinator/test_metrics.c checks
# /metrics with; zlib1g-dev: coordinator/export.c gzips the OTLP push; help2man:
# the man pages, made from each program's --help; clickhouse-server: the
# ClickHouse store backend's tests and bench/scale start a private server
# (store/, docs/store.md); chromium: the web UI's browser test
# (tests/ui/browser_test.sh runs it headless; without it that test is skipped).
pkgs=(build-essential cmake pkg-config libck-dev libmsgpack-dev libnng-dev liburing-dev
      check libsqlite3-dev libjansson-dev libmbedtls-dev openssl python3 prometheus zlib1g-dev
      help2man clickhouse-server chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: run as root (or install: ${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
