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
# The benchmarks must at least run (figures are not asserted: see bench/).
if [ -x build/bench/client/bench_client ]; then
  RETRACE_BENCH_QUICK=1 ./build/bench/client/bench_client > build/bench-client.txt
  echo "bench_client: $(wc -l < build/bench-client.txt) lines"
fi
if [ -x build/bench/agent/bench_agent ]; then
  RETRACE_BENCH_QUICK=1 ./build/bench/agent/bench_agent > build/bench-agent.txt
  echo "bench_agent: $(wc -l < build/bench-agent.txt) lines"
fi
if [ -x build/bench/report/bench_report ]; then
  RETRACE_BENCH_QUICK=1 ./build/bench/report/bench_report > build/bench-report.txt
  echo "bench_report: $(wc -l < build/bench-report.txt) lines"
fi
if [ -x build/bench/weave/bench_weave ]; then
  RETRACE_BENCH_QUICK=1 ./build/bench/weave/bench_weave > build/bench-weave.txt
  echo "bench_weave: $(wc -l < build/bench-weave.txt) lines"
fi
if [ -x build/bench/adaptive/bench_adaptive ]; then
  RETRACE_BENCH_QUICK=1 ./build/bench/adaptive/bench_adaptive > build/bench-adaptive.txt
  echo "bench_adaptive: $(wc -l < build/bench-adaptive.txt) lines"
fi
if [ -x build/bench/traversal/bench_traversal ]; then
  RETRACE_BENCH_QUICK=1 ./build/bench/traversal/bench_traversal > build/bench-traversal.txt
  echo "bench_traversal: $(wc -l < build/bench-traversal.txt) lines"
fi
if [ -x build/bench/estimate/bench_estimate ]; then
  RETRACE_BENCH_QUICK=1 ./build/bench/estimate/bench_estimate > build/bench-estimate.txt
  echo "bench_estimate: $(wc -l < build/bench-estimate.txt) lines"
fi
# The end-to-end evaluation, short: fails (non-zero) if any trace the coordinator
# called coherent is not complete against the services' ground truth.
if [ -x build/bench/e2e/retrace-tail-collector ]; then
  RETRACE_BENCH_QUICK=1 bash bench/e2e/run-e2e.sh --build build --out build/e2e > build/bench-e2e.txt
  echo "bench_e2e: $(wc -l < build/bench-e2e.txt) lines"
fi
