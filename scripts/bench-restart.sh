#!/usr/bin/env bash
# bench-restart.sh — how long a broker of many queues takes to come back
# after a crash. It starts a NameServer and a broker (async flush), creates
# TOPICS topics of QUEUES queues, sends to all of them (one pass, so every
# queue has its files), then sends again and SIGKILLs the broker KILL_AFTER
# seconds into that, drops the page cache (DROP_CACHES=1: a power cycle's
# cold start, as root) and restarts it on the same store. It prints the time
# from the restart to the broker listening and the store's own account of
# its recovery (ConsumeQueues recovered and put back from the staging
# journal, units cut, records dispatched again).
#
#   BOLIDE_BIN   directory with bolide, bolide-nameserver, bolide-broker
#                (default: built from this tree as `make release` does)
#   TOPICS (10000), QUEUES (8), PRODUCERS (1000), KILL_AFTER (25),
#   DROP_CACHES (1), DATA_DIR (.bench/data-restart)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/bench-lib.sh

TOPICS=${TOPICS:-10000}
QUEUES=${QUEUES:-8}
PRODUCERS=${PRODUCERS:-1000}
KILL_AFTER=${KILL_AFTER:-25}
DROP_CACHES=${DROP_CACHES:-1}
DATA_DIR=${DATA_DIR:-$root/.bench/data-restart}

say() { printf 'bench-restart: %s\n' "$*" >&2; }

bin=${BOLIDE_BIN:-}
if [[ -z $bin ]]; then
	bin=$root/.bench/bin-restart
	mkdir -p "$bin"
	say "building Bolide into $bin"
	bench_go_build "$bin" ./cmd/bolide ./cmd/bolide-nameserver ./cmd/bolide-broker
fi

pids=()
stop() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$DATA_DIR/broker" # gigabytes of store; the logs stay in $DATA_DIR
	inodes_freed              # 80 000 queues' files: bench-scale lets them age
}
trap stop EXIT

rm -rf "$DATA_DIR"
mkdir -p "$DATA_DIR"
"$bin/bolide-nameserver" --listen 127.0.0.1:0 --gossip off --admin-listen off --addr-file "$DATA_DIR/ns.addr" \
	>"$DATA_DIR/ns.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s $DATA_DIR/ns.addr ]] && break; sleep 0.1; done
ns=$(cat "$DATA_DIR/ns.addr")

# start_broker starts the broker on the store and waits until it listens
# (up to 10 minutes); it sets broker_pid and listening (seconds).
start_broker() {
	rm -f "$DATA_DIR/broker.addr"
	local t0 t1
	t0=$(date +%s.%N)
	"$bin/bolide-broker" --namesrv "$ns" --listen 127.0.0.1:0 --ha-listen 127.0.0.1:0 --gossip off --admin-listen off \
		--store-dir "$DATA_DIR/broker" --broker-name broker-a --flush async --addr-file "$DATA_DIR/broker.addr" \
		>>"$DATA_DIR/broker.log" 2>&1 &
	broker_pid=$!
	pids+=("$broker_pid")
	for _ in $(seq 12000); do
		[[ -s $DATA_DIR/broker.addr ]] && break
		kill -0 "$broker_pid" 2>/dev/null || { say "the broker died; see $DATA_DIR/broker.log"; exit 1; }
		sleep 0.05
	done
	t1=$(date +%s.%N)
	listening=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
}

start_broker
until "$bin/bolide" -n "$ns" cluster list -o json 2>/dev/null | grep -q '"broker":"broker-a"'; do sleep 0.2; done
say "creating $TOPICS topics of $QUEUES queues"
"$bin/bolide" -n "$ns" bench create-topics --topic scale --topics "$TOPICS" --queues "$QUEUES" --concurrency 32 -o json >/dev/null
say "one pass over them"
"$bin/bolide" -n "$ns" bench produce --topic scale --topics "$TOPICS" --producers "$PRODUCERS" --count $((TOPICS * 20)) \
	--size 1024 -o json >/dev/null 2>&1
say "sending again; SIGKILL after ${KILL_AFTER}s"
"$bin/bolide" -n "$ns" bench produce --topic scale --topics "$TOPICS" --producers "$PRODUCERS" --count 100000000 \
	--size 1024 -o json >/dev/null 2>&1 &
client=$!
sleep "$KILL_AFTER"
kill -9 "$broker_pid"
kill "$client" 2>/dev/null || true
wait "$client" 2>/dev/null || true
journal=$(stat -c %s "$DATA_DIR/broker/store/consumequeue/staged.journal" 2>/dev/null || echo 0)
sync
if [[ $DROP_CACHES == 1 ]]; then
	echo 3 >/proc/sys/vm/drop_caches || say "could not drop the page cache (not root?)"
fi
before=$(wc -l <"$DATA_DIR/broker.log")
start_broker
say "restarted: listening after ${listening}s (staging journal ${journal} bytes at the kill)"
echo "restart to listening: ${listening} s; staging journal at the kill: ${journal} bytes"
tail -n +$((before + 1)) "$DATA_DIR/broker.log" |
	grep -E $'\t(consumequeue opened|consumequeue truncated|store opened)\t' | cut -f5-
