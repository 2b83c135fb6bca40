#!/usr/bin/env bash
# Configure and build into DIR (default build/) with warnings as errors.
# Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRETRACE_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
