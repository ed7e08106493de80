#!/usr/bin/env bash
# bench-dedup.sh — what the broker's deduplication window costs a send: the
# broker's CPU per message and the send rate of `bolide bench produce`
# (every message carries the unique id the SDK gives it) with the window on
# (--dedup-window 2m, the default) and off (--dedup-window 0), alternating
# which goes first, on a fresh broker each run.
#
# Settings (environment):
#   MSGS        messages per run                   (200000)
#   REPS        runs of each mode                  (3)
#   PRODUCERS   concurrent producers               (16)
#   SIZE        body bytes                         (1024)
#   FLUSH       the broker's flush mode            (async)
#   OUT         copy of the table                  (.bench/bench-dedup.md)
#
# Usage: scripts/bench-dedup.sh   (or: make bench-dedup)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
MSGS=${MSGS:-200000}
REPS=${REPS:-3}
PRODUCERS=${PRODUCERS:-16}
SIZE=${SIZE:-1024}
FLUSH=${FLUSH:-async}
work=$root/.bench/dedup
DATA_DIR=${DATA_DIR:-$work/data}
OUT=${OUT:-$root/.bench/bench-dedup.md}
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
bench_build

run_frame() { # count
	"$bin/bolide" -n "$ns" bench produce --topic bench --count "$1" --producers "$PRODUCERS" --size "$SIZE" \
		-o json 2>/dev/null | tail -1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["msgsPerSec"]))'
}

# one MODE REP: a fresh NameServer and broker, a warm-up, one measured run.
one() {
	local mode=$1 rep=$2 window=2m
	[[ $mode == off ]] && window=0
	bench_start --dedup-window "$window"
	bench_topic bench 8
	run_frame 20000 >/dev/null
	measure "$mode" "$rep" run_frame "$MSGS"
	for p in "${bench_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	bench_pids=()
}

for rep in $(seq "$REPS"); do
	if ((rep % 2)); then
		one on "$rep"
		one off "$rep"
	else
		one off "$rep"
		one on "$rep"
	fi
done

on_cpu=$(echo "${cpus[on]}" | median)
off_cpu=$(echo "${cpus[off]}" | median)
on_rate=$(echo "${rates[on]}" | median)
off_rate=$(echo "${rates[off]}" | median)
{
	echo "| window | broker CPU µs per msg (runs) | median | msgs/s (runs) | median |"
	echo "|---|---|---|---|---|"
	echo "| on (2 min) | ${cpus[on]}| $on_cpu | ${rates[on]}| $on_rate |"
	echo "| off | ${cpus[off]}| $off_cpu | ${rates[off]}| $off_rate |"
	echo
	echo "CPU per message on / off: $(python3 -c "print(f'{$on_cpu/$off_cpu:.2f}')"); rate on / off: $(python3 -c "print(f'{$on_rate/$off_rate:.2f}')")"
	echo "($MSGS messages of $SIZE bytes per run, $PRODUCERS producers, flush $FLUSH, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ))"
} | tee "$OUT"
