#!/usr/bin/env bash
# bench-filter.sh — the cost of SQL92 filtering on the broker (issue 22): a
# topic is filled with N messages whose property bucket is the message's
# number modulo 100 (`bolide bench produce --buckets 100`), so the condition
# "bucket = 7" selects 1 % of them; then the whole backlog is consumed by a
# fresh group (`bolide bench consume`) and, separately, through the SQL92
# filter (`bolide bench consume --sql "bucket = 7"`). For each run: the
# messages the broker went through per second (scanned: the backlog over
# first to last receipt), the messages received per second, and the broker
# process's CPU seconds (utime + stime from /proc) for the run. Runs
# alternate which one goes first (the page cache favours the second).
# With PROFILE=1 a CPU profile of the broker (PROF_SECONDS, 5) is taken during the
# first filtered run and its top functions printed.
#
# Settings (environment):
#   N           messages in the backlog               (10000000)
#   SIZE        body bytes                            (256)
#   COND        the SQL92 condition                   (bucket = 7)
#   BUCKETS     values of the bucket property         (100)
#   QUEUES      queues of the topic                   (8)
#   REPS        runs of each kind                     (2)
#   CONSUMERS   consumers per run                     (1)
#   PULL_BATCH  messages asked for per pull           (32)
#   FLUSH       broker flush mode                     (async)
#   PROFILE     1: profile the broker's filtered scan (0)
#   PROF_SECONDS  length of that profile                (5)
#   DATA_DIR    broker data (wiped at start and exit) (.bench/filter/data)
#   OUT         copy of the table                     (.bench/bench-filter.md)
#
# Usage: scripts/bench-filter.sh   (or: make bench-filter; N=1000000 for a
# shorter run)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
N=${N:-10000000}
SIZE=${SIZE:-256}
COND=${COND:-bucket = 7}
BUCKETS=${BUCKETS:-100}
QUEUES=${QUEUES:-8}
REPS=${REPS:-2}
CONSUMERS=${CONSUMERS:-1}
PULL_BATCH=${PULL_BATCH:-32}
FLUSH=${FLUSH:-async}
PROFILE=${PROFILE:-0}
PROF_SECONDS=${PROF_SECONDS:-5}
work=$root/.bench/filter
DATA_DIR=${DATA_DIR:-$work/data}
OUT=${OUT:-$root/.bench/bench-filter.md}
topic=bench-filter

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
bench_build
admin_port=$(bench_port)
bench_start --admin-listen "127.0.0.1:$admin_port"
bench_topic "$topic" "$QUEUES"

echo "filling $topic with $N messages of $SIZE B (property bucket = i % $BUCKETS)" >&2
t0=$(date +%s.%N)
"$bin/bolide" -n "$ns" bench produce --topic "$topic" --count "$N" --size "$SIZE" --buckets "$BUCKETS" \
	--producers 4 --batch 32 --async --inflight 8 -o json 2>/dev/null |
	python3 -c 'import json,sys; d=json.load(sys.stdin); print("produced %d msgs at %.0f msgs/s, %d errors" % (d["messages"], d["msgsPerSec"], d["errors"]), file=sys.stderr)'
# bench consume reads the backlog its start finds: wait for dispatch.
for _ in $(seq 600); do
	have=$("$bin/bolide" -n "$ns" topic status "$topic" -o json | python3 -c 'import json,sys; print(sum(json.loads(l)["messages"] for l in sys.stdin if l.strip()))')
	((have >= N)) && break
	sleep 1
done
echo "backlog of $have messages ready after $(python3 -c "print(f'{$(date +%s.%N)-$t0:.0f}')") s" >&2
du -sh "$DATA_DIR" >&2

want=$(python3 -c "print(sum(1 for i in range($N) if i % $BUCKETS == 7))")
declare -A scanned received cpu_s
run() { # kind rep
	local kind=$1 rep=$2 before after j args=()
	if [[ $kind == sql ]]; then
		args=(--sql "$COND")
		[[ $COND == "bucket = 7" ]] && args+=(--count "$want")
	fi
	sync
	before=$(cpu)
	if [[ $kind == sql && $PROFILE == 1 && $rep == 1 ]]; then
		curl -s -o "$work/filter.pprof" "http://127.0.0.1:$admin_port/debug/pprof/profile?seconds=$PROF_SECONDS" &
		prof_pid=$!
	fi
	j=$("$bin/bolide" -n "$ns" bench consume --topic "$topic" --consumers "$CONSUMERS" --pull-batch "$PULL_BATCH" \
		--idle 10s "${args[@]}" -o json 2>/dev/null)
	after=$(cpu)
	read -r s r < <(python3 -c '
import json,sys
d=json.loads(sys.argv[1]); sq=d.get("sql")
print(round(sq["scannedPerSec"] if sq else d["msgsPerSec"]), "%.0f/%d" % (d["msgsPerSec"], d["messages"]))' "$j")
	c=$(python3 -c "print(f'{($after-$before)/$ticks:.1f}')")
	scanned[$kind]+="$s "
	received[$kind]+="$r "
	cpu_s[$kind]+="$c "
	echo "$kind run $rep: scanned $s msgs/s, received $r (msgs/s / msgs), broker CPU $c s" >&2
}

for rep in $(seq "$REPS"); do
	if ((rep % 2)); then run all "$rep"; run sql "$rep"; else run sql "$rep"; run all "$rep"; fi
done
if [[ $PROFILE == 1 ]]; then
	wait "$prof_pid" || true
	echo "broker CPU profile during the filtered scan (top, cumulative):" >&2
	(cd "$root" && go tool pprof -top -cum -nodecount=35 "$bin/bolide-broker" "$work/filter.pprof" 2>/dev/null) | tee "$work/filter-profile.txt" >&2 || true
fi

{
	echo "| run | scanned msgs/s (runs) | median | received msgs/s / msgs (runs) | broker CPU s (runs) | median |"
	echo "|---|---|---|---|---|---|"
	echo "| all messages (bolide bench consume) | ${scanned[all]}| $(echo "${scanned[all]}" | median) | ${received[all]}| ${cpu_s[all]}| $(echo "${cpu_s[all]}" | median) |"
	echo "| SQL92 \`$COND\` (bench consume --sql) | ${scanned[sql]}| $(echo "${scanned[sql]}" | median) | ${received[sql]}| ${cpu_s[sql]}| $(echo "${cpu_s[sql]}" | median) |"
	echo
	echo "($N messages of $SIZE B, $want matching; $QUEUES queues, $CONSUMERS consumer(s), pull batch $PULL_BATCH, flush $FLUSH, $(nproc) cores, $(date -u +%FT%TZ))"
} | tee "$OUT"
