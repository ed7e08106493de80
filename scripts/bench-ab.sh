#!/usr/bin/env bash
# bench-ab.sh — two builds of Bolide against each other on the workloads of
# bench-vs-nats.sh, alternated: each run starts a fresh NameServer and
# broker of one build (store on this disk), sends, and stops them; the
# builds take turns in the order A B B A (then B A A B, ...), with `sync`
# and a pause between runs, so that neither build always runs on a cooler
# machine or after the other's dirty pages; just before each timed run,
# WARM_MIB of memory is touched and freed (warm_memory in
# scripts/bench-lib.sh). For each build and workload it
# prints the median throughput, the broker's and the client's CPU seconds
# per million messages (utime + stime from /proc; the client's from this
# shell's reaped children), and B's ratios to A: the CPU figures are the
# steadier ones on a shared machine.
#
# Usage: scripts/bench-ab.sh A [B]
#   A, B  a git revision (built into .bench/ab/release-<commit>/) or a
#         directory holding bolide, bolide-nameserver and bolide-broker; B
#         defaults to the work tree as it is. Revisions and the work tree are
#         built as `make release` builds them (bench_go_build: static,
#         -trimpath, stripped), so that the binaries compared are the shipped
#         ones.
#
# Settings (environment):
#   ROUNDS     pairs of runs of each workload (each pair: both builds)  (2)
#   WORKLOADS  which of: p1 p16 batch backlog e2e             (p1 p16 batch e2e)
#   MSGS_1     messages, 1 producer                                     (60000)
#   MSGS_16    messages, 16 producers                                   (200000)
#   MSGS_BATCH messages, batched (batch 64, 16 in flight)               (1000000)
#   MSGS_BACKLOG messages of the backlog read from the start, 500 a pull (1000000;
#              sent first, batched, and not counted)
#   E2E_RATE   end-to-end run: messages/s, for E2E_DURATION (a Go duration) (10000, 15s)
#   FLUSH      the brokers' flush mode                                  (async)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ROUNDS=${ROUNDS:-2}
WORKLOADS=${WORKLOADS:-p1 p16 batch e2e}
MSGS_1=${MSGS_1:-60000}
MSGS_16=${MSGS_16:-200000}
MSGS_BATCH=${MSGS_BATCH:-1000000}
MSGS_BACKLOG=${MSGS_BACKLOG:-1000000}
E2E_RATE=${E2E_RATE:-10000}
E2E_DURATION=${E2E_DURATION:-15s}
FLUSH=${FLUSH:-async}
(($# >= 1 && $# <= 2)) || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

say() { echo "bench-ab: $*" >&2; }
die() { say "$*"; exit 1; }
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
base=$root/.bench/ab
mkdir -p "$base"

# build REV-OR-DIR prints the directory of that build's binaries.
build() {
	if [[ -x $1/bolide-broker ]]; then
		(cd "$1" && pwd)
		return
	fi
	if [[ $1 == . ]]; then
		local out=$base/worktree
		bench_go_build "$out" ./cmd/bolide ./cmd/bolide-nameserver ./cmd/bolide-broker >&2
		echo "$out"
		return
	fi
	local commit out src
	commit=$(git rev-parse --verify "$1^{commit}")
	out=$base/release-$commit
	if [[ ! -x $out/bolide-broker ]]; then
		src=$(mktemp -d "$base/src.XXXXXX")
		git worktree add -q --detach "$src" "$commit"
		(cd "$src" && bench_go_build "$out" ./cmd/bolide ./cmd/bolide-nameserver ./cmd/bolide-broker) >&2
		git worktree remove --force "$src"
	fi
	echo "$out"
}
A=$(build "$1")
B=$(build "${2:-.}")
echo "bench-ab: A = $1 ($A), B = ${2:-the work tree} ($B)" >&2

pids=()
dir=
stop() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
	[[ -n $dir ]] && rm -rf "$dir"
	dir=
}
trap stop EXIT

# run BIN WORKLOAD prints "msgs/s broker-cpu-s-per-M client-cpu-s-per-M"
# for one fresh cluster, or, for e2e, "p99-ms ...".
run() {
	local bin=$1 w=$2 ns broker n out t0 t1 c0 c1 me=$BASHPID
	trap stop EXIT # a command substitution's shell: its own trap
	dir=$(mktemp -d "$base/run.XXXXXX")
	"$bin/bolide-nameserver" --listen 127.0.0.1:0 --gossip off --admin-listen off --addr-file "$dir/ns.addr" \
		>"$dir/ns.log" 2>&1 &
	pids+=($!)
	wait_file "$dir/ns.addr" $! bolide-nameserver
	ns=$(cat "$dir/ns.addr")
	"$bin/bolide-broker" --namesrv "$ns" --listen 127.0.0.1:0 --ha-listen 127.0.0.1:0 --gossip off --admin-listen off \
		--store-dir "$dir/broker" --broker-name broker-a --flush "$FLUSH" --addr-file "$dir/broker.addr" \
		>"$dir/broker.log" 2>&1 &
	broker=$!
	pids+=("$broker")
	wait_file "$dir/broker.addr" "$broker" bolide-broker
	until "$bin/bolide" -n "$ns" cluster list -o json 2>/dev/null | grep -q '"broker":"broker-a"'; do sleep 0.1; done
	"$bin/bolide" -n "$ns" topic create t --queues 8 >/dev/null
	local args=(bench produce --topic t --size 1024)
	case $w in
	p1)
		n=$MSGS_1
		args+=(--producers 1)
		;;
	p16)
		n=$MSGS_16
		args+=(--producers 16)
		;;
	batch)
		n=$MSGS_BATCH
		args+=(--batch 64 --async --inflight 16)
		;;
	backlog)
		n=$MSGS_BACKLOG
		"$bin/bolide" -n "$ns" "${args[@]}" --batch 64 --async --inflight 16 --count "$n" >/dev/null 2>&1
		args=(bench consume --topic t --pull-batch 500)
		;;
	e2e)
		n=$(awk -v r="$E2E_RATE" -v d="$(seconds "$E2E_DURATION")" 'BEGIN { printf "%.0f", r * (d + 1) }')
		args=(bench e2e --topic t --rate "$E2E_RATE" --duration "$E2E_DURATION" --warmup 1s --size 1024)
		;;
	esac
	[[ $w == e2e || $w == backlog ]] || "$bin/bolide" -n "$ns" "${args[@]}" --count 2000 >/dev/null 2>&1 # warm-up
	warm_memory >/dev/null # the run's new pages are not ones the host took back (scripts/bench-lib.sh)
	t0=$(awk '{print $14 + $15}' "/proc/$broker/stat")
	c0=$(awk '{print $16 + $17}' "/proc/$me/stat")
	if [[ $w == e2e ]]; then
		out=$("$bin/bolide" -n "$ns" "${args[@]}" -o json 2>/dev/null | tail -n 1)
	else
		out=$("$bin/bolide" -n "$ns" "${args[@]}" --count "$n" -o json 2>/dev/null | tail -n 1)
	fi
	t1=$(awk '{print $14 + $15}' "/proc/$broker/stat")
	c1=$(awk '{print $16 + $17}' "/proc/$me/stat")
	stop
	local key=msgsPerSec
	[[ $w == e2e ]] && key=p99
	awk -v v="$(jnum - "$key" <<<"$out")" -v t=$((t1 - t0)) -v c=$((c1 - c0)) -v hz="$ticks" -v n="$n" \
		'BEGIN { if (v == "") exit 1; printf "%s %.1f %.1f\n", v, t / hz / n * 1e6, c / hz / n * 1e6 }'
}

declare -A figs
for w in $WORKLOADS; do
	for ((r = 0; r < ROUNDS; r++)); do
		order=(A B B A)
		((r % 2)) && order=(B A A B)
		for v in "${order[@]}"; do
			sync
			sleep 2
			bin=$A
			[[ $v == B ]] && bin=$B
			f=$(run "$bin" "$w") || { echo "bench-ab: $w on $v failed" >&2; continue; }
			echo "bench-ab: $w $v: $f" >&2
			read -r rate cpu ccpu <<<"$f"
			figs[$w-$v-rate]+="$rate"$'\n'
			figs[$w-$v-cpu]+="$cpu"$'\n'
			figs[$w-$v-ccpu]+="$ccpu"$'\n'
		done
	done
done

echo "### A/B: $1 against ${2:-the work tree} ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
echo "$(nproc) vCPU, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; $FLUSH flush; medians of $((ROUNDS * 2)) runs each, alternated."
echo
echo "| workload | A | B | B / A | A broker CPU s / M msgs | B broker CPU s / M msgs | B / A | A client CPU s / M | B client CPU s / M | B / A |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for w in $WORKLOADS; do
	ra=$(median <<<"${figs[$w-A-rate]:-}")
	rb=$(median <<<"${figs[$w-B-rate]:-}")
	ca=$(median <<<"${figs[$w-A-cpu]:-}")
	cb=$(median <<<"${figs[$w-B-cpu]:-}")
	ka=$(median <<<"${figs[$w-A-ccpu]:-}")
	kb=$(median <<<"${figs[$w-B-ccpu]:-}")
	case $w in
	p1) label="1 producer, synchronous (msgs/s)" ;;
	p16) label="16 producers, synchronous (msgs/s)" ;;
	batch) label="batched: batch 64, 16 in flight (msgs/s)" ;;
	backlog) label="consume a backlog of $MSGS_BACKLOG, 500 a pull (msgs/s)" ;;
	e2e) label="end to end at $E2E_RATE msgs/s (p99 ms)" ;;
	esac
	awk -v l="$label" -v ra="$ra" -v rb="$rb" -v ca="$ca" -v cb="$cb" -v ka="$ka" -v kb="$kb" -v ms="$([[ $w == e2e ]] && echo 1)" 'BEGIN {
		f = ms ? "%.2f" : "%.0f"
		printf "| %s | " f " | " f " | %s | %s | %s | %s | %s | %s | %s |\n", l, ra, rb, (ra > 0 ? sprintf("%.2f×", rb / ra) : "–"),
			ca, cb, (ca > 0 ? sprintf("%.2f×", cb / ca) : "–"), ka, kb, (ka > 0 ? sprintf("%.2f×", kb / ka) : "–") }'
done
