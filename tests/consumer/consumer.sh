#!/usr/bin/env bash
# tests/consumer/consumer.sh BUILD_DIR AGENT_BIN CLI_BIN — the installed library as a
# user meets it: install the build to a temporary prefix, build a C and a C++
# program with only `pkg-config --cflags --libs retrace`, and the C program again
# with CMake's find_package(retrace CONFIG) (shared and static), run them against a real
# agent's pool, and check what the agent saw. Also checks that libretrace.so
# exports the documented API (retrace_*) and nothing else.
set -euo pipefail
build=$1 agent=$2 cli=$3
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/rt-consumer-XXXXXX)
pool=/rt-consumer-$$
apid=
cleanup() {
  [ -n "$apid" ] && kill "$apid" 2>/dev/null && wait "$apid" 2>/dev/null || true
  rm -f "/dev/shm$pool"
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "consumer: FAILED: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(find "$tmp/prefix" -name retrace.pc | head -1)
[ -n "$pc" ] || fail "retrace.pc was not installed"
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir retrace)
[ -f "$libdir/libretrace_triggers.a" ] || fail "libretrace_triggers is not installed"
# Man pages (made by help2man when the build found it; scripts/deps.sh installs it).
if command -v help2man >/dev/null; then
  for m in retrace-agent retrace-coordinator retrace; do
    page=$tmp/prefix/share/man/man1/$m.1
    [ -f "$page" ] || fail "no man page $m.1"
    grep -q 'usage' "$page" || fail "man page $m.1 holds no usage text"
  done
fi

others=$(nm -D --defined-only "$libdir/libretrace.so" | awk '$2 != "A" && $3 !~ /^retrace_/ {print $3}')
[ -z "$others" ] || fail "libretrace.so exports internal symbols: $(echo $others | head -c 300)"

# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$src/consumer.c" -o "$tmp/consumer" \
  $(pkg-config --cflags --libs retrace) || fail "the C program does not build"
# shellcheck disable=SC2046
c++ -std=c++17 -Wall -Wextra -Werror "$src/consumer.cpp" -o "$tmp/consumer++" \
  $(pkg-config --cflags --libs retrace) || fail "the C++ program does not build"

# The same C program through CMake: find_package(retrace CONFIG) and its targets.
mkdir -p "$tmp/cmake-src"
cat >"$tmp/cmake-src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(retrace_consumer C)
find_package(retrace 0.2 CONFIG REQUIRED)
add_executable(consumer-cmake $src/consumer.c)
target_link_libraries(consumer-cmake PRIVATE retrace::triggers)
add_executable(consumer-static $src/consumer.c)
target_link_libraries(consumer-static PRIVATE retrace::retrace_triggers retrace::retrace_static)
CMAKE
cmake -S "$tmp/cmake-src" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$tmp/cmake.log" 2>&1 ||
  fail "find_package(retrace) does not configure: $(tail -20 "$tmp/cmake.log")"
cmake --build "$tmp/cmake-build" >>"$tmp/cmake.log" 2>&1 ||
  fail "the CMake consumer does not build: $(tail -20 "$tmp/cmake.log")"

"$agent" --pool "$pool" --agent-id 9 --unlink --ready-file "$tmp/ready" \
  --status "ipc://$tmp/status" --listen tcp://127.0.0.1:0 >"$tmp/agent.log" 2>&1 &
apid=$!
for _ in $(seq 200); do [ -e "$tmp/ready" ] && break; sleep 0.05; done
[ -e "$tmp/ready" ] || fail "the agent did not start: $(cat "$tmp/agent.log")"

export LD_LIBRARY_PATH=$libdir RETRACE_POOL=$pool
"$tmp/consumer" || fail "the C program failed"
"$tmp/consumer++" || fail "the C++ program failed"
"$tmp/cmake-build/consumer-cmake" || fail "the program built with find_package failed"
"$tmp/cmake-build/consumer-static" || fail "the program linked with retrace_static failed"

# The agent took the percentile and exception triggers of each C program (three
# builds) and the C++ program's exception trigger.
seen=0
for _ in $(seq 100); do
  seen=$("$cli" status --agent "ipc://$tmp/status" --json | tr -d ' \n' |
    sed -n 's/.*"trigger_groups":\([0-9]*\).*/\1/p')
  seen=${seen:-0}
  [ "$seen" -ge 7 ] && break
  sleep 0.05
done
[ "$seen" -ge 7 ] || fail "the agent saw $seen trigger groups, want >= 7 (2 from each run of the C program, 1 from the C++ one)"
echo "consumer: installed library used from C and C++ via pkg-config and find_package; $seen trigger groups seen"
