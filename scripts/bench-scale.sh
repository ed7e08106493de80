#!/usr/bin/env bash
# bench-scale.sh — how Bolide's cost grows with the work (issue 21's scale
# lines), measured on this machine with real processes: one NameServer and
# one broker (async flush, store on the real disk under DATA_DIR, never
# tmpfs), driven by `bolide bench`. Each measurement starts a fresh broker
# on an empty store; every daemon is stopped and every store removed at exit.
#
#  1. Many topics. The send rate of PRODUCERS producers (each its own client,
#     synchronous sends of SIZE bytes, TOPIC_MSGS messages) to one topic of
#     QUEUES queues, then, on a fresh broker, to TOPICS topics of QUEUES
#     queues made by `bench create-topics` (their creation timed by tenth)
#     with the producers spread over them (`bench produce --topics`).
#     Target: >= 0.8x the one-topic rate. The one-topic broker (and its
#     NameServer) stays up, stopped (SIGSTOP), while the other is measured,
#     and the other is stopped while it runs: its passes bracket the
#     many-topics ones (one, many, one, many again, one), and each
#     many-topics pass is judged against the mean of the one-topic passes
#     just before and after it, so that the machine's drift over the
#     minutes between them cancels (on this shared machine the one-topic
#     rate alone moves by 10-25 % from run to run). Before any of that,
#     each broker takes WARMUP_MSGS sends to a topic of its own (warmup),
#     so that no judged pass is a fresh process's first. The broker's VmRSS
#     (/proc/<pid>/status) before the topics are created, after, and after
#     the sends, as MiB per 1 000 queues.
#     Every queue gets its first ConsumeQueue file, preallocated, when its
#     topic is created (40 960 bytes by default; the script reads the size
#     from the one-topic run), and the store may keep as many spare files in
#     its reserve (broker/store/reserve.go: one for each new queue file
#     planned and not yet dispatched): if twice TOPICS x QUEUES files do not
#     fit in the free space less DISK_RESERVE_GIB, the sends go to the first
#     topics that fit and the table says so (all TOPICS are still created,
#     their files made while there is room). The same sends are then run
#     again, to tell the first messages of a topic from the steady state.
#  2. Many groups. A backlog of GROUP_BACKLOG messages on one topic is read
#     by one fresh group, SINGLE_REPS times one after another, then by
#     CONSUMER_GROUPS fresh groups at once (`bench consume --groups`), each
#     group all of it. Figure: the broker's CPU seconds (utime + stime,
#     /proc/<pid>/stat) per million messages delivered, less what the idle
#     broker uses over the same time (read over IDLE_WINDOW first; the raw
#     figures are reported too). Target: many groups cost no more per
#     message than one (<= 1.0x).
#  3. Cold backlog. BACKLOG_GIB GiB of BACKLOG_SIZE-byte messages, written
#     with batched asynchronous sends (the fill rate is reported); the broker
#     is restarted on the store, the page cache dropped (`sync; echo 3 >
#     /proc/sys/vm/drop_caches`: needs root), and a fresh group reads the
#     backlog from the first message, twice (a fresh group and a restarted
#     broker each time). Baseline in the same run: the CommitLog segments
#     themselves (the bytes the log holds) read with dd from a dropped
#     cache, between the two reads and after the second. The host beneath
#     the virtual disk caches what was written recently and moves dd's rate
#     by 2-3x within minutes, so the first read (right after the fill) is
#     reported and the second is judged: >= 0.8x the faster of the two dd
#     runs beside it (the consumer's body bytes per second against dd's
#     bytes per second).
#  4. Delayed traffic. NORMAL_PRODUCERS producers send for NORMAL_DURATION
#     alone, then again while another `bench produce` sends timer messages
#     (--delay DELAY, or --delay-level DELAY_LEVEL when set) at DELAY_RATE
#     messages/s in batches. Target: the normal rate within 10 % of its rate
#     alone (>= 0.9x). Also reported: the delayed rate actually reached, and
#     how long after the last delayed message was due every one of them was
#     in its topic.
#
# It prints one markdown table (measure, figure, baseline, ratio, target,
# met) with the memory, creation and delivery figures under it, and writes
# it with every command's raw output (JSON lines of `bolide bench`, the
# daemons' logs, CPU ticks, samples) to .bench/results/<time>-scale/; the
# table is also copied to $OUT. Each step runs under `timeout`.
#
# Settings (environment; QUICK=1 shrinks the defaults to check the script in
# about two minutes — its figures mean nothing):
#
#   QUICK              1: small sizes                               (0)
#   PARTS              which measurements to run, of: topics groups
#                      backlog delay                                (all four)
#   TOPICS             topics of the many-topics run                (10000; QUICK 300)
#   QUEUES             queues of every topic                        (8)
#   PRODUCERS          producers of both send runs                  (1000; QUICK 50)
#   TOPIC_MSGS         messages of each send run                    (200000; QUICK 20000)
#   WARMUP_MSGS        messages of each broker's warm-up pass       (TOPIC_MSGS / 4)
#   SIZE               message body bytes (1, 2 and 4)              (1024)
#   CREATE_CONCURRENCY topic creations in flight                    (32)
#   DISK_RESERVE_GIB   free space the runs leave on the disk        (20)
#   CONSUMER_GROUPS    groups reading the backlog at once           (1000; QUICK 20)
#   GROUP_BACKLOG      messages in that backlog                     (1000; QUICK 500)
#   SINGLE_REPS        one-group reads, one after another           (50; QUICK 3)
#   IDLE_WINDOW        seconds the idle broker's CPU is read over   (10; QUICK 3)
#   GROUP_PULL_BATCH   messages per pull when reading it            (32)
#   BACKLOG_GIB        GiB of the cold backlog                      (16; QUICK 1)
#   BACKLOG_SIZE       its message body bytes                       (16384)
#   FILL_BATCH         messages per request when filling it         (64)
#   FILL_INFLIGHT      requests in flight per producer when filling (8)
#   FILL_PRODUCERS     producers filling it                         (2)
#   READ_PULL_BATCH    messages per pull when reading it            (64; the broker caps a pull at 1 MiB)
#   NORMAL_PRODUCERS   producers of the normal sends                (16)
#   NORMAL_DURATION    how long the normal sends run                (60s; QUICK 5s)
#   DELAY_RATE         delayed messages/s asked for                 (100000; QUICK 20000)
#   DELAY              delay of the timer messages                  (5s)
#   DELAY_LEVEL        send delay-level messages instead (1-based)  (unset)
#   DELAY_BATCH        delayed messages per request                 (100)
#   DELAY_PRODUCERS    producers of the delayed messages            (4)
#   DELAY_INFLIGHT     their requests in flight each                (8)
#   DELAY_WARMUP       the delayed sender's head start              (3s)
#   STEP_TIMEOUT       seconds for one step                         (1800; QUICK 300)
#   DATA_DIR           the stores (on the disk; not tmpfs)          (.bench/data-scale)
#   OUT                copy of the table                            (.bench/bench-scale.md)
#   KEEP               1: keep DATA_DIR afterwards                  (0)
#   INODE_AGE          seconds between deleting a many-topics store and
#                      making the next (bench-lib.sh, inodes_age)   (360; QUICK 0)
#   BOLIDE_BIN         a directory of prebuilt bolide, bolide-nameserver and
#                      bolide-broker to measure instead of building this tree
#
# Usage: scripts/bench-scale.sh        (or: make bench-scale QUICK=1)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

QUICK=${QUICK:-0}
q() { if [[ $QUICK == 1 ]]; then echo "$2"; else echo "$1"; fi; }
PARTS=${PARTS:-topics groups backlog delay}
# part NAME: whether PARTS names that measurement.
part() { [[ " $PARTS " == *" $1 "* ]]; }
TOPICS=${TOPICS:-$(q 10000 300)}
QUEUES=${QUEUES:-8}
PRODUCERS=${PRODUCERS:-$(q 1000 50)}
TOPIC_MSGS=${TOPIC_MSGS:-$(q 200000 20000)}
WARMUP_MSGS=${WARMUP_MSGS:-$((TOPIC_MSGS / 4))}
SIZE=${SIZE:-1024}
CREATE_CONCURRENCY=${CREATE_CONCURRENCY:-32}
DISK_RESERVE_GIB=${DISK_RESERVE_GIB:-20}
CONSUMER_GROUPS=${CONSUMER_GROUPS:-$(q 1000 20)}
GROUP_BACKLOG=${GROUP_BACKLOG:-$(q 1000 500)}
SINGLE_REPS=${SINGLE_REPS:-$(q 50 3)}
IDLE_WINDOW=${IDLE_WINDOW:-$(q 10 3)}
GROUP_PULL_BATCH=${GROUP_PULL_BATCH:-32}
BACKLOG_GIB=${BACKLOG_GIB:-$(q 16 1)}
BACKLOG_SIZE=${BACKLOG_SIZE:-16384}
FILL_BATCH=${FILL_BATCH:-64}
FILL_INFLIGHT=${FILL_INFLIGHT:-8}
FILL_PRODUCERS=${FILL_PRODUCERS:-2}
READ_PULL_BATCH=${READ_PULL_BATCH:-64}
NORMAL_PRODUCERS=${NORMAL_PRODUCERS:-16}
NORMAL_DURATION=${NORMAL_DURATION:-$(q 60s 5s)}
DELAY_RATE=${DELAY_RATE:-$(q 100000 20000)}
DELAY=${DELAY:-5s}
DELAY_LEVEL=${DELAY_LEVEL:-}
DELAY_BATCH=${DELAY_BATCH:-100}
DELAY_PRODUCERS=${DELAY_PRODUCERS:-4}
DELAY_INFLIGHT=${DELAY_INFLIGHT:-8}
DELAY_WARMUP=${DELAY_WARMUP:-3s}
STEP_TIMEOUT=${STEP_TIMEOUT:-$(q 1800 300)}
BENCH_DIR=$root/.bench
DATA_DIR=${DATA_DIR:-$BENCH_DIR/data-scale}
OUT=${OUT:-$BENCH_DIR/bench-scale.md}
KEEP=${KEEP:-0}
INODE_AGE=${INODE_AGE:-$(q 360 0)}

stamp=$(date -u +%Y%m%dT%H%M%SZ)
res=$BENCH_DIR/results/$stamp-scale
mkdir -p "$res"
say() { echo "bench-scale: $*" >&2; }
die() { say "$*"; exit 1; }
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
for c in go timeout awk sed dd df stat curl; do
  command -v "$c" >/dev/null || die "$c is missing"
done
[[ -w /proc/sys/vm/drop_caches ]] || die "cannot write /proc/sys/vm/drop_caches (the cold read needs root)"
# A thousand clients and many queue files: as many descriptors as allowed.
ulimit -n "$(ulimit -Hn)"

bolide_bin=${BOLIDE_BIN:-$BENCH_DIR/bolide}
bolide=$bolide_bin/bolide
if [[ -n ${BOLIDE_BIN:-} ]]; then
  for x in bolide bolide-nameserver bolide-broker; do
    [[ -x $bolide_bin/$x ]] || die "BOLIDE_BIN=$bolide_bin has no $x"
  done
else
  say "building Bolide into $bolide_bin"
  mkdir -p "$bolide_bin"
  bench_go_build "$bolide_bin" ./cmd/bolide ./cmd/bolide-nameserver ./cmd/bolide-broker || die "building Bolide failed"
fi

# ------------------------------------------------------------- processes
ns_pid='' broker_pid='' sampler_pid=''
stop_pid() {
  local pid=$1 i
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 600; i++)); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
stop_broker() { stop_pid "$broker_pid"; broker_pid=''; }
stop_all() {
  stop_pid "$sampler_pid"; sampler_pid=''
  stop_broker
  stop_pid "$ns_pid"; ns_pid=''
}
# parked: the pids of the daemons stopped (SIGSTOP) while another pair is
# measured (many topics).
parked=()
# stop_parked stops the parked daemons (continued first, so that they see
# the signal).
stop_parked() {
  local p
  for p in "${parked[@]}"; do
    kill -CONT "$p" 2>/dev/null || true
    stop_pid "$p"
  done
  parked=()
}
cleanup() {
  stop_parked
  stop_all
  if [[ $KEEP != 1 ]]; then
    local many=0
    [[ -d $DATA_DIR/topics ]] && many=1
    rm -rf "$DATA_DIR"
    ((many == 0 || QUICK == 1)) || inodes_freed
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM


# start_broker NAME starts the broker on $DATA_DIR/NAME (kept as it is).
start_broker() {
  local dir=$DATA_DIR/$1
  rm -f "$dir/broker.addr" "$dir/admin.addr"
  "$bolide_bin/bolide-broker" --namesrv "$NS" --listen 127.0.0.1:0 --ha-listen 127.0.0.1:0 --gossip off \
    --admin-listen 127.0.0.1:0 --admin-addr-file "$dir/admin.addr" --store-dir "$dir/broker-a" --broker-name broker-a \
    --flush async --addr-file "$dir/broker.addr" >>"$res/$1-broker.log" 2>&1 &
  broker_pid=$!
  wait_file "$dir/broker.addr" "$broker_pid" "bolide-broker" 120
  wait_file "$dir/admin.addr" "$broker_pid" "bolide-broker's admin listener" 120
  ADMIN=$(cat "$dir/admin.addr")
  local deadline=$((SECONDS + 60))
  until "$bolide" cluster list -n "$NS" --timeout 2s -o json 2>/dev/null | grep -q '"broker":"broker-a"'; do
    ((SECONDS < deadline)) || die "the NameServer does not list broker-a after 60s"
    sleep 0.1
  done
}

# start_bolide NAME starts a NameServer and a broker on an empty store
# $DATA_DIR/NAME; sets NS.
start_bolide() {
  local dir=$DATA_DIR/$1
  rm -rf "$dir" && mkdir -p "$dir"
  "$bolide_bin/bolide-nameserver" --listen 127.0.0.1:0 --gossip off --admin-listen off --addr-file "$dir/ns.addr" \
    >"$res/$1-nameserver.log" 2>&1 &
  ns_pid=$!
  wait_file "$dir/ns.addr" "$ns_pid" "bolide-nameserver" 120
  NS=$(cat "$dir/ns.addr")
  start_broker "$1"
  say "$1: NameServer $NS, broker $(cat "$dir/broker.addr") (pid $broker_pid), store $dir"
}

# finish NAME stops the daemons and removes the store of NAME (recording
# when the many-topics store's 170 000 inodes were freed: inodes_age).
finish() {
  stop_all
  if [[ $KEEP != 1 ]]; then
    rm -rf "${DATA_DIR:?}/$1"
    [[ $1 != topics || $QUICK == 1 ]] || inodes_freed
  fi
}

b() { "$bolide" -n "$NS" "$@"; }

# ------------------------------------------------------------- measuring
failed=0
# step NAME ARGS... runs `bolide ARGS` under timeout, stdout to
# $res/NAME.out; sets srv_ticks (the broker's CPU over the step), ns_ticks
# (the NameServer's) and cli_ticks (the client's), also in $res/NAME.cpu.
step() {
  local name=$1 status=0 s0 n0 c0 t0
  shift
  say "$name: bolide $*"
  echo "bolide -n $NS $*" >"$res/$name.cmd"
  s0=$(proc_ticks "$broker_pid")
  n0=$(proc_ticks "$ns_pid")
  c0=$(child_ticks)
  read -r m0 st0 < <(machine_ticks)
  t0=$(now)
  timeout -k 10 "$STEP_TIMEOUT" "$bolide" -n "$NS" "$@" >"$res/$name.out" 2>"$res/$name.err" || status=$?
  step_secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  read -r m1 st1 < <(machine_ticks)
  cli_ticks=$(($(child_ticks) - c0))
  srv_ticks=$(($(proc_ticks "$broker_pid") - s0))
  ns_ticks=$(($(proc_ticks "$ns_pid") - n0))
  echo "broker_ticks=$srv_ticks nameserver_ticks=$ns_ticks client_ticks=$cli_ticks machine_busy_ticks=$((m1 - m0))" \
    "machine_steal_ticks=$((st1 - st0)) ticks_per_second=$ticks wall_seconds=$step_secs" >"$res/$name.cpu"
  if ((status != 0)); then
    if ((status == 124)); then say "  timed out after ${STEP_TIMEOUT}s"; else say "  failed (status $status)"; fi
    tail -n 5 "$res/$name.err" >&2 || true
    failed=$((failed + 1))
    return 1
  fi
}

# mean2 A B: the mean of two figures, or the one given when the other is
# missing (a failed pass).
mean2() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "") print b; else if (b == "") print a; else print (a + b) / 2 }'; }

# machine_ticks: every vCPU's busy ticks (user, nice, system, irq, softirq:
# the daemons, the client and the kernel's own threads) and the ticks the
# hypervisor stole, from /proc/stat.
machine_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $9 }' /proc/stat; }

# runtime FIELD reads one figure of `bolide broker runtime`.
runtime() { b broker runtime -o json 2>/dev/null | sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p" | head -n 1; }
# wait_dispatched waits until the broker has dispatched its whole log.
wait_dispatched() {
  local deadline=$((SECONDS + 600)) v
  while :; do
    v=$(runtime dispatchBehindBytes)
    [[ $v == 0 ]] && return 0
    ((SECONDS < deadline)) || { say "the broker is still ${v:-?} bytes behind in dispatch"; return 1; }
    sleep 0.5
  done
}
# heap_kib: the broker's live heap in KiB, after a garbage collection
# (its admin listener's /debug/pprof/heap?gc=1).
heap_kib() {
  curl -sf "http://$ADMIN/debug/pprof/heap?gc=1&debug=1" | sed -n 's/^# HeapAlloc = \([0-9]*\).*/\1/p' |
    awk '{ printf "%d\n", $1 / 1024 }'
}
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
secs() { awk -v t="$1" -v hz="$ticks" 'BEGIN { printf "%.2f", t / hz }'; }
now() { date +%s.%N; }
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# dd_log prints the MiB/s at which dd reads the first log_bytes of the
# CommitLog segments segs, in order, from a dropped page cache: the disk's
# own sequential rate for the bytes the consumer reads.
dd_log() {
  local left=$log_bytes t0 s n
  drop_caches
  t0=$(now)
  for s in "${segs[@]}"; do
    ((left > 0)) || break
    n=$(stat -c %s "$s")
    ((n < left)) || n=$left
    dd if="$s" of=/dev/null bs=1M iflag=count_bytes count="$n" status=none
    left=$((left - n))
  done
  awk -v n="$log_bytes" -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", n / (b - a) / 1048576 }'
}
free_bytes() { df -B1 --output=avail "$DATA_DIR" | tail -n 1 | tr -d ' '; }
# sample FILE samples the broker every 2 s until stopped: time, VmRSS and
# RssAnon (KiB), threads, open files, mappings.
sample() {
  local pid=$broker_pid
  echo "time vmrss_kib rssanon_kib threads fds maps" >"$1"
  while kill -0 "$pid" 2>/dev/null; do
    echo "$(date +%s) $(status_kib "$pid" VmRSS) $(status_kib "$pid" RssAnon) $(status_kib "$pid" Threads)" \
      "$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l) $(wc -l <"/proc/$pid/maps" 2>/dev/null || echo 0)" >>"$1"
    sleep 2
  done
}
start_sampler() { sample "$1" & sampler_pid=$!; }
stop_sampler() { stop_pid "$sampler_pid"; sampler_pid=''; }
# peak FILE COLUMN is the largest value of a sample column.
peak() { awk -v c="$2" 'NR > 1 && $c > m { m = $c } END { print m + 0 }' "$1"; }

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
mkdir -p "$DATA_DIR"
say "results in $res; load average $load_start; $(nproc) vCPU; $(($(free_bytes) >> 30)) GiB free on $DATA_DIR"

# ---------------------------------------------------- 1. many topics
if part topics; then
# Creating the topics makes 80 000 queues' directories and files: not
# within minutes of deleting the last run's (bench-lib.sh, inodes_age).
inodes_age "$INODE_AGE"
# warm_up NAME: the broker's warm-up pass (a topic of its own).
warm_up() {
  b topic create warmup --queues "$QUEUES" >/dev/null
  step "$1" bench produce --topic warmup --producers "$PRODUCERS" --count "$WARMUP_MSGS" --size "$SIZE" -o json || true
  wait_dispatched || true
}
start_bolide topics1
b topic create single --queues "$QUEUES" >/dev/null
warm_up topics-single-warmup
sleep 5
rssS0=$(rss_kib "$broker_pid"); anonS0=$(status_kib "$broker_pid" RssAnon); heapS0=$(heap_kib)
step topics-single bench produce --topic single --producers "$PRODUCERS" --count "$TOPIC_MSGS" --size "$SIZE" -o json || true
rate_single1=$(jnum "$res/topics-single.out" msgsPerSec)
wait_dispatched || true
sleep 5
rssS2=$(rss_kib "$broker_pid"); anonS2=$(status_kib "$broker_pid" RssAnon); heapS2=$(heap_kib)
# A queue's first file (the lowest name): the file every queue of the
# many-topics run gets first. Later files of a queue grow, up to the full
# size, so any file of a long run may be larger.
cq_file=$(find "$DATA_DIR/topics1/broker-a/store/consumequeue/single" -type f | sort | sed -n 1p)
[[ -n $cq_file ]] || die "no ConsumeQueue file of topic single under $DATA_DIR/topics1"
cq_size=$(stat -c %s "$cq_file")
cq_alloc=$(($(stat -c %b "$cq_file") * $(stat -c %B "$cq_file")))
say "a ConsumeQueue file: $cq_size bytes, $cq_alloc allocated on disk"
# The one-topic pair waits, stopped, for its next passes.
one_pair="$NS $ADMIN $broker_pid $ns_pid"
kill -STOP "$broker_pid" "$ns_pid"
parked=("$broker_pid" "$ns_pid")
broker_pid='' ns_pid=''
# one_topic_pass NAME: the one-topic pass NAME, on the one-topic pair, with
# the many-topics pair stopped meanwhile; sets last_one.
one_topic_pass() {
  local many_pair="$NS $ADMIN $broker_pid $ns_pid"
  kill -STOP "$broker_pid" "$ns_pid"
  read -r NS ADMIN broker_pid ns_pid <<<"$one_pair"
  kill -CONT "$broker_pid" "$ns_pid"
  sleep 2 # timers that came due while stopped fire (a registration, a checkpoint)
  last_one=''
  step "$1" bench produce --topic single --producers "$PRODUCERS" --count "$TOPIC_MSGS" --size "$SIZE" -o json &&
    last_one=$(jnum "$res/$1.out" msgsPerSec)
  wait_dispatched || true
  kill -STOP "$broker_pid" "$ns_pid"
  read -r NS ADMIN broker_pid ns_pid <<<"$many_pair"
  kill -CONT "$broker_pid" "$ns_pid"
  sleep 5 # the broker settles, as before its first pass
}

start_bolide topics
warm_up topics-many-warmup
sleep 5
rss0=$(rss_kib "$broker_pid"); anon0=$(status_kib "$broker_pid" RssAnon); heap0=$(heap_kib)
start_sampler "$res/topics.samples"
step topics-create bench create-topics --topic scale --topics "$TOPICS" --queues "$QUEUES" --concurrency "$CREATE_CONCURRENCY" -o json || true
create_ns_ticks=$ns_ticks create_srv_ticks=$srv_ticks
sleep 5 # the broker settles (registration, GC)
rss1=$(rss_kib "$broker_pid"); anon1=$(status_kib "$broker_pid" RssAnon); heap1=$(heap_kib)
topics_file=$DATA_DIR/topics/broker-a/config/topics.json
topics_json=$(stat -c %s "$topics_file" 2>/dev/null || echo 0)
# How many topics' queue files fit in the free space less the reserve,
# with as many spares again.
room=$(($(free_bytes) - DISK_RESERVE_GIB * 1024 * 1024 * 1024))
fit=$((room > 0 ? room / (2 * cq_alloc * QUEUES) : 0))
send_topics=$((fit < TOPICS ? fit : TOPICS))
if ((send_topics < TOPICS)); then
  say "$TOPICS topics x $QUEUES queues need $((TOPICS * QUEUES * cq_alloc >> 30)) GiB of ConsumeQueue files and up to as much" \
    "in spares; $((room >> 30)) GiB may be used: sending to the first $send_topics topics"
fi
((send_topics > 0)) || die "no room for the ConsumeQueue files of even one topic"
step topics-many bench produce --topic scale --topics "$send_topics" --producers "$PRODUCERS" --count "$TOPIC_MSGS" --size "$SIZE" -o json || true
rate_many=$(jnum "$res/topics-many.out" msgsPerSec)
wait_dispatched || true
sleep 5
rss2=$(rss_kib "$broker_pid"); anon2=$(status_kib "$broker_pid" RssAnon); heap2=$(heap_kib)
spares=$(find "$DATA_DIR/topics/broker-a/store/reserve" -type f | wc -l)
one_topic_pass topics-single-2
rate_single2=$last_one
# The same sends again: every queue has its file now.
step topics-again bench produce --topic scale --topics "$send_topics" --producers "$PRODUCERS" --count "$TOPIC_MSGS" --size "$SIZE" -o json || true
rate_again=$(jnum "$res/topics-again.out" msgsPerSec)
one_topic_pass topics-single-3
rate_single3=$last_one
# A many-topics pass is judged against the one-topic passes around it.
rate_single=$(mean2 "$rate_single1" "$rate_single2")
rate_single_again=$(mean2 "$rate_single2" "$rate_single3")
stop_sampler
fds2=$(find "/proc/$broker_pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
maps2=$(wc -l <"/proc/$broker_pid/maps")
goroutines2=$(runtime goroutines)
# Queue files only: <topic>/<queue>/<file>, not the staging journal at the root.
cq_files=$(find "$DATA_DIR/topics/broker-a/store/consumequeue" -mindepth 3 -type f | wc -l)
cq_du=$(du -s -B1 "$DATA_DIR/topics/broker-a/store/consumequeue" | cut -f1)
{
  echo "single_topic rss_kib before_sends=$rssS0 after_sends=$rssS2 rssanon_kib before_sends=$anonS0 after_sends=$anonS2 heap_kib before_sends=$heapS0 after_sends=$heapS2"
  echo "heap_kib before_create=$heap0 after_create=$heap1 after_sends=$heap2"
  echo "rss_kib before_create=$rss0 after_create=$rss1 after_sends=$rss2"
  echo "rssanon_kib before_create=$anon0 after_create=$anon1 after_sends=$anon2 reserve_files=$spares"
  echo "topics_json_bytes=$topics_json send_topics=$send_topics cq_file_bytes=$cq_size cq_alloc_bytes=$cq_alloc"
  echo "after_sends fds=$fds2 maps=$maps2 goroutines=$goroutines2 cq_files=$cq_files cq_bytes=$cq_du"
} >"$res/topics.memory"
finish topics
stop_parked
[[ $KEEP == 1 ]] || rm -rf "${DATA_DIR:?}/topics1"
fi

# ---------------------------------------------------- 2. many groups
if part groups; then
start_bolide groups
b topic create groups --queues "$QUEUES" >/dev/null
step groups-fill bench produce --topic groups --count "$GROUP_BACKLOG" --size "$SIZE" --batch 32 --async --inflight 4 -o json || true
wait_dispatched || true
# The broker's CPU while idle, to tell it from the reads' own.
i0=$(proc_ticks "$broker_pid"); t0=$(now)
sleep "$IDLE_WINDOW"
idle_rate=$(awk -v t="$(($(proc_ticks "$broker_pid") - i0))" -v a="$t0" -v b="$(now)" 'BEGIN { print t / (b - a) }')
one_ticks=0 one_msgs=0 one_cli=0 one_secs=0
for ((r = 1; r <= SINGLE_REPS; r++)); do
  if step "groups-one-$r" bench consume --topic groups --groups 1 --count "$GROUP_BACKLOG" --pull-batch "$GROUP_PULL_BATCH" -o json; then
    one_ticks=$((one_ticks + srv_ticks)) one_cli=$((one_cli + cli_ticks))
    one_secs=$(awk -v a="$one_secs" -v b="$step_secs" 'BEGIN { print a + b }')
    one_msgs=$((one_msgs + $(jnum "$res/groups-one-$r.out" messages)))
  fi
done
start_sampler "$res/groups.samples"
many_msgs=0
if step groups-many bench consume --topic groups --groups "$CONSUMER_GROUPS" --count "$GROUP_BACKLOG" --pull-batch "$GROUP_PULL_BATCH" -o json; then
  many_msgs=$(jnum "$res/groups-many.out" messages)
fi
many_ticks=$srv_ticks many_cli=$cli_ticks many_secs=$step_secs
stop_sampler
groups_goroutines=$(runtime goroutines)
cpm_one=$(per_million "$one_ticks" "$one_msgs")
cpm_many=$(per_million "$many_ticks" "$many_msgs")
# net TICKS SECS: the ticks less the idle broker's over SECS.
net() { awk -v t="$1" -v s="$2" -v r="$idle_rate" 'BEGIN { n = t - r * s; printf "%.0f", (n > 0 ? n : 0) }'; }
cpm_one_net=$(per_million "$(net "$one_ticks" "$one_secs")" "$one_msgs")
cpm_many_net=$(per_million "$(net "$many_ticks" "$many_secs")" "$many_msgs")
echo "idle_ticks_per_second=$idle_rate one: ticks=$one_ticks seconds=$one_secs msgs=$one_msgs many: ticks=$many_ticks seconds=$many_secs msgs=$many_msgs" >"$res/groups.cpu"
finish groups
fi

# ---------------------------------------------------- 3. cold backlog
backlog_msgs=$((BACKLOG_GIB * 1024 * 1024 * 1024 / BACKLOG_SIZE))
need=$(((BACKLOG_GIB + DISK_RESERVE_GIB + 2) * 1024 * 1024 * 1024))
fill_rate='' read_mib='' first_mib='' dd_mib='' dd_before='' dd_after='' log_bytes=0 read_secs='' disk_read=0 resident=''
if ! part backlog; then
  :
elif (($(free_bytes) < need)); then
  say "skipping the cold backlog: $BACKLOG_GIB GiB plus the $DISK_RESERVE_GIB GiB reserve do not fit in $(($(free_bytes) >> 30)) GiB"
  failed=$((failed + 1))
else
  start_bolide backlog
  b topic create backlog --queues "$QUEUES" >/dev/null
  t0=$(now)
  step backlog-fill bench produce --topic backlog --count "$backlog_msgs" --size "$BACKLOG_SIZE" --batch "$FILL_BATCH" --async \
    --inflight "$FILL_INFLIGHT" --producers "$FILL_PRODUCERS" -o json || true
  wait_dispatched || true
  fill_secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  fill_rate=$(jnum "$res/backlog-fill.out" mibPerSec)
  log_bytes=$(runtime commitLogMaxOffset)
  say "filled $log_bytes bytes of CommitLog (acknowledged at $fill_rate MiB/s; dispatched ${fill_secs}s after the start)"
  segs=("$DATA_DIR"/backlog/broker-a/store/commitlog/*)
  dev=$(stat -c %d "$DATA_DIR")
  dev_name=$(awk -v maj=$((dev >> 8)) -v min=$((dev & 255)) '$1 == maj && $2 == min { print $3 }' /proc/diskstats)
  sectors() { awk -v d="$dev_name" '$3 == d { print $6 }' /proc/diskstats; }
  # Two reads by fresh groups, each on a restarted broker (one that wrote
  # the log holds its newest pages) from a dropped page cache; dd between
  # and after them. The first read follows the fill, whose bytes the host
  # beneath the virtual disk may still hold: it is reported, not judged.
  # The second is judged against the faster dd beside it.
  stop_broker
  start_broker backlog
  drop_caches
  resident=$(fincore -b -n -o RES "${segs[@]}" 2>/dev/null | awk '{ s += $1 } END { printf "%.1f", s / 1048576 }') || resident='?'
  step backlog-read-first bench consume --topic backlog --count "$backlog_msgs" --pull-batch "$READ_PULL_BATCH" -o json || true
  first_mib=$(jnum "$res/backlog-read-first.out" mibPerSec)
  stop_broker
  dd_before=$(dd_log)
  start_broker backlog
  drop_caches
  r0=$(sectors)
  step backlog-read bench consume --topic backlog --count "$backlog_msgs" --pull-batch "$READ_PULL_BATCH" -o json || true
  disk_read=$((($(sectors) - r0) * 512))
  read_mib=$(jnum "$res/backlog-read.out" mibPerSec)
  read_secs=$(jnum "$res/backlog-read.out" seconds)
  stop_all
  dd_after=$(dd_log)
  dd_mib=$(awk -v a="$dd_before" -v b="$dd_after" 'BEGIN { printf "%.1f", (a > b ? a : b) }')
  echo "log_bytes=$log_bytes first_read_mib_per_s=$first_mib dd_mib_per_s_before=$dd_before dd_mib_per_s_after=$dd_after dd_mib_per_s=$dd_mib disk_read_during_consume=$disk_read resident_mib_after_drop=$resident fill_seconds_to_dispatched=$fill_secs" \
    >"$res/backlog.disk"
  finish backlog
fi

# ---------------------------------------------------- 4. delayed traffic
if part delay; then
start_bolide delay
b topic create normal --queues "$QUEUES" >/dev/null
b topic create delayed --queues "$QUEUES" >/dev/null
step delay-alone bench produce --topic normal --producers "$NORMAL_PRODUCERS" --duration "$NORMAL_DURATION" --size "$SIZE" -o json || true
rate_alone=$(jnum "$res/delay-alone.out" msgsPerSec)
delay_flag=(--delay "$DELAY")
due_after=$(seconds "$DELAY")
if [[ -n $DELAY_LEVEL ]]; then
  delay_flag=(--delay-level "$DELAY_LEVEL")
  due_after=$(b delay status -o json 2>/dev/null | sed -n "s/.*\"level\":$DELAY_LEVEL,\"delay\":\"\([^\"]*\)\".*/\1/p" | head -n 1)
  due_after=$(seconds "${due_after:-0s}")
fi
delayed_secs=$(awk -v n="$(seconds "$NORMAL_DURATION")" -v w="$(seconds "$DELAY_WARMUP")" 'BEGIN { print n + 2 * w }')
echo "bolide -n $NS bench produce --topic delayed ${delay_flag[*]} --rate $DELAY_RATE ..." >"$res/delay-sender.cmd"
d0=$(proc_ticks "$broker_pid")
timeout -k 10 "$STEP_TIMEOUT" "$bolide" -n "$NS" bench produce --topic delayed "${delay_flag[@]}" --rate "$DELAY_RATE" \
  --batch "$DELAY_BATCH" --async --inflight "$DELAY_INFLIGHT" --producers "$DELAY_PRODUCERS" --size "$SIZE" \
  --duration "${delayed_secs}s" -o json >"$res/delay-sender.out" 2>"$res/delay-sender.err" &
sender=$!
sleep "$(seconds "$DELAY_WARMUP")"
step delay-with bench produce --topic normal --producers "$NORMAL_PRODUCERS" --duration "$NORMAL_DURATION" --size "$SIZE" -o json || true
rate_with=$(jnum "$res/delay-with.out" msgsPerSec)
wait "$sender" || { say "the delayed sender failed"; tail -n 5 "$res/delay-sender.err" >&2; failed=$((failed + 1)); }
sender_end=$(now)
delayed_sent=$(jnum "$res/delay-sender.out" messages)
delayed_rate=$(jnum "$res/delay-sender.out" msgsPerSec)
# Every delayed message was due by sender_end + the delay: how long after
# that were they all in their topic?
drain=''
deadline=$((SECONDS + 300 + ${due_after%.*}))
while ((SECONDS < deadline)); do
  n=$(b topic status delayed -o json 2>/dev/null | awk -F'"messages":' 'NF > 1 { split($2, a, ","); s += a[1] } END { print s + 0 }')
  if ((n >= ${delayed_sent:-0})); then
    drain=$(awk -v a="$sender_end" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    break
  fi
  sleep 0.2
done
delay_ticks=$(($(proc_ticks "$broker_pid") - d0))
echo "delivered=${n:-0} sent=${delayed_sent:-0} all_delivered_after_sender_end_s=${drain:-never} delay_s=$due_after broker_ticks_during=$delay_ticks" >"$res/delay.delivery"
finish delay
fi

load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- report
# ratio A B: A/B with two decimals (– when either is missing).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "–"; else printf "%.2f", a / b }'; }
# met R OP T: yes when R OP T holds (**no** otherwise, – without R).
met() { awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN { if (r == "–" || r == "") { print "–"; exit }
  ok = (op == ">=") ? r + 0 >= t : r + 0 <= t; print ok ? "yes" : "**no**" }'; }
num() { if [[ -z $1 ]]; then echo "failed"; else grp "$(printf '%.0f' "$1")"; fi; }
f1() { if [[ -z $1 ]]; then echo "?"; else printf '%.1f' "$1"; fi; }
r1='–' r1b='–' r2='–' r3='–' r4='–'
part topics && r1=$(ratio "$rate_many" "$rate_single") && r1b=$(ratio "$rate_again" "$rate_single_again")
part groups && r2=$(ratio "$cpm_many_net" "$cpm_one_net")
part backlog && r3=$(ratio "$read_mib" "$dd_mib")
part delay && r4=$(ratio "$rate_with" "$rate_alone")
per_k() { awk -v a="$1" -v b="$2" -v k="$3" 'BEGIN { if (k > 0) printf "%.2f", (b - a) / 1024 / k; else print "–" }'; }
pg() { sed -n "s/.*\"perGroup\":{[^}]*\"$1\":\([0-9.eE+]*\).*/\1/p" "$res/groups-many.out" | head -n 1; }
if part topics; then
  queues_k=$(awk -v t="$TOPICS" -v q="$QUEUES" 'BEGIN { print t * q / 1000 }')
  sent_k=$(awk -v t="$send_topics" -v q="$QUEUES" 'BEGIN { print t * q / 1000 }')
  create_secs=$(sed -n 's/.*"seconds":\([0-9.]*\),"topicsPerSec":\([0-9.]*\),"tenths".*/\1/p' "$res/topics-create.out")
  create_rate=$(sed -n 's/.*"seconds":\([0-9.]*\),"topicsPerSec":\([0-9.]*\),"tenths".*/\2/p' "$res/topics-create.out")
  tenth_first=$(sed -n 's/.*"tenths":\[{[^}]*"topicsPerSec":\([0-9.]*\)}.*/\1/p' "$res/topics-create.out" | head -n 1)
  tenth_last=$(sed -n 's/.*"topicsPerSec":\([0-9.]*\)}\],"latencyMs".*/\1/p' "$res/topics-create.out" | head -n 1)
  many_note="sends over $(grp "$send_topics") of them"
  ((send_topics == TOPICS)) && many_note="sends over all"
fi

table=$res/table.md
{
  echo "### Scale: topics, groups, backlog and delayed traffic ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo
  echo "Machine: $(nproc) vCPU, $(uname -r), $(go version | awk '{print $3}'); load average $load_start at the start," \
    "$load_end at the end. Bolide ${BOLIDE_BIN:+binaries in $BOLIDE_BIN, tree }$(git describe --always --dirty 2>/dev/null || echo '?')," \
    "one NameServer and one broker (async flush), stores on $(df --output=source "$DATA_DIR" | tail -n 1), client on loopback."
  ((QUICK == 1)) && echo && echo "**QUICK mode: small sizes; the figures are not meaningful.**"
  echo
  echo "| measure | figure | baseline | ratio | target | met |"
  echo "|---|---|---|---|---|---|"
  part topics && echo "| $(grp "$TOPICS") topics × $QUEUES queues ($many_note), $(grp "$PRODUCERS") producers, $(grp "$TOPIC_MSGS") sends of $SIZE B: msgs/s |" \
    "$(num "$rate_many") | one topic of $QUEUES queues, the passes before and after: $(num "$rate_single") ($(num "$rate_single1"), $(num "$rate_single2")) | $r1× | ≥ 0.80× | $(met "$r1" ">=" 0.8) |"
  part topics && echo "| … the same sends again (every queue has its ConsumeQueue file) |" \
    "$(num "$rate_again") | the same, before and after: $(num "$rate_single_again") ($(num "$rate_single2"), $(num "$rate_single3")) | $r1b× | (reference) | – |"
  part groups && echo "| $(grp "$CONSUMER_GROUPS") groups each reading a backlog of $(grp "$GROUP_BACKLOG") at once: broker CPU s per million delivered |" \
    "${cpm_many_net:-failed} (raw ${cpm_many:-?}; $(grp "${many_msgs:-0}") delivered) | 1 group, $SINGLE_REPS reads one after another: ${cpm_one_net:-failed} (raw ${cpm_one:-?}; $(grp "$one_msgs") delivered) | $r2× | ≤ 1.00× | $(met "$r2" "<=" 1) |"
  part backlog && echo "| $BACKLOG_GIB GiB backlog ($(grp "$backlog_msgs") msgs of $BACKLOG_SIZE B) read cold from the first message (the second of two reads): MiB/s of bodies |" \
    "$(f1 "$read_mib") | dd of the same CommitLog bytes, cold, the faster of the runs before and after that read: $(f1 "$dd_mib") ($(f1 "$dd_before") / $(f1 "$dd_after")) | $r3× | ≥ 0.80× | $(met "$r3" ">=" 0.8) |"
  part delay && echo "| $NORMAL_PRODUCERS producers for $NORMAL_DURATION beside $(grp "$DELAY_RATE") delayed msgs/s asked (${delay_flag[*]}): msgs/s |" \
    "$(num "$rate_with") | alone: $(num "$rate_alone") | $r4× | ≥ 0.90× | $(met "$r4" ">=" 0.9) |"
  echo
  part topics && echo "- Many topics: broker VmRSS $(mib "$rss0") MiB before creating $(grp "$TOPICS") topics ($queues_k thousand queues)," \
    "$(mib "$rss1") MiB after (**$(per_k "$rss0" "$rss1" "$queues_k") MiB per 1 000 queues**), $(mib "$rss2") MiB after the sends" \
    "(**$(per_k "$rss0" "$rss2" "$queues_k") MiB per 1 000 queues** created; $(per_k "$rss1" "$rss2" "$sent_k") per 1 000 queues sent to); RssAnon" \
    "$(mib "$anon0") → $(mib "$anon1") → $(mib "$anon2") MiB. The same sends to one topic grew it $(mib "$rssS0") → $(mib "$rssS2") MiB" \
    "(RssAnon $(mib "$anonS0") → $(mib "$anonS2")): net of that, $(awk -v a="$rss1" -v b="$rss2" -v c="$rssS0" -v d="$rssS2" -v k="$sent_k" \
      'BEGIN { if (k > 0) printf "%.2f", ((b - a) - (d - c)) / 1024 / k; else print "–" }') MiB per 1 000 queues sent to." \
    "The live heap (after a GC, /debug/pprof/heap?gc=1): $(mib "$heap0") → $(mib "$heap1") → $(mib "$heap2") MiB," \
    "**$(per_k "$heap0" "$heap1" "$queues_k") MiB per 1 000 queues created**; with one topic $(mib "$heapS0") → $(mib "$heapS2") MiB over the sends," \
    "so net of that $(awk -v a="$heap1" -v b="$heap2" -v c="$heapS0" -v d="$heapS2" -v k="$sent_k" \
      'BEGIN { if (k > 0) printf "%.2f", ((b - a) - (d - c)) / 1024 / k; else print "–" }') MiB per 1 000 queues sent to." \
    "topics.json $(grp "$topics_json") bytes."
  part topics && echo "- Creating them: $(f1 "$create_secs") s, $(f1 "$create_rate") topics/s" \
    "(first tenth $(f1 "$tenth_first")/s, last tenth $(f1 "$tenth_last")/s; $CREATE_CONCURRENCY at a time), broker CPU $(secs "$create_srv_ticks") s," \
    "NameServer CPU $(secs "$create_ns_ticks") s."
  part topics && echo "- ConsumeQueue files: $(grp "$cq_size") bytes each, $(grp "$cq_alloc") allocated on disk; after the sends $(grp "$cq_files")" \
    "files, $(grp "$((cq_du >> 20))") MiB on disk, and $(grp "$spares") spare files in the store's reserve; the broker held $(grp "$fds2") open files," \
    "$(grp "$maps2") mappings, ${goroutines2:-?} goroutines (limits here: $(ulimit -n) open files, $(cat /proc/sys/vm/max_map_count) mappings)."
  part groups && echo "- Many groups: all together $(num "$(jnum "$res/groups-many.out" msgsPerSec)") msgs/s from the first receipt to the last" \
    "($(f1 "$(jnum "$res/groups-many.out" seconds)") s; the step, starting $(grp "$CONSUMER_GROUPS") clients 16 at a time, took $(f1 "$many_secs") s);" \
    "per group $(f1 "$(pg medianMsgsPerSec)") msgs/s median (min $(f1 "$(pg minMsgsPerSec)"), max $(f1 "$(pg maxMsgsPerSec)"))," \
    "$(pg complete) of $(grp "$CONSUMER_GROUPS") groups read all; broker peak VmRSS $(mib "$(peak "$res/groups.samples" 2)") MiB," \
    "$(peak "$res/groups.samples" 4) threads, $(peak "$res/groups.samples" 5) open files; goroutines after: ${groups_goroutines:-?};" \
    "client CPU $(per_million "$many_cli" "$many_msgs") s per million ($CONSUMER_GROUPS groups) and $(per_million "$one_cli" "$one_msgs") (1 group);" \
    "the idle broker used $(awk -v r="$idle_rate" -v hz="$ticks" 'BEGIN { printf "%.1f", r / hz * 1000 }') ms of CPU a second."
  part backlog && echo "- Cold backlog: filled at $(f1 "$fill_rate") MiB/s acknowledged ($FILL_PRODUCERS producers, batches of $FILL_BATCH," \
    "$FILL_INFLIGHT in flight each); the first read, right after the fill: $(f1 "$first_mib") MiB/s;" \
    "$(grp "$log_bytes") CommitLog bytes read by the judged one in $(f1 "$read_secs") s;" \
    "$(grp "$((disk_read >> 20))") MiB read from the disk meanwhile; ${resident:-?} MiB of the segments resident after the drop."
  part delay && echo "- Delayed: reached $(num "$delayed_rate") msgs/s ($(grp "${delayed_sent:-0}") sent); every one was in its topic" \
    "${drain:-**not**} s after the sender ended (the last was due at most ${due_after} s after it)."
  echo
  echo "Commands and raw outputs: .bench/results/$stamp-scale/ (made by scripts/bench-scale.sh)."
} >"$table"
cp "$table" "$OUT"
echo
cat "$table"
echo
say "table written to $table and $OUT"
((failed == 0)) || die "$failed step(s) failed; see $res"
