#!/usr/bin/env bash
# Run the whole ctest suite N times (default 50) while two busy loops load the
# cores, and report how many runs passed. A test that fails only on a busy
# machine is a bug (in the product or the test): this is how we find them.
#
#   bash scripts/stress-tests.sh [N] [BUILD_DIR]     # BUILD_DIR default: build
#   STRESS_JOBS=2 STRESS_LOAD=2 STRESS_ARGS="-R coordinator" bash scripts/stress-tests.sh 10
#
# The build must exist (bash scripts/build.sh). Each failing run's output is
# kept in BUILD_DIR/stress/run-K.log; the busy loops stop with the script,
# also on Ctrl-C. Exit code 0 iff every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
dir=${2:-build}
jobs=${STRESS_JOBS:-2}
load=${STRESS_LOAD:-2}
if ! [[ $runs =~ ^[0-9]+$ ]] || ((runs < 1)); then
  echo "usage: $0 [RUNS >= 1] [BUILD_DIR]" >&2
  exit 2
fi
if [ ! -f "$dir/CTestTestfile.cmake" ]; then
  echo "stress-tests: no build in $dir (run: BUILD_DIR=$dir bash scripts/build.sh)" >&2
  exit 2
fi
mkdir -p "$dir/stress"
busy=()
stop_busy() {
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_busy EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < load; i++)); do
  (while :; do :; done) &
  busy+=($!)
done
pass=0
fail=0
start=$(date +%s)
for ((k = 1; k <= runs; k++)); do
  log="$dir/stress/run-$k.log"
  # shellcheck disable=SC2086
  if ctest --test-dir "$dir" -j"$jobs" --output-on-failure ${STRESS_ARGS:-} >"$log" 2>&1; then
    pass=$((pass + 1))
    rm -f "$log"
    echo "stress-tests: run $k/$runs passed ($(( $(date +%s) - start )) s so far)"
  else
    fail=$((fail + 1))
    echo "stress-tests: run $k/$runs FAILED: $(grep -E '^\s+[0-9]+ - ' "$log" | tr -s ' ' | tr '\n' ';') log: $log"
  fi
done
echo "stress-tests: $pass of $runs runs passed under $load busy loops ($(( $(date +%s) - start )) s)"
echo "$pass passed, $fail failed"
((fail == 0))
