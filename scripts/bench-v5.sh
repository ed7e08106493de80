#!/usr/bin/env bash
# bench-v5.sh — the broker's CPU per message over the RocketMQ 5 gRPC
# protocol against Bolide's own SDK, side by side on one broker, with the
# same load: 16 producers sending 1 KiB messages synchronously while 4
# consumers of one group read them. The v5 side is
# test/rocketmq-v5/cmd/v5bench (the official Go client: 16 producers, 4
# simple consumers receiving and acking, plaintext); the SDK side is
# `bolide bench produce --producers 16` beside `bolide bench consume --pop
# --consumers 4` (the framed path; simple consumers over POP, as the v5 side; SDK_POP=0 pulls). The figure is CPU
# seconds of the broker process (utime + stime from /proc) per million
# messages sent (and consumed); throughput of the sends is printed too.
# Each run has a topic of its own; runs alternate which client goes first.
# The broker start, topic creation and measurement are shared with
# bench-remoting.sh (scripts/bench-lib.sh).
#
# Settings (environment):
#   MSGS        messages per run                    (100000)
#   REPS        runs of each client                 (3)
#   PRODUCERS   concurrent senders                  (16)
#   CONSUMERS   concurrent consumers                (4; 0: the send path alone)
#   SDK_POP     1: the SDK's consumers are simple consumers over POP, as
#               the v5 side's (bench consume --pop); 0: pull consumers (1)
#   SIZE        body bytes                          (1024)
#   FLUSH       broker flush mode                   (async)
#   DATA_DIR    broker data                         (.bench/v5/data)
#   OUT         copy of the table                   (.bench/bench-v5.md)
#
# Usage: scripts/bench-v5.sh   (or: make bench-v5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
MSGS=${MSGS:-100000}
REPS=${REPS:-3}
PRODUCERS=${PRODUCERS:-16}
CONSUMERS=${CONSUMERS:-4}
SDK_POP=${SDK_POP:-1}
SIZE=${SIZE:-1024}
FLUSH=${FLUSH:-async}
work=$root/.bench/v5
DATA_DIR=${DATA_DIR:-$work/data}
OUT=${OUT:-$root/.bench/bench-v5.md}

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
bench_build test/rocketmq-v5 ./cmd/v5bench
bench_start
topics=(warm-sdk warm-v5)
for rep in $(seq "$REPS"); do topics+=("sdk-$rep" "v5-$rep"); done
for t in "${topics[@]}"; do bench_topic "bench-$t" 8; done

run_sdk() { # topic count
	local cpid=
	if ((CONSUMERS > 0)); then
		local pop=()
		((SDK_POP)) && pop=(--pop)
		"$bin/bolide" -n "$ns" bench consume --topic "$1" --consumers "$CONSUMERS" --count "$2" --idle 10s "${pop[@]}" -o json \
			>/dev/null 2>&1 &
		cpid=$!
	fi
	"$bin/bolide" -n "$ns" bench produce --topic "$1" --count "$2" --producers "$PRODUCERS" --size "$SIZE" \
		-o json 2>/dev/null | tail -1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["msgsPerSec"]))'
	if [[ -n $cpid ]]; then wait "$cpid" || true; fi
}
run_v5() { # topic count
	"$bin/v5bench" --endpoint "$ns" --topic "$1" --count "$2" --producers "$PRODUCERS" --consumers "$CONSUMERS" \
		--size "$SIZE" --json 2>>"$work/v5bench.log" | tail -1 |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["sendPerSec"]))'
}

# Warm both paths (connections, routes, page cache of the first segment).
run_sdk bench-warm-sdk 20000 >/dev/null
run_v5 bench-warm-v5 20000 >/dev/null

for rep in $(seq "$REPS"); do
	if ((rep % 2)); then
		measure v5 "$rep" run_v5 "bench-v5-$rep" "$MSGS"
		measure sdk "$rep" run_sdk "bench-sdk-$rep" "$MSGS"
	else
		measure sdk "$rep" run_sdk "bench-sdk-$rep" "$MSGS"
		measure v5 "$rep" run_v5 "bench-v5-$rep" "$MSGS"
	fi
done

v_cpu=$(echo "${cpus[v5]}" | median)
s_cpu=$(echo "${cpus[sdk]}" | median)
{
	echo "| path | broker CPU µs per msg (runs) | median | send msgs/s (runs) |"
	echo "|---|---|---|---|"
	echo "| RocketMQ 5 gRPC (v5bench: rocketmq-clients/golang/v5, $PRODUCERS producers, $CONSUMERS simple consumers) | ${cpus[v5]}| $v_cpu | ${rates[v5]}|"
	echo "| Bolide SDK, framed (bolide bench produce + consume$( ((SDK_POP)) && echo " --pop"), $PRODUCERS producers, $CONSUMERS consumers) | ${cpus[sdk]}| $s_cpu | ${rates[sdk]}|"
	echo
	echo "v5 / SDK: $(python3 -c "print(f'{$v_cpu/$s_cpu:.2f}')")"
	echo "($SIZE B bodies, $MSGS msgs per run sent$( ((CONSUMERS > 0)) && echo " and consumed"), flush $FLUSH, $(nproc) cores, $(date -u +%FT%TZ))"
} | tee "$OUT"
