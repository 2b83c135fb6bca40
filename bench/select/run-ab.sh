#!/usr/bin/env bash
# bench/select/run-ab.sh — the selector at REV against this tree's, in one process
# (bench/select/ab_select.c; docs/benchmarks.md "Selection, seventh pass").
#
#   bash bench/select/run-ab.sh REV [--build DIR] [--dataset DIR] [--rounds N] [--rate R]...
#
# REV's select/ sources are compiled as the build compiles them (-O2 -g) into one
# object whose global symbols are renamed base_*, linked with this tree's
# retrace_select (from DIR, default build/, built first) and replayed alternately
# with it. The dataset is DIR or the shared TrainTicket tarball, unpacked into a
# temporary directory. Prints the `bench select_ab` lines of ab_select.c per rate
# (default 0.05).
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=${1:?usage: run-ab.sh REV [--build DIR] [--dataset DIR] [--rounds N] [--rate R]...}
shift
build=build dataset="" rounds=8 rates=()
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--dataset) dataset=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--rate) rates+=("$2"); shift 2 ;;
	*) echo "run-ab.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ ${#rates[@]} -gt 0 ] || rates=(0.05)
tmp=$(mktemp -d /tmp/retrace-ab-select-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
flags=(-O2 -g -DNDEBUG -fPIC -D_GNU_SOURCE -std=c11) # as CMake builds retrace_select
git archive "$rev" select | tar -x -C "$tmp"
mkdir "$tmp/obj"
for f in "$tmp"/select/*.c; do
	"$cc" "${flags[@]}" -I"$tmp/select" -c "$f" -o "$tmp/obj/$(basename "$f" .c).o"
done
ld -r "$tmp"/obj/*.o -o "$tmp/base_all.o"
nm --defined-only -g "$tmp/base_all.o" | awk '{ print $3 " base_" $3 }' >"$tmp/syms"
objcopy --redefine-syms="$tmp/syms" "$tmp/base_all.o" "$tmp/base.o"
# a base with the cut-minute hold-back replays with it, as the head does
base_hold=()
if grep -q '^rt_sel_hold_cut_minute ' "$tmp/syms" && grep -q '^rt_sel_select ' "$tmp/syms"; then
	base_hold=(-DAB_BASE_HOLD)
fi
cmake --build "$build" --target retrace_select retrace_select_readers >/dev/null
"$cc" "${flags[@]}" -Iselect -Itools/select_eval ${base_hold[@]+"${base_hold[@]}"} bench/select/ab_select.c "$tmp/base.o" \
	"$build/tools/select_eval/libretrace_select_readers.a" "$build/select/libretrace_select.a" \
	-lm -o "$tmp/ab_select"
if [ -z "$dataset" ]; then
	mkdir "$tmp/data"
	tar xzf "$(dirname "$PWD")/shared/datasets/trainticket-2023-01-29.tar.gz" -C "$tmp/data"
	dataset=$tmp/data
fi
for r in "${rates[@]}"; do
	"$tmp/ab_select" "$dataset" "$rounds" "$r"
done
