#!/usr/bin/env bash
# Every test: install what is missing, build with -Werror, run the Check suites,
# then build again with AddressSanitizer + UndefinedBehaviorSanitizer and run them
# once more.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD_DIR=build bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2
BUILD_DIR=build-asan bash scripts/build.sh -DRETRACE_SANITIZE=ON -DRETRACE_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j2
# The benchmarks must at least run (figures are not asserted: see bench/); each
# writes its `bench ...` lines to build/bench-NAME.txt.
for b in client agent horizon report weave adaptive traversal estimate triggers select scale; do
  if [ -x "build/bench/$b/bench_$b" ]; then
    RETRACE_BENCH_QUICK=1 "./build/bench/$b/bench_$b" > "build/bench-$b.txt"
    echo "bench_$b: $(wc -l < "build/bench-$b.txt") lines"
  fi
done
# Benchmarks that share a folder with another: DIR/NAME runs build/bench/DIR/bench_NAME
# (first_touch: a service's first pass through the pool; adaptive_real: adaptive
# spans on real processes, a coordinator, 5 agents and 5 writers).
for b in client/first_touch adaptive/adaptive_real; do
  exe="build/bench/${b%/*}/bench_${b#*/}"
  if [ -x "$exe" ]; then
    RETRACE_BENCH_QUICK=1 "./$exe" > "build/bench-${b#*/}.txt"
    echo "bench_${b#*/}: $(wc -l < "build/bench-${b#*/}.txt") lines"
  fi
done
# The end-to-end evaluation, short: fails (non-zero) if any trace the coordinator
# called coherent is not complete against the services' ground truth.
if [ -x build/bench/e2e/retrace-tail-collector ]; then
  RETRACE_BENCH_QUICK=1 bash bench/e2e/run-e2e.sh --build build --out build/e2e > build/bench-e2e.txt
  echo "bench_e2e: $(wc -l < build/bench-e2e.txt) lines"
fi
# Weaving in the running system, short (figures not asserted; fails only if a step
# cannot run): coordinator --weave on against retrace-topo's truth.
if [ -x build/coordinator/retrace-coordinator ] && [ -x build/examples/retrace-topo ]; then
  RETRACE_BENCH_QUICK=1 bash bench/weave/run-real.sh --build build --out build/weave-real > build/bench-weave-real.txt
  echo "bench_weave_real: $(wc -l < build/bench-weave-real.txt) lines"
fi
