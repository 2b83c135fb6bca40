#!/usr/bin/env bash
# bench/e2e/run-e2e.sh — the end-to-end evaluation (docs/evaluation.md): the
# Hindsight paper's §6.1/6.2 experiment on this machine, against ground truth.
#
#   bash bench/e2e/run-e2e.sh [--quick] [--out DIR] [--build DIR] [--only main,overload,horizon,estimate]
#
# Figures (one `bench ...` line each, on stdout and in OUT/results.txt):
#   1. modes x offered load on two-service.topo, same run: none (no tracing),
#      retroactive (retrace), head (1/128 head sampling), tail (every span to a
#      tail-sampling collector, bench/e2e/tail_collector.c)
#        bench e2e mode=… topology=… load=… throughput=… p50_ms=… p99_ms=…
#        coherent_pct=… captured_per_s=… false_coherent=… collector_bytes_s=…
#        daemon_cpu_pct=…
#   2. overload: triggers 11/12/13 on 0.1 / 1 / 50 % of requests, agents'
#      reporting bandwidth limited
#        bench e2e-overload trigger=… pct=… captured_pct=… false_coherent=…
#   3. event horizon: the edge trigger fired 0..4 s after the request completed,
#      pools of 10 and 100 MiB
#        bench e2e-horizon pool_mib=… delay_s=… captured_pct=… utilisation=…
#   4. estimation (Ertl): the two hosts record 1/2 and 1/8 of the traces
#      (consistent, by trace id), then 1/2 and 30 % (not a power of two: each
#      trace at 1/2 or 1/4, Ertl §2.9); every request is triggered; `retrace
#      estimate` against the number of requests each service served (truth)
#        bench e2e-estimate service=… host_rate=… truth=… estimate=… se=… naive=…
# plus a data file per experiment (OUT/e2e-*.dat) and, with gnuplot, a PNG each.
#
# --quick (or RETRACE_BENCH_QUICK=1): a short version for scripts/test.sh
# (<= 90 s). Exit status: 0, or 1 if any trace was FALSE coherent (the ground-truth
# assertion) or a step could not run; 2 bad usage.
#
# Every process started here is stopped on exit, error or Ctrl-C (trap). Loops
# are bounded.
set -u
set -o pipefail

ROOT=${RETRACE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=$ROOT/build
OUT=
QUICK=${RETRACE_BENCH_QUICK:-0}
ONLY=main,overload,horizon,estimate
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	--build) BUILD=${2:?--build needs a directory}; shift ;;
	--only) ONLY=${2:?--only needs main,overload,horizon,estimate}; shift ;;
	-h | --help)
		sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
		exit 0 ;;
	*) echo "run-e2e.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
[ -n "$OUT" ] || OUT=$BUILD/e2e
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)

AGENT=$BUILD/agent/retrace-agent
COORD=$BUILD/coordinator/retrace-coordinator
CLI=$BUILD/tools/retrace/retrace
TOPO=$BUILD/examples/retrace-topo
TRUTH=$BUILD/tools/truth/retrace-truth
TAILC=$BUILD/bench/e2e/retrace-tail-collector
for b in "$AGENT" "$COORD" "$CLI" "$TOPO" "$TRUTH" "$TAILC"; do
	[ -x "$b" ] || { echo "run-e2e.sh: $b is missing (build first: cmake --build $BUILD)" >&2; exit 1; }
done

TOPO_DIR=$ROOT/examples/topo/topologies
TWO=$TOPO_DIR/two-service.topo
COLL_BW=${RETRACE_E2E_COLLECTOR_BW:-1000000} # collector budget, bytes/s (see below)
HEAD_SHIFT=7 # head sampling 1 in 2^7 = 1/128 (0.78 %), the power of two nearest 1 %
EDGE_PCT=1
# The estimation experiment's rate settings, one run each (HOST=K: 2^-K; HOST=P%:
# P percent by the §2.9 choice between two powers of two): 1/2 and 1/8, 1/2 and 30 %.
EST_CONFIGS=${RETRACE_E2E_EST_CONFIGS:-"front=1 back=3|front=1 back=30%"}

if [ "$QUICK" = 1 ]; then
	LOADS="300 1200"; DUR=2; WARM=1
	TAIL_WAIT=2
	OVL_RATE=800; OVL_DUR=2; OVL_BW=100000; OVL_QUIET=6
	HZ_POOLS="10"; HZ_DELAYS="0 1"; HZ_RATE=500; HZ_DUR=2
	EST_RATE=300; EST_DUR=3
	QUIET_MAX=10
else
	LOADS="250 500 1000 1500 2500"; DUR=10; WARM=3
	TAIL_WAIT=2
	OVL_RATE=1000; OVL_DUR=${RETRACE_E2E_OVL_DUR:-10}; OVL_BW=100000; OVL_QUIET=30
	HZ_POOLS="10 100"; HZ_DELAYS="0 0.5 1 2 4"; HZ_RATE=500; HZ_DUR=8
	EST_RATE=500; EST_DUR=10
	QUIET_MAX=60
fi
# The main experiment's offered loads and seconds per point can be set (e.g. one
# saturating load repeated: RETRACE_E2E_LOADS="3000 3000 3000" RETRACE_E2E_DUR=10),
# and so can its modes (RETRACE_E2E_MODES="none retroactive"; in the order given).
LOADS=${RETRACE_E2E_LOADS:-$LOADS}
DUR=${RETRACE_E2E_DUR:-$DUR}
MODES=${RETRACE_E2E_MODES:-none retroactive head tail}
# RETRACE_E2E_PIN=1 measures as the Hindsight paper did (the application on cores
# of its own, tracing daemons and load generator elsewhere): services on CPU 0;
# daemons, tail collector and load generator on CPU 1. Every mode runs so, so the
# throughput ratio is the in-process cost of tracing alone (docs/evaluation.md).
ON_APP_CPU=(); ON_AUX_CPU=()
if [ "${RETRACE_E2E_PIN:-0}" = 1 ]; then
	command -v taskset > /dev/null || { echo "run-e2e.sh: RETRACE_E2E_PIN=1 needs taskset" >&2; exit 2; }
	[ "$(nproc)" -ge 2 ] || { echo "run-e2e.sh: RETRACE_E2E_PIN=1 needs 2 CPUs" >&2; exit 2; }
	ON_APP_CPU=(taskset -c 0); ON_AUX_CPU=(taskset -c 1)
fi
for m in $MODES; do
	case $m in none | retroactive | head | tail) ;;
	*) echo "run-e2e.sh: RETRACE_E2E_MODES: unknown mode '$m' (none retroactive head tail)" >&2; exit 2 ;;
	esac
done

TAG=e2e$$
WORK=$OUT/work
rm -rf "$WORK"
mkdir -p "$WORK" || exit 1
RESULTS=$OUT/results.txt
: > "$RESULTS"
FAIL=0
T0=$(date +%s)

want() { case ,$ONLY, in *,$1,*) return 0 ;; esac; return 1; }
log() { printf 'e2e [%3ds] %s\n' $(($(date +%s) - T0)) "$*" >&2; }
say() { echo "$*"; echo "$*" >> "$RESULTS"; }

# ----------------------------------------------------------- processes ----
PIDS=()
stop_pid() { # stop_pid PID [wait_s]: SIGTERM, bounded wait, SIGKILL
	local p=$1 n=$(( ${2:-10} * 10 ))
	kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null; return 0; }
	kill -TERM "$p" 2>/dev/null
	while [ $n -gt 0 ] && kill -0 "$p" 2>/dev/null; do sleep 0.1; n=$((n - 1)); done
	if kill -0 "$p" 2>/dev/null; then
		log "pid $p did not stop on SIGTERM: SIGKILL"
		kill -KILL "$p" 2>/dev/null
	fi
	wait "$p" 2>/dev/null
}
cleanup() {
	local p
	for p in "${PIDS[@]}"; do stop_pid "$p" 5; done
	PIDS=()
}
trap cleanup EXIT
trap 'log "interrupted"; cleanup; exit 130' INT TERM
forget() { local p keep=(); for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done; PIDS=("${keep[@]}"); }

wait_file() { # wait_file PATH SECONDS
	local n=$(( $2 * 20 ))
	while [ $n -gt 0 ]; do [ -s "$1" ] && return 0; sleep 0.05; n=$((n - 1)); done
	return 1
}

wait_exists() { # wait_exists PATH SECONDS
	local n=$(( $2 * 20 ))
	while [ $n -gt 0 ]; do [ -e "$1" ] && return 0; sleep 0.05; n=$((n - 1)); done
	return 1
}

# A figure of a `retrace status --json` document: jfig JSON SECTION KEY
jfig() {
	printf '%s' "$1" | grep -o "\"$2\":{[^}]*}" | head -1 | grep -o "\"$3\":[-0-9.]*" |
		head -1 | cut -d: -f2
}
cstat() { "$CLI" status --json --coordinator "$COORD_URL" 2>/dev/null; }
astat() { "$CLI" status --json --pool "$1" 2>/dev/null; }

# CPU ticks (user + system) of the given pids
ticks() {
	local p s=0 f
	for p in "$@"; do
		f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null) || continue
		s=$((s + ${f% *} + ${f#* }))
	done
	echo $s
}
HZ=$(getconf CLK_TCK)

# ------------------------------------------------------------- daemons ----
# start_daemons NAME TOPOLOGY [agent flags...]: a coordinator and one agent per
# host of the topology, with pools of our own (so nothing clashes with others).
DPIDS=(); POOLS=(); PMAP=()
start_daemons() {
	local name=$1 topo=$2 d=$WORK/$1 h line id pool host
	shift 2
	mkdir -p "$d"
	"${ON_AUX_CPU[@]}" "$COORD" --listen tcp://127.0.0.1:0 --collector tcp://127.0.0.1:0 --store "$d/store.db" \
		--ready-file "$d/coord.ready" --settle 0.5 --collect-timeout 10 \
		> "$d/coordinator.log" 2>&1 &
	DPIDS=($!); PIDS+=($!)
	wait_file "$d/coord.ready" 10 || { log "coordinator did not start (see $d/coordinator.log)"; return 1; }
	COORD_URL=$(sed -n 1p "$d/coord.ready"); COLL_URL=$(sed -n 2p "$d/coord.ready")
	STORE=$d/store.db
	POOLS=(); PMAP=()
	while read -r line; do
		set -- $line
		host=$2; id=$4; pool=/$TAG-$name-$host
		"${ON_AUX_CPU[@]}" "$AGENT" --pool="$pool" --agent-id="$id" --listen=tcp://127.0.0.1:0 --unlink \
			--coordinator="$COORD_URL" --collector="$COLL_URL" --ready-file="$d/agent-$host.ready" \
			"${AGENT_FLAGS[@]}" > "$d/agent-$host.log" 2>&1 &
		DPIDS+=($!); PIDS+=($!)
		POOLS+=("$pool"); PMAP+=(-P "$host=$pool")
	done < <(grep -E '^host ' "$topo")
	for pool in "${POOLS[@]}"; do
		host=${pool##*-}
		wait_exists "$d/agent-$host.ready" 10 ||
			{ log "agent $host did not start (see $d/agent-$host.log)"; return 1; }
	done
	return 0
}
stop_daemons() {
	local p
	for p in "${DPIDS[@]}"; do stop_pid "$p" 10; forget "$p"; done
	DPIDS=()
}

# Quiet: no group open, nothing queued or in flight on any agent, twice in a row.
wait_quiet() { # wait_quiet MAX_S
	local end=$(( $(date +%s) + $1 )) c a pool ok opened prev=-1 streak=0
	while [ "$(date +%s)" -lt "$end" ]; do
		c=$(cstat)
		ok=1
		[ "$(jfig "$c" traversal groups_in_flight)" = 0 ] || ok=0
		opened=$(jfig "$c" traversal groups_opened)
		if [ $ok = 1 ]; then
			for pool in "${POOLS[@]}"; do
				a=$(astat "$pool")
				[ "$(jfig "$a" queues trigger_depth)" = 0 ] &&
				[ "$(jfig "$a" reporting coordinator_triggers_waiting)" = 0 ] &&
				[ "$(jfig "$a" reporting slices_in_flight)" = 0 ] &&
				[ "$(jfig "$a" reporting queued_buffers)" = 0 ] || { ok=0; break; }
			done
		fi
		if [ $ok = 1 ] && [ "$opened" = "$prev" ]; then
			streak=$((streak + 1))
			[ $streak -ge 2 ] && return 0
		else
			streak=0
		fi
		prev=$opened
		sleep 0.3
	done
	log "not quiet after $1 s (continuing; what is not collected counts as not captured)"
	return 1
}

# ------------------------------------------------------------ services ----
# run_services DIR TOPOLOGY [run flags...]: retrace-topo run, waits for ready.
RUN_PID=
run_services() {
	local d=$1 topo=$2
	shift 2
	rm -rf "$d"; mkdir -p "$d/run" "$d/truth" "$d/logs"
	"${ON_APP_CPU[@]}" "$TOPO" run --topology "$topo" --run-dir "$d/run" --truth-dir "$d/truth" --log-dir "$d/logs" \
		--wait-s 20 "$@" > "$d/run.log" 2>&1 &
	RUN_PID=$!; PIDS+=($!)
	local n=400
	while [ $n -gt 0 ] && [ ! -e "$d/run/ready" ]; do
		kill -0 "$RUN_PID" 2>/dev/null || { log "retrace-topo run died (see $d/run.log, $d/logs)"; return 1; }
		sleep 0.05; n=$((n - 1))
	done
	[ -e "$d/run/ready" ] || { log "services not ready (see $d/logs)"; return 1; }
}
stop_services() {
	[ -n "$RUN_PID" ] || return 0
	stop_pid "$RUN_PID" 35; forget "$RUN_PID"; RUN_PID=
}
# load DIR TOPOLOGY RATE DURATION [load flags...] -> the summary line in DIR/load.txt
run_load() {
	local d=$1 topo=$2 rate=$3 dur=$4
	shift 4
	"${ON_AUX_CPU[@]}" "$TOPO" load --topology "$topo" --run-dir "$d/run" --rate "$rate" --duration "$dur" \
		--timeout-ms 5000 --max-inflight 2048 "$@" > "$d/load.txt" 2> "$d/load.log"
}
lfig() { grep -o " $2=[-0-9.]*" "$1" | head -1 | cut -d= -f2; }

# retrace-truth on a truth dir or file: sets CAP_PCT CAPTURED FALSE_COH TRIGGERED
check_truth() {
	local out
	out=$("$TRUTH" --store "$STORE" --truth "$@" --json 2>/dev/null) || true
	CAP_PCT=$(printf '%s' "$out" | grep -o '"captured_pct":[0-9.]*' | cut -d: -f2)
	CAPTURED=$(printf '%s' "$out" | grep -o '"captured_coherent":[0-9]*' | cut -d: -f2)
	FALSE_COH=$(printf '%s' "$out" | grep -o '"false_coherent":[0-9]*' | cut -d: -f2)
	TRIGGERED=$(printf '%s' "$out" | grep -o '"triggered":[0-9]*' | cut -d: -f2)
	if [ -z "$FALSE_COH" ]; then
		log "retrace-truth gave no verdict for $*"
		CAP_PCT=0; CAPTURED=0; FALSE_COH=0; TRIGGERED=0; FAIL=1
		return 1
	fi
	if [ "$FALSE_COH" != 0 ]; then
		log "FALSE COHERENT: $FALSE_COH traces (retrace-truth --store $STORE --truth $*)"
		"$TRUTH" --store "$STORE" --truth "$@" --list 5 >&2 || true
		FAIL=1
	fi
	return 0
}

# Keep the truth lines of the traces one of whose lines names trigger ID.
truth_for_trigger() { # truth_for_trigger ID TRUTH_DIR OUT_FILE
	awk -v id="$1" 'FNR == NR { if ($0 ~ (" trigger=" id " ")) want[$1] = 1; next }
		($1 in want)' <(cat "$2"/*.truth) <(cat "$2"/*.truth) > "$3"
}

# Tail check: every span the truth lists for a marked trace arrived before the
# decision (one kept line holds them all). Prints "triggered captured".
tail_check() { # tail_check TRUTH_DIR KEPT_FILE
	awk 'FNR == NR { n = ++nk[$1]; kept[$1, n] = "," $2 ","; next }
	{
		t = $1
		for (i = 2; i <= NF; i++) {
			if ($i ~ /^spans=/) spans[t] = spans[t] "," substr($i, 7)
			if ($i ~ /^trigger=/ && $i != "trigger=0") trig[t] = 1
		}
	}
	END {
		nt = 0; nc = 0
		for (t in trig) {
			nt++
			m = split(substr(spans[t], 2), s, ",")
			for (k = 1; k <= nk[t]; k++) {
				ok = 1
				for (j = 1; j <= m; j++) if (index(kept[t, k], "," s[j] ",") == 0) { ok = 0; break }
				if (ok) { nc++; break }
			}
		}
		print nt, nc
	}' "$2" <(cat "$1"/*.truth)
}

# ------------------------------------------------------ 1. modes x load ----
log "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); quick=$QUICK; out $OUT"
MAIN_DAT=$OUT/e2e-main.dat
want main && echo "# mode load throughput p50_ms p99_ms coherent_pct captured_per_s collector_bytes_s daemon_cpu_pct" > "$MAIN_DAT"

# The same network budget for both collectors: the tail collector takes in at most
# COLL_BW bytes/s; each of the two agents reports at most COLL_BW/2.
AGENT_FLAGS=(--bandwidth=$((COLL_BW / 2)))
if want main; then
start_daemons main "$TWO" || { log "cannot start the daemons"; exit 1; }
TAIL_URL=ipc://$WORK/tail.sock
# Warm-up, not reported: the first traced requests fault in the fresh pools'
# pages (128 MiB per host), which showed as a multi-second p99 in the first point.
log "warm-up: retroactive at ${LOADS%% *} req/s for $WARM s (not reported)"
if run_services "$WORK/warmup" "$TWO" "${PMAP[@]}"; then
	run_load "$WORK/warmup" "$TWO" "${LOADS%% *}" "$WARM" --edge-pct $EDGE_PCT
	stop_services
	wait_quiet $QUIET_MAX
fi
for load in $LOADS; do
	for mode in $MODES; do
		d=$WORK/main-$mode-$load
		flags=(); env_head=()
		case $mode in
		none) flags=(--no-trace) ;;
		retroactive) ;;
		head) flags=(--no-triggers); env_head=(RETRACE_HEAD_SHIFT=$HEAD_SHIFT) ;;
		tail) flags=(--tail "$TAIL_URL") ;;
		esac
		tpid=
		if [ $mode = tail ]; then
			rm -f "$WORK/tail.sock" "$WORK/tail.ready"
			"${ON_AUX_CPU[@]}" "$TAILC" --listen "$TAIL_URL" --kept "$WORK/kept-$load.txt" --decision-wait $TAIL_WAIT \
				--bandwidth $COLL_BW \
				--ready-file "$WORK/tail.ready" > "$WORK/tail-$load.txt" 2> "$WORK/tail-$load.log" &
			tpid=$!; PIDS+=($!)
			wait_exists "$WORK/tail.ready" 5 || { log "tail collector did not start"; FAIL=1; continue; }
		fi
		log "modes: $mode at $load req/s for $DUR s"
		if [ ${#env_head[@]} -gt 0 ]; then export RETRACE_HEAD_SHIFT=$HEAD_SHIFT; fi
		run_services "$d" "$TWO" "${PMAP[@]}" "${flags[@]}" || { FAIL=1; unset RETRACE_HEAD_SHIFT; continue; }
		unset RETRACE_HEAD_SHIFT
		c=$(cstat); b0=$(jfig "$c" collection slice_bytes)
		rc0=$(jfig "$c" collection traces_coherent); ri0=$(jfig "$c" collection traces_incoherent)
		if [ $mode = tail ]; then cp=("$tpid"); else cp=("${DPIDS[@]}"); fi
		k0=$(ticks "${cp[@]}"); w0=$(date +%s.%N)
		run_load "$d" "$TWO" "$load" "$DUR" --edge-pct $EDGE_PCT
		if [ $mode = tail ]; then
			sleep "$(awk -v w="$TAIL_WAIT" 'BEGIN { printf "%.1f", w + 0.5 }')"
		fi
		stop_services
		[ $mode = retroactive ] || [ $mode = head ] && wait_quiet $QUIET_MAX
		k1=$(ticks "${cp[@]}"); w1=$(date +%s.%N)
		c=$(cstat); b1=$(jfig "$c" collection slice_bytes)
		rc1=$(jfig "$c" collection traces_coherent); ri1=$(jfig "$c" collection traces_incoherent)
		if [ $mode = tail ]; then
			stop_pid "$tpid" 10; forget "$tpid"
		fi
		ok=$(lfig "$d/load.txt" ok); failed=$(lfig "$d/load.txt" failed)
		el=$(lfig "$d/load.txt" elapsed_s); p50=$(lfig "$d/load.txt" p50_ms); p99=$(lfig "$d/load.txt" p99_ms)
		dropped=$(lfig "$d/load.txt" dropped); errors=$(lfig "$d/load.txt" errors)
		[ -n "$ok" ] || { log "no load summary (see $d/load.log)"; FAIL=1; continue; }
		thr=$(awk -v a="$ok" -v b="$failed" -v e="$el" 'BEGIN { printf "%.1f", (e > 0 ? (a + b) / e : 0) }')
		cpu=$(awk -v k=$((k1 - k0)) -v hz="$HZ" -v a="$w0" -v b="$w1" 'BEGIN { printf "%.1f", (b > a ? 100 * k / hz / (b - a) : 0) }')
		extra=""
		case $mode in
		none)
			coh=na; cps=0; fc=na; bytes_s=0; cpu=0 ;;
		retroactive | head)
			check_truth "$d/truth"
			coh=$CAP_PCT; fc=$FALSE_COH
			cps=$(awk -v c="$CAPTURED" -v d="$DUR" 'BEGIN { printf "%.2f", c / d }')
			bytes_s=$(awk -v a="${b0:-0}" -v b="${b1:-0}" -v d="$DUR" 'BEGIN { printf "%.0f", (b - a) / d }')
			extra=" edge=$TRIGGERED captured=$CAPTURED collector_bw=$COLL_BW rows_coherent=$(( ${rc1:-0} - ${rc0:-0} )) rows_incoherent=$(( ${ri1:-0} - ${ri0:-0} ))"
			[ $mode = head ] && extra="$extra head_rate=1/$((1 << HEAD_SHIFT))" ;;
		tail)
			read -r nt nc < <(tail_check "$d/truth" "$WORK/kept-$load.txt")
			coh=$(awk -v t="$nt" -v c="$nc" 'BEGIN { printf "%.3f", (t ? 100 * c / t : 0) }')
			fc=na
			cps=$(awk -v c="$nc" -v d="$DUR" 'BEGIN { printf "%.2f", c / d }')
			tb=$(lfig "$WORK/tail-$load.txt" bytes)
			bytes_s=$(awk -v b="${tb:-0}" -v d="$DUR" 'BEGIN { printf "%.0f", b / d }')
			sd=$(grep -ho 'tail_dropped=[0-9]*' "$d"/logs/*.log | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')
			ss=$(grep -ho 'tail_sent=[0-9]*' "$d"/logs/*.log | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')
			ev=$(lfig "$WORK/tail-$load.txt" evicted); late=$(lfig "$WORK/tail-$load.txt" late_spans)
			extra=" edge=$nt captured=$nc collector_bw=$COLL_BW sender_drops=$sd sent=$ss evicted=${ev:-?} late_spans=${late:-?} decision_wait_s=$TAIL_WAIT" ;;
		esac
		say "bench e2e mode=$mode topology=two-service load=$load throughput=$thr p50_ms=$p50 p99_ms=$p99 coherent_pct=$coh captured_per_s=$cps false_coherent=$fc collector_bytes_s=$bytes_s daemon_cpu_pct=$cpu dropped=$dropped errors=$errors$extra"
		echo "$mode $load $thr $p50 $p99 $( [ "$coh" = na ] && echo 0 || echo "$coh") $cps $bytes_s $cpu" >> "$MAIN_DAT"
	done
done
stop_daemons
fi

# ------------------------------------------------------------ 2. overload ----
OVL_DAT=$OUT/e2e-overload.dat
want overload && echo "# trigger pct captured_pct false_coherent" > "$OVL_DAT"
AGENT_FLAGS=(--bandwidth=$OVL_BW)
want overload && log "overload: triggers 11/12/13 on 0.1/1/50 % at $OVL_RATE req/s for $OVL_DUR s, agents' bandwidth $OVL_BW B/s"
if ! want overload; then
	:
elif start_daemons overload "$TWO"; then
	d=$WORK/overload-run
	if run_services "$d" "$TWO" "${PMAP[@]}" --edge-trigger 11=0.1 --edge-trigger 12=1 --edge-trigger 13=50; then
		run_load "$d" "$TWO" "$OVL_RATE" "$OVL_DUR" --edge-pct 0
		stop_services
		wait_quiet $OVL_QUIET
		c=$(cstat)
		log "overload: coordinator groups_dropped=$(jfig "$c" traversal groups_dropped) traces_incomplete=$(jfig "$c" collection traces_incomplete)"
		for tp in 11:0.1 12:1 13:50; do
			id=${tp%%:*}; pct=${tp#*:}
			truth_for_trigger "$id" "$d/truth" "$d/truth-$id.txt"
			if [ -s "$d/truth-$id.txt" ]; then
				check_truth "$d/truth-$id.txt"
			else
				CAP_PCT=na; FALSE_COH=0; TRIGGERED=0; CAPTURED=0
			fi
			say "bench e2e-overload trigger=$id pct=$pct captured_pct=$CAP_PCT false_coherent=$FALSE_COH triggered=$TRIGGERED captured=$CAPTURED bandwidth_b_s=$OVL_BW load=$OVL_RATE"
			echo "$id $pct ${CAP_PCT/na/0} $FALSE_COH" >> "$OVL_DAT"
		done
	else
		FAIL=1
	fi
else
	FAIL=1
fi
stop_daemons

# ------------------------------------------------------------- 3. horizon ----
HZ_DAT=$OUT/e2e-horizon.dat
want horizon && echo "# pool_mib delay_s captured_pct horizon_ms" > "$HZ_DAT"
want horizon || HZ_POOLS=
for pool_mib in $HZ_POOLS; do
	AGENT_FLAGS=(--buffers=$((pool_mib * 32)) --buffer-size=32768)
	start_daemons "horizon$pool_mib" "$TWO" || { FAIL=1; continue; }
	for delay in $HZ_DELAYS; do
		d=$WORK/horizon-$pool_mib-$delay
		ms=$(awk -v s="$delay" 'BEGIN { printf "%d", s * 1000 }')
		log "horizon: pool $pool_mib MiB, trigger $delay s after completion, $HZ_RATE req/s for $HZ_DUR s"
		run_services "$d" "$TWO" "${PMAP[@]}" --trigger-delay-ms "$ms" || { FAIL=1; continue; }
		run_load "$d" "$TWO" "$HZ_RATE" "$HZ_DUR" --edge-pct $EDGE_PCT
		sleep "$(awk -v s="$delay" 'BEGIN { printf "%.2f", s + 0.3 }')"
		st=$(astat "${POOLS[1]}")
		hzus=$(jfig "$st" traces event_horizon_p50_us)
		util=$(jfig "$st" buffers utilisation)
		stop_services
		wait_quiet $QUIET_MAX
		check_truth "$d/truth"
		hzms=$(awk -v u="${hzus:-0}" 'BEGIN { printf "%.0f", u / 1000 }')
		say "bench e2e-horizon pool_mib=$pool_mib delay_s=$delay captured_pct=$CAP_PCT false_coherent=$FALSE_COH edge=$TRIGGERED captured=$CAPTURED event_horizon_ms=$hzms utilisation=${util:-0} load=$HZ_RATE"
		echo "$pool_mib $delay $CAP_PCT $hzms" >> "$HZ_DAT"
	done
	stop_daemons
done

# ------------------------------------------------------------ 4. estimate ----
# Each host records its own consistent share of the traces (the same trace-id
# hash everywhere, so back's 1/8 lies inside front's 1/2); the entry triggers
# every request, so the store holds every trace some host recorded. `retrace
# estimate` weighs each stored span by the inverse of its host's rate (Ertl);
# it must give back how many requests each service served — their own truth
# files, not the coordinator's — within three standard errors.
EST_DAT=$OUT/e2e-estimate.dat
if want estimate; then
	echo "# service host_rate truth estimate se naive" > "$EST_DAT"
	AGENT_FLAGS=()
	IFS='|' read -r -a est_configs <<< "$EST_CONFIGS"
	for ci in "${!est_configs[@]}"; do
		EST_SHIFTS=${est_configs[$ci]}
		start_daemons "estimate$ci" "$TWO" || { FAIL=1; continue; }
		d=$WORK/estimate-run-$ci
		sflags=(); for x in $EST_SHIFTS; do sflags+=(--host-sample-shift "$x"); done
		log "estimate: host rates $EST_SHIFTS (K: 2^-K), every request triggered, $EST_RATE req/s for $EST_DUR s"
		if run_services "$d" "$TWO" "${PMAP[@]}" "${sflags[@]}"; then
			run_load "$d" "$TWO" "$EST_RATE" "$EST_DUR" --edge-pct 100
			stop_services
			wait_quiet $QUIET_MAX
			for pair in api:front backend:back; do
				svc=${pair%%:*}; host=${pair#*:}
				k=$(for x in $EST_SHIFTS; do [ "${x%%=*}" = "$host" ] && echo "${x#*=}"; done)
				case $k in *%) rate=$k ;; *) rate=1/$((1 << k)) ;; esac
				truth=$(grep -c . "$d/truth/$svc.truth" 2>/dev/null || echo 0)
				js=$("$CLI" estimate --store "$STORE" --where "service=$svc" --json 2>"$d/estimate-$svc.err") ||
					{ log "retrace estimate failed (see $d/estimate-$svc.err)"; FAIL=1; continue; }
				echo "$js" > "$d/estimate-$svc.json"
				read -r est se naive < <(printf '%s' "$js" | python3 -c '
import json, sys
t = json.load(sys.stdin)["all"]["traces"]
print(t["estimate"]["estimate"], round(t["estimate"]["stderr"], 1), t["naive"]["estimate"])')
				ok=$(awk -v e="$est" -v t="$truth" -v s="$se" 'BEGIN { d = e - t; if (d < 0) d = -d; print (d <= 3 * s) ? "yes" : "no" }')
				# A statistical figure (outside 3 se about 1 run in 370), reported, not
				# failed on: tests/estimate holds the estimator's bias to account.
				[ "$ok" = yes ] || log "WARNING: the estimate of $svc is outside 3 standard errors of its truth"
				say "bench e2e-estimate service=$svc host_rate=$rate truth=$truth estimate=$est se=$se naive=$naive within_3se=$ok load=$EST_RATE"
				echo "$svc $rate $truth $est $se $naive" >> "$EST_DAT"
			done
		else
			FAIL=1
		fi
		stop_daemons
	done
fi

# --------------------------------------------------------------- plots ----
for f in "$MAIN_DAT" "$OVL_DAT" "$HZ_DAT"; do [ -e "$f" ] || echo "# (not run)" > "$f"; done
if command -v gnuplot > /dev/null 2>&1; then
	log "plots: gnuplot into $OUT"
	gnuplot > "$OUT/gnuplot.log" 2>&1 <<EOF || log "gnuplot failed (see $OUT/gnuplot.log)"
set terminal pngcairo size 900,560 noenhanced font ",10"
set key top left
set grid
set output "$OUT/e2e-main.png"
set multiplot layout 1,2 title "retrace end to end, two-service topology (same run)"
set title "edge cases captured coherently"
set xlabel "offered load (req/s)"; set ylabel "% of edge cases"; set yrange [0:105]
set offsets graph 0.02, graph 0.05, 0, 0
plot for [m in "retroactive head tail"] sprintf("< grep '^%s ' $MAIN_DAT", m) using 2:6 with linespoints title m
set title "throughput"
set ylabel "req/s"; set yrange [0:*]
plot for [m in "none retroactive head tail"] sprintf("< grep '^%s ' $MAIN_DAT", m) using 2:3 with linespoints title m
unset multiplot
unset offsets
set output "$OUT/e2e-overload.png"
set title "trigger storm: share of each trigger's traces captured coherently"
set xlabel "trigger (share of requests)"; set ylabel "% captured coherently"; set yrange [0:105]
set style fill solid 0.6; set boxwidth 0.6
plot "$OVL_DAT" using 0:3:xtic(sprintf("id %d: %s %%", \$1, strcol(2))) with boxes notitle
set output "$OUT/e2e-horizon.png"
set title "event horizon: trigger delay after completion vs coherent capture"
set xlabel "trigger delay (s)"; set ylabel "% captured coherently"; set yrange [0:105]
plot for [p in "$HZ_POOLS"] "$HZ_DAT" using 2:(\$1 == p ? \$3 : 1/0) with linespoints title sprintf("pool %s MiB", p)
EOF
else
	log "plots skipped: gnuplot is not installed (Debian: apt-get install gnuplot-nox); data files are in $OUT"
fi

log "done in $(($(date +%s) - T0)) s: $(wc -l < "$RESULTS") figures in $RESULTS"
if [ $FAIL != 0 ]; then
	log "FAILED: a false coherent trace or a step that did not run (see above)"
	exit 1
fi
exit 0
