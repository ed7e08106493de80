#!/usr/bin/env bash
# bench-vs-rocketmq.sh — Bolide and Apache RocketMQ side by side, in one run,
# on this machine (issue 21): 1 KiB messages, one replica, client and server
# on loopback, both stores on the same disk, and the SAME client program
# against both: test/bench-rocketmq (rmqbench), written on Apache RocketMQ's
# own Java client rocketmq-client (remoting protocol), which Bolide speaks.
#
# It builds with Maven, once (cached under .bench/tools/rocketmq/<version>/):
# the classpath of Apache RocketMQ's NameServer and broker
# (org.apache.rocketmq:rocketmq-namesrv and rocketmq-broker from Maven
# Central, test/bench-rocketmq/server/pom.xml) and rmqbench with its
# classpath (test/bench-rocketmq/pom.xml); it rebuilds when those files
# change. Maven is tried offline first (~/.m2), then online. Bolide's
# binaries are built into .bench/bolide/ the way `make release` builds the
# shipped ones (static, -trimpath, stripped, gRPC tracing left out: bench_go_build in
# scripts/bench-lib.sh).
#
# It starts RocketMQ's NameServer and broker with `java -cp` (the heaps
# below; the broker's store under $DATA_DIR, brokerRole ASYNC_MASTER with no
# slave: one replica) and Bolide's NameServer and broker, and compares like
# with like:
#
#   Bolide --flush async  vs  RocketMQ flushDiskType=ASYNC_FLUSH
#   Bolide --flush sync   vs  RocketMQ flushDiskType=SYNC_FLUSH
#
# Workloads (rmqbench against each system; median of REPS; the system that
# goes first alternates per workload and repetition; before each step,
# `sync`, a wait until every daemon of both systems is quiet, and WARM_MIB
# (2048) of memory touched and freed: settle in scripts/bench-lib.sh):
#
#   1 producer, synchronous send     produce --mode sync --producers 1
#   16 producers, synchronous send   produce --mode sync --producers 16 (16 threads, one client)
#   asynchronous producer            produce --mode async --inflight ASYNC_WINDOW
#   batched producer                 produce --mode batch --batch ASYNC_BATCH --inflight ASYNC_INFLIGHT
#   16 producers, durable ack        produce --mode sync --producers 16 (sync flush)
#   consume a backlog                consume (DefaultLitePullConsumer, fresh group, first offset)
#   end-to-end latency at a rate     e2e --rate R: E2E_SENDERS threads each send their share of a
#                                    fixed schedule (asynchronously, at most E2E_INFLIGHT each in
#                                    flight, or synchronously: E2E_SEND); a DefaultMQPushConsumer
#                                    receives; latency from each message's scheduled send time to
#                                    its receipt; how late the sends left is reported beside it
#   idle memory                      VmRSS of NameServer + broker, IDLE_SETTLE s after start, before
#                                    any traffic (judged against the target), and its two parts from
#                                    /proc/<pid>/status: RssAnon (private memory: heaps, stacks) and
#                                    RssFile (mapped files: the executable's pages, the JVM's
#                                    libraries and class data), reported, not judged
#
# Each produce run first sends WARMUP messages untimed (JIT, connections,
# routes); before the first workload each system takes a warm-up run of
# 16 producers (WARM_MSGS), so that neither JVM nor page cache starts cold. CPU per message: around every step the script reads the CPU
# time (utime + stime, children included, /proc/<pid>/stat) of the measured
# system's NameServer and broker, divided by the messages the step handled
# (warm-up included); the client's figure is rmqbench's own process CPU time
# over its timed window (the JVM's start and warm-up excluded). Both are CPU
# seconds per million messages, "server + client".
#
# It prints one markdown table (workload, Bolide, RocketMQ, ratio, target
# from issue 21: ≥ 2× throughput, ≥ 2× lower end-to-end p99, ≥ 20× less idle
# memory) and writes it with every command's raw output under
# .bench/results/<time>/; the table is also copied to $OUT. Every step runs
# under `timeout`; every process started is stopped at exit.
#
# Settings (environment; QUICK=1 shrinks the defaults to check the script
# in 2–3 minutes — its figures mean nothing):
#
#   QUICK            1: small counts, one repetition            (default 0)
#   REPS             repetitions of each measurement            (3; QUICK 1)
#   MSGS_1           messages, 1 producer                       (100000; QUICK 2000)
#   MSGS_16          messages, 16 producers                     (200000; QUICK 10000)
#   MSGS_ASYNC1      messages, asynchronous producer            (200000; QUICK 10000)
#   MSGS_ASYNC       messages, batched producer                 (1000000; QUICK 50000)
#   MSGS_DURABLE     messages, 16 producers with durable acks   (100000; QUICK 5000)
#   BACKLOG          messages in the backlog to consume         (1000000; QUICK 50000)
#   WARMUP           untimed messages before each produce run   (5000; QUICK 500)
#   WARM_MSGS        each system's warm-up run before the first
#                    workload: 16 producers, untimed             (50000; QUICK 5000)
#   E2E_RATE         end-to-end run: messages/s                 (10000)
#   E2E_DURATION     end-to-end run: how long                   (30s; QUICK 5s)
#   E2E_WARMUP       end-to-end run: untimed start (the client
#                    JVM's JIT; bench-vs-nats uses 1s)          (5s; QUICK 1s)
#   E2E_SENDERS      end-to-end run: sending threads            (4)
#   E2E_SEND         end-to-end run: async or sync sends        (async)
#   E2E_INFLIGHT     end-to-end run: a thread's async sends in flight (128)
#   E2E_CONSUMERS    end-to-end run: the push consumer's threads (4)
#   E2E_CONSUME_BATCH end-to-end run: messages per listener call (32)
#   ASYNC_WINDOW     asynchronous producer: sends in flight     (256)
#   ASYNC_BATCH      batched producer: messages per request     (64)
#   ASYNC_INFLIGHT   batched producer: requests in flight       (16)
#   PULL_BATCH       messages per pull when consuming           (500)
#   QUEUES           queues of each topic                       (8)
#   SIZE             message body bytes                         (1024)
#   IDLE_SETTLE      seconds idle before reading VmRSS          (5)
#   SETTLE_PCT, SETTLE_MAX  before each step, wait (at most SETTLE_MAX s)
#                    until the daemons use at most SETTLE_PCT % of one CPU
#                    over a second (RocketMQ's idle broker: 2–14 %) (20, 20)
#   WARM_MIB         then touch and free this many MiB of memory (at most a
#                    quarter of what is available; 0: none) (warm_memory in
#                    scripts/bench-lib.sh)                      (2048)
#   STEP_TIMEOUT     seconds for one step                       (600; QUICK 180)
#   BUILD_TIMEOUT    seconds for one build                      (1200)
#   ROCKETMQ_VERSION Apache RocketMQ (server and client)        (5.5.0)
#   RMQ_NAMESRV_OPTS JVM options of RocketMQ's NameServer       (-Xms256m -Xmx256m -XX:+UseG1GC)
#   RMQ_BROKER_OPTS  JVM options of RocketMQ's broker           (-Xms1g -Xmx1g, G1 as in RocketMQ's
#                    runbroker.sh but without -XX:+AlwaysPreTouch, -XX:MaxDirectMemorySize=1g)
#   CLIENT_OPTS      JVM options of rmqbench                    (-Xms512m -Xmx1g -XX:+UseG1GC)
#   DATA_DIR         where both systems store data (same disk; not tmpfs)   (.bench/data-rmq)
#   OUT              copy of the table                          (.bench/bench-vs-rocketmq.md)
#   KEEP             1: keep DATA_DIR afterwards                (0)
#   BOLIDE_BIN       a directory of prebuilt bolide, bolide-nameserver and
#                    bolide-broker to measure instead of building this tree   (unset)
#   MVN              the Maven command                          (mvn)
#
# RocketMQ's broker runs with its defaults except: brokerIP1 and bindAddress
# 127.0.0.1, the ports, the store directory, flushDiskType, and pulls of up
# to 1024 messages / 1 MiB (maxTransfer{Count,Bytes}OnMessageIn{Memory,Disk};
# the defaults cap a pull at 32 messages, Bolide's at 1024) so that
# PULL_BATCH means the same on both.
#
# Usage: scripts/bench-vs-rocketmq.sh     (or: make bench-vs-rocketmq QUICK=1)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

QUICK=${QUICK:-0}
q() { if [[ $QUICK == 1 ]]; then echo "$2"; else echo "$1"; fi; }
REPS=${REPS:-$(q 3 1)}
MSGS_1=${MSGS_1:-$(q 100000 2000)}
MSGS_16=${MSGS_16:-$(q 200000 10000)}
MSGS_ASYNC1=${MSGS_ASYNC1:-$(q 200000 10000)}
MSGS_ASYNC=${MSGS_ASYNC:-$(q 1000000 50000)}
MSGS_DURABLE=${MSGS_DURABLE:-$(q 100000 5000)}
BACKLOG=${BACKLOG:-$(q 1000000 50000)}
WARMUP=${WARMUP:-$(q 5000 500)}
WARM_MSGS=${WARM_MSGS:-$(q 50000 5000)}
E2E_RATE=${E2E_RATE:-10000}
E2E_DURATION=${E2E_DURATION:-$(q 30s 5s)}
E2E_WARMUP=${E2E_WARMUP:-$(q 5s 1s)}
E2E_SENDERS=${E2E_SENDERS:-4}
E2E_SEND=${E2E_SEND:-async}
E2E_INFLIGHT=${E2E_INFLIGHT:-128}
E2E_CONSUMERS=${E2E_CONSUMERS:-4}
E2E_CONSUME_BATCH=${E2E_CONSUME_BATCH:-32}
ASYNC_WINDOW=${ASYNC_WINDOW:-256}
ASYNC_BATCH=${ASYNC_BATCH:-64}
ASYNC_INFLIGHT=${ASYNC_INFLIGHT:-16}
PULL_BATCH=${PULL_BATCH:-500}
QUEUES=${QUEUES:-8}
SIZE=${SIZE:-1024}
IDLE_SETTLE=${IDLE_SETTLE:-5}
STEP_TIMEOUT=${STEP_TIMEOUT:-$(q 600 180)}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-1200}
ROCKETMQ_VERSION=${ROCKETMQ_VERSION:-5.5.0}
RMQ_NAMESRV_OPTS=${RMQ_NAMESRV_OPTS:--Xms256m -Xmx256m -XX:+UseG1GC}
RMQ_BROKER_OPTS=${RMQ_BROKER_OPTS:--Xms1g -Xmx1g -XX:+UseG1GC -XX:G1HeapRegionSize=16m -XX:G1ReservePercent=25 -XX:InitiatingHeapOccupancyPercent=30 -XX:SoftRefLRUPolicyMSPerMB=0 -XX:-OmitStackTraceInFastThrow -XX:MaxDirectMemorySize=1g}
CLIENT_OPTS=${CLIENT_OPTS:--Xms512m -Xmx1g -XX:+UseG1GC}
MVN=${MVN:-mvn}
BENCH_DIR=$root/.bench
DATA_DIR=${DATA_DIR:-$BENCH_DIR/data-rmq}
OUT=${OUT:-$BENCH_DIR/bench-vs-rocketmq.md}
KEEP=${KEEP:-0}

stamp=$(date -u +%Y%m%dT%H%M%SZ)
res=$BENCH_DIR/results/$stamp
mkdir -p "$res"
say() { echo "bench-vs-rocketmq: $*" >&2; }
die() { say "$*"; exit 1; }
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
for c in go java "$MVN" timeout awk sed sha256sum python3; do
  command -v "$c" >/dev/null || die "$c is missing"
done

# ---------------------------------------------------------------- builds
mod=$root/test/bench-rocketmq
tools=$BENCH_DIR/tools/rocketmq/$ROCKETMQ_VERSION
# The cache is keyed by the version and the module's files.
key=$(cat "$mod/pom.xml" "$mod/server/pom.xml" $(find "$mod/src" -name '*.java' | sort) | sha256sum | cut -c1-12)
build=$tools/$key
server_cp_file=$build/server.classpath
client_cp_file=$build/client.classpath
classes=$build/rmqbench/classes

# mvn LOG ARGS... runs Maven offline, then online if that fails.
mvn_run() {
  local log=$1; shift
  timeout -k 10 "$BUILD_TIMEOUT" "$MVN" -B -o -Drocketmq.version="$ROCKETMQ_VERSION" "$@" >"$log" 2>&1 ||
    timeout -k 10 "$BUILD_TIMEOUT" "$MVN" -B -Drocketmq.version="$ROCKETMQ_VERSION" "$@" >>"$log" 2>&1
}
if [[ ! -s $server_cp_file || ! -s $client_cp_file || ! -d $classes ]]; then
  say "building Apache RocketMQ $ROCKETMQ_VERSION's classpath and rmqbench with Maven (once; cached in ${build#"$root"/})"
  mkdir -p "$build"
  mvn_run "$res/build-rocketmq-server.log" -f "$mod/server/pom.xml" dependency:build-classpath \
    -Dmdep.outputFile="$server_cp_file.tmp" || die "Maven could not resolve RocketMQ's broker; see $res/build-rocketmq-server.log"
  mvn_run "$res/build-rmqbench.log" -f "$mod/pom.xml" -DbenchBuildDir="$build/rmqbench" compile \
    dependency:build-classpath -Dmdep.outputFile="$client_cp_file.tmp" || die "building rmqbench failed; see $res/build-rmqbench.log"
  mv "$server_cp_file.tmp" "$server_cp_file"
  mv "$client_cp_file.tmp" "$client_cp_file"
fi
server_cp=$(<"$server_cp_file")
client_cp=$classes:$(<"$client_cp_file")

bolide_bin=${BOLIDE_BIN:-$BENCH_DIR/bolide}
bolide=$bolide_bin/bolide
if [[ -n ${BOLIDE_BIN:-} ]]; then
  for b in bolide bolide-nameserver bolide-broker; do
    [[ -x $bolide_bin/$b ]] || die "BOLIDE_BIN=$bolide_bin has no $b"
  done
  say "measuring the Bolide binaries in $bolide_bin"
else
  say "building Bolide into $bolide_bin"
  mkdir -p "$bolide_bin"
  bench_go_build "$bolide_bin" ./cmd/bolide ./cmd/bolide-nameserver ./cmd/bolide-broker ||
    die "building Bolide failed"
fi

# ------------------------------------------------------------- processes
pids=()                    # every daemon this run started
bolide_srv=() rmq_srv=()   # each system's NameServer and broker
stop_pid() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
stop_all() {
  local i
  # Brokers before NameServers: each was started after its NameServer.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop_pid "${pids[$i]}"; done
  pids=() bolide_srv=() rmq_srv=()
}
cleanup() {
  stop_all
  if [[ $KEEP != 1 ]]; then rm -rf "$DATA_DIR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$DATA_DIR"


# start_bolide FLUSH: one NameServer and one broker (flush mode FLUSH) on
# free loopback ports; sets BOLIDE_NS.
start_bolide() {
  local flush=$1 dir=$DATA_DIR/bolide-$1
  rm -rf "$dir" && mkdir -p "$dir"
  "$bolide_bin/bolide-nameserver" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --gossip off \
    --addr-file "$dir/ns.addr" >"$res/bolide-$flush-nameserver.log" 2>&1 &
  pids+=($!)
  bolide_srv=($!)
  wait_file "$dir/ns.addr" $! "bolide-nameserver"
  BOLIDE_NS=$(<"$dir/ns.addr")
  "$bolide_bin/bolide-broker" --namesrv "$BOLIDE_NS" --listen 127.0.0.1:0 --ha-listen 127.0.0.1:0 \
    --admin-listen 127.0.0.1:0 --gossip off --store-dir "$dir/broker-a" --broker-name broker-a --flush "$flush" \
    --addr-file "$dir/broker.addr" >"$res/bolide-$flush-broker.log" 2>&1 &
  pids+=($!)
  bolide_srv+=($!)
  wait_file "$dir/broker.addr" $! "bolide-broker"
  local deadline=$((SECONDS + 60))
  until "$bolide" cluster list -n "$BOLIDE_NS" --timeout 2s -o json 2>/dev/null | grep -q '"broker":"broker-a"'; do
    ((SECONDS < deadline)) || die "Bolide's NameServer does not list broker-a after 60s"
    sleep 0.1
  done
  say "Bolide ($flush flush): NameServer $BOLIDE_NS, broker $(<"$dir/broker.addr")"
}

# port_open PORT: something listens on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_rocketmq FLUSH (ASYNC_FLUSH or SYNC_FLUSH): RocketMQ's NameServer and
# one master broker, on free loopback ports; sets RMQ_NS.
start_rocketmq() {
  local flush=$1 dir=$DATA_DIR/rocketmq-$1 ns_port br_port ha_port deadline pid
  rm -rf "$dir" && mkdir -p "$dir/home"
  ns_port=$(bench_port)
  br_port=$(bench_port)
  ha_port=$(bench_port)
  cat >"$dir/namesrv.conf" <<EOF
listenPort=$ns_port
bindAddress=127.0.0.1
EOF
  cat >"$dir/broker.conf" <<EOF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerRole=ASYNC_MASTER
flushDiskType=$flush
namesrvAddr=127.0.0.1:$ns_port
brokerIP1=127.0.0.1
bindAddress=127.0.0.1
listenPort=$br_port
haListenPort=$ha_port
storePathRootDir=$dir/store
storePathCommitLog=$dir/store/commitlog
maxTransferCountOnMessageInMemory=1024
maxTransferBytesOnMessageInMemory=1048576
maxTransferCountOnMessageInDisk=1024
maxTransferBytesOnMessageInDisk=1048576
EOF
  cp "$dir/namesrv.conf" "$res/rocketmq-$flush-namesrv.conf"
  cp "$dir/broker.conf" "$res/rocketmq-$flush-broker.conf"
  # user.home: RocketMQ logs to ~/logs/rocketmqlogs; rocketmq.home.dir is required.
  # shellcheck disable=SC2086
  java $RMQ_NAMESRV_OPTS -Duser.home="$dir/home" -Drocketmq.home.dir="$dir/home" -cp "$server_cp" \
    org.apache.rocketmq.namesrv.NamesrvStartup -c "$dir/namesrv.conf" >"$res/rocketmq-$flush-namesrv.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  rmq_srv=("$pid")
  deadline=$((SECONDS + 90))
  until port_open "$ns_port"; do
    kill -0 "$pid" 2>/dev/null || die "RocketMQ's NameServer exited; see $res/rocketmq-$flush-namesrv.log"
    ((SECONDS < deadline)) || die "RocketMQ's NameServer did not listen within 90s"
    sleep 0.1
  done
  RMQ_NS=127.0.0.1:$ns_port
  # shellcheck disable=SC2086
  java $RMQ_BROKER_OPTS -Duser.home="$dir/home" -Drocketmq.home.dir="$dir/home" -cp "$server_cp" \
    org.apache.rocketmq.broker.BrokerStartup -c "$dir/broker.conf" >"$res/rocketmq-$flush-broker.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  rmq_srv+=("$pid")
  until grep -q 'boot success' "$res/rocketmq-$flush-broker.log"; do
    kill -0 "$pid" 2>/dev/null || die "RocketMQ's broker exited; see $res/rocketmq-$flush-broker.log and $dir/home/logs"
    ((SECONDS < deadline)) || die "RocketMQ's broker did not boot within 90s"
    sleep 0.1
  done
  say "Apache RocketMQ $ROCKETMQ_VERSION ($flush): NameServer $RMQ_NS, broker 127.0.0.1:$br_port"
}

# ------------------------------------------------------------- measuring
failed=0
rmqbench=(java $CLIENT_OPTS -Duser.home="$DATA_DIR/client-home" -Drocketmq.client.logRoot="$res/client-logs"
  -Drocketmq.log.root="$res/client-logs" -cp "$client_cp" io.bolide.benchrmq.RmqBench)

# step NAME SYSTEM (bolide|rocketmq) RMQBENCH-ARGS... runs rmqbench against
# SYSTEM under timeout; stdout to $res/NAME.out. Sets srv_ticks (the
# system's NameServer + broker CPU during the step) and cli_ticks (the whole
# client process), also written to $res/NAME.cpu.
step() {
  local name=$1 sys=$2 status=0 srv ns s0 c0
  shift 2
  if [[ $sys == bolide ]]; then srv=("${bolide_srv[@]}") ns=$BOLIDE_NS; else srv=("${rmq_srv[@]}") ns=$RMQ_NS; fi
  local cmd=("${rmqbench[@]}" "$1" --namesrv "$ns" "${@:2}")
  settle "${pids[@]}" >"$res/$name.settle"
  say "$name: rmqbench $* ($sys; settled: $(<"$res/$name.settle"))"
  echo "${cmd[*]}" >"$res/$name.cmd"
  s0=$(proc_ticks "${srv[@]}")
  c0=$(child_ticks)
  timeout -k 10 "$STEP_TIMEOUT" "${cmd[@]}" >"$res/$name.out" 2>"$res/$name.err" || status=$?
  cli_ticks=$(($(child_ticks) - c0))
  srv_ticks=$(($(proc_ticks "${srv[@]}") - s0))
  echo "server_ticks=$srv_ticks client_ticks=$cli_ticks ticks_per_second=$ticks" >"$res/$name.cpu"
  if ((status != 0)); then
    if ((status == 124)); then say "  timed out after ${STEP_TIMEOUT}s"; else say "  failed (status $status)"; fi
    tail -n 5 "$res/$name.err" >&2 || true
    tail -n 1 "$res/$name.out" >&2 || true
    failed=$((failed + 1))
    return 1
  fi
}

record() { if [[ -n $2 ]]; then echo "$2" >>"$res/fig-$1"; fi; }
# take KEY NAME HANDLED records a step's figures: msgs/s, latencies, the
# server CPU per million of the HANDLED messages and the client's CPU per
# million over its timed window (rmqbench's cpuSeconds).
take() {
  local key=$1 out=$res/$2.out handled=$3 f
  for f in msgsPerSec p50 p99 p999 missing sendLagP99; do record "$key-$f" "$(jnum "$out" "$f")"; done
  record "$key-cpusrv" "$(per_million "$srv_ticks" "$handled")"
  record "$key-cpucli" "$(awk -v c="$(jnum "$out" cpuSeconds)" -v n="$(jnum "$out" messages)" \
    'BEGIN { if (n > 0) printf "%.2f\n", c / n * 1e6 }')"
  f=$(jnum "$out" errors)
  if [[ -n $f && $f != 0 ]]; then say "  $f errors: $(sed -n 's/.*"firstError":"\([^"]*\)".*/\1/p' "$out")"; fi
}

# both KEY R ARGS... runs one repetition of a workload on both systems, in
# the order that alternates with R and the workload's index $wl.
both() {
  local key=$1 r=$2 sys order
  shift 2
  if (((r + wl) % 2)); then order=(rocketmq bolide); else order=(bolide rocketmq); fi
  for sys in "${order[@]}"; do
    step "$key-$sys-$r" "$sys" "$@" && take "$key-$sys" "$key-$sys-$r" "$handled" || true
  done
}


# rss_of FIELD PID...: FIELD of /proc/PID/status (VmRSS, RssAnon, RssFile)
# in MiB of each, then the sum ("a b sum").
rss_of() {
  local field=$1 p out="" sum=0 k
  shift
  for p in "$@"; do
    k=$(status_kib "$p" "$field")
    out+="$(awk -v k="$k" 'BEGIN { printf "%.1f", k / 1024 }') "
    sum=$((sum + k))
  done
  echo "$out$(awk -v k="$sum" 'BEGIN { printf "%.1f", k / 1024 }')"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# Phase 1: async flush on both.
start_rocketmq ASYNC_FLUSH
start_bolide async
say "idle for ${IDLE_SETTLE}s, then VmRSS, RssAnon and RssFile"
sleep "$IDLE_SETTLE"
# idle[SYSTEM-FIELD] = "nameserver broker sum" in MiB.
declare -A idle
: >"$res/idle-rss.txt"
for f in VmRSS RssAnon RssFile; do
  idle[rocketmq-$f]=$(rss_of "$f" "${rmq_srv[@]}")
  idle[bolide-$f]=$(rss_of "$f" "${bolide_srv[@]}")
  for sys in bolide rocketmq; do
    read -r i_ns i_br i_sum <<<"${idle[$sys-$f]}"
    echo "$sys $f nameserver $i_ns broker $i_br total $i_sum MiB" >>"$res/idle-rss.txt"
  done
done
for sys in bolide rocketmq; do
  for p in $(if [[ $sys == bolide ]]; then echo "${bolide_srv[@]}"; else echo "${rmq_srv[@]}"; fi); do
    { echo "== $sys $p: $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-200)"; grep -E '^(VmRSS|RssAnon|RssFile|RssShmem|VmSwap|Threads):' "/proc/$p/status"; } >>"$res/idle-status.txt" 2>/dev/null || true
  done
done
read -r rmq_ns_rss rmq_br_rss rmq_rss <<<"${idle[rocketmq-VmRSS]}"
read -r bol_ns_rss bol_br_rss bol_rss <<<"${idle[bolide-VmRSS]}"
say "idle VmRSS: Bolide $bol_rss MiB, RocketMQ $rmq_rss MiB (RssAnon: Bolide ${idle[bolide-RssAnon]##* }, RocketMQ ${idle[rocketmq-RssAnon]##* } MiB)"

for sys in bolide rocketmq; do
  step "topics-$sys" "$sys" topic --topic warm,p1,p16,async1,batch,backlog,e2e --queues "$QUEUES" ||
    die "could not create the topics on $sys"
done
handled=$((WARM_MSGS + WARMUP))
wl=0
both warmup 1 produce --topic warm --mode sync --producers 16 --count "$WARM_MSGS" --warmup "$WARMUP" --size "$SIZE"

for ((r = 1; r <= REPS; r++)); do
  wl=1 handled=$((MSGS_1 + WARMUP))
  both p1 "$r" produce --topic p1 --mode sync --producers 1 --count "$MSGS_1" --warmup "$WARMUP" --size "$SIZE"
  wl=2 handled=$((MSGS_16 + WARMUP))
  both p16 "$r" produce --topic p16 --mode sync --producers 16 --count "$MSGS_16" --warmup "$WARMUP" --size "$SIZE"
  wl=3 handled=$((MSGS_ASYNC1 + WARMUP))
  both async1 "$r" produce --topic async1 --mode async --inflight "$ASYNC_WINDOW" --count "$MSGS_ASYNC1" \
    --warmup "$WARMUP" --size "$SIZE"
  wl=4 handled=$((MSGS_ASYNC + WARMUP))
  both batch "$r" produce --topic batch --mode batch --batch "$ASYNC_BATCH" --inflight "$ASYNC_INFLIGHT" \
    --count "$MSGS_ASYNC" --warmup "$WARMUP" --size "$SIZE"
done
# The backlog: written once on each system, then read REPS times from the
# first message by a fresh group each time.
handled=$BACKLOG wl=5
both fill 0 produce --topic backlog --mode batch --batch "$ASYNC_BATCH" --inflight "$ASYNC_INFLIGHT" \
  --count "$BACKLOG" --warmup 0 --size "$SIZE"
for ((r = 1; r <= REPS; r++)); do
  both consume "$r" consume --topic backlog --count "$BACKLOG" --pull-batch "$PULL_BATCH"
done
E2E_MSGS=$(awk -v r="$E2E_RATE" -v d="$(seconds "$E2E_DURATION")" -v w="$(seconds "$E2E_WARMUP")" \
  'BEGIN { printf "%.0f", r * (d + w) }')
handled=$E2E_MSGS wl=6
for ((r = 1; r <= REPS; r++)); do
  both e2e "$r" e2e --topic e2e --rate "$E2E_RATE" --duration "$E2E_DURATION" --warmup "$E2E_WARMUP" --size "$SIZE" \
    --senders "$E2E_SENDERS" --send "$E2E_SEND" --inflight "$E2E_INFLIGHT" --consume-threads "$E2E_CONSUMERS" \
    --consume-batch "$E2E_CONSUME_BATCH"
done
stop_all
if [[ $KEEP != 1 ]]; then rm -rf "$DATA_DIR"; fi

# Phase 2: sync flush on both.
start_rocketmq SYNC_FLUSH
start_bolide sync
for sys in bolide rocketmq; do
  step "topic-durable-$sys" "$sys" topic --topic durable --queues "$QUEUES" >/dev/null || die "could not create topic durable on $sys"
done
handled=$((MSGS_DURABLE + WARMUP)) wl=7
for ((r = 1; r <= REPS; r++)); do
  both durable "$r" produce --topic durable --mode sync --producers 16 --count "$MSGS_DURABLE" --warmup "$WARMUP" --size "$SIZE"
done
stop_all
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- report
# fig_stat, grp, cpucell and table_awk: scripts/bench-lib.sh.

# row LABEL KEY: throughput of KEY on both; target ≥ 2×.
row() {
  awk -v label="$1" -v bs="$(fig_stat "$2-bolide-msgsPerSec")" -v rs="$(fig_stat "$2-rocketmq-msgsPerSec")" \
    -v bc="$(cpucell "$2-bolide")" -v rc="$(cpucell "$2-rocketmq")" -v reps="$REPS" "$table_awk"'
    BEGIN {
      split(bs, B, " "); split(rs, R, " ")
      ratio = "–"; met = "–"
      if (bs != "" && rs != "" && R[1] > 0) {
        x = B[1] / R[1]; ratio = sprintf("%.2f×", x)
        met = x >= 2 ? "yes" : sprintf("**no** (%.2f× short)", up(2 / x))
      }
      printf "| %s | %s | %s | %s | ≥ 2× | %s | %s | %s |\n", label, cell(bs), cell(rs), ratio, met, bc, rc
    }'
}

# e2e_row: p50 / p99 / p99.9 on both; target: RocketMQ's p99 ≥ 2× Bolide's.
e2e_row() {
  awk -v want="$(grp "$E2E_RATE")" -v bc="$(cpucell e2e-bolide)" -v rc="$(cpucell e2e-rocketmq)" \
    -v b50="$(fig_stat e2e-bolide-p50)" -v b99="$(fig_stat e2e-bolide-p99)" -v b999="$(fig_stat e2e-bolide-p999)" \
    -v r50="$(fig_stat e2e-rocketmq-p50)" -v r99="$(fig_stat e2e-rocketmq-p99)" -v r999="$(fig_stat e2e-rocketmq-p999)" \
    -v bm="$(fig_stat e2e-bolide-missing)" -v rm="$(fig_stat e2e-rocketmq-missing)" \
    -v bl="$(fig_stat e2e-bolide-sendLagP99)" -v rl="$(fig_stat e2e-rocketmq-sendLagP99)" "$table_awk"'
    function latcell(a, b, c, m, l,   x, y, z, w, v, s) {
      if (b == "") return "failed"
      split(a, x, " "); split(b, y, " "); split(c, z, " "); split(m, w, " "); split(l, v, " ")
      s = sprintf("p50 %.2f / p99 %.2f / p99.9 %.2f ms", x[1], y[1], z[1])
      if (l != "") s = s sprintf("; sends p99 %.2f ms late", v[1])
      if (w[1] > 0) s = s sprintf(" (%d not received)", w[1])
      return s
    }
    BEGIN {
      ratio = "–"; met = "–"
      split(b99, B, " "); split(r99, R, " ")
      if (b99 != "" && r99 != "" && B[1] > 0) {
        x = R[1] / B[1]; ratio = sprintf("%.2f× lower p99", x)
        met = x >= 2 ? "yes" : sprintf("**no** (%.2f× short)", up(2 / x))
      }
      printf "| end-to-end latency at %s msgs/s (async flush) | %s | %s | %s | p99 ≥ 2× lower | %s | %s | %s |\n",
        want, latcell(b50, b99, b999, bm, bl), latcell(r50, r99, r999, rm, rl), ratio, met, bc, rc
    }'
}

mem_row() {
  awk -v b="$bol_rss" -v r="$rmq_rss" -v bn="$bol_ns_rss" -v bb="$bol_br_rss" -v rn="$rmq_ns_rss" -v rb="$rmq_br_rss" "$table_awk"'
    BEGIN {
      ratio = "–"; met = "–"
      if (b > 0) { x = r / b; ratio = sprintf("%.1f× less", x); met = x >= 20 ? "yes" : sprintf("**no** (%.2f× short)", up(20 / x)) }
      printf "| idle memory, VmRSS of NameServer + broker | %.1f + %.1f = %.1f MiB | %.1f + %.1f = %.1f MiB | %s | ≥ 20× less | %s | – | – |\n",
        bn, bb, b, rn, rb, r, ratio, met
    }'
}

# mem_part_row FIELD LABEL: one part of the idle VmRSS on both, not judged.
mem_part_row() {
  awk -v label="$2" -v b="${idle[bolide-$1]}" -v r="${idle[rocketmq-$1]}" '
    BEGIN {
      split(b, B, " "); split(r, R, " "); ratio = "–"
      if (B[3] > 0) ratio = sprintf("%.1f× less", R[3] / B[3])
      printf "| %s | %.1f + %.1f = %.1f MiB | %.1f + %.1f = %.1f MiB | %s | – | – | – | – |\n",
        label, B[1], B[2], B[3], R[1], R[2], R[3], ratio
    }'
}

table=$res/table.md
{
  echo "### Bolide vs Apache RocketMQ, side by side ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo
  echo "Machine: $(nproc) vCPU, $(uname -r), $(go version | awk '{print $3}'), $(java -version 2>&1 | head -n 1);" \
    "load average $load_start at the start, $load_end at the end. Bolide ${BOLIDE_BIN:+binaries in $BOLIDE_BIN, tree }$(git describe --always --dirty 2>/dev/null || echo '?')," \
    "Apache RocketMQ $ROCKETMQ_VERSION (NameServer: $RMQ_NAMESRV_OPTS; broker: ${RMQ_BROKER_OPTS%% -XX:G1HeapRegionSize*}, G1)." \
    "Client on both: rmqbench (test/bench-rocketmq) on rocketmq-client $ROCKETMQ_VERSION, remoting. $SIZE-byte messages," \
    "one replica, client and servers on loopback, stores on the same disk; topics of $QUEUES queues." \
    "Figures are msgs/s, the median of $REPS run(s)$( ((REPS > 1)) && echo ' (min–max)')."
  ((QUICK == 1)) && echo && echo "**QUICK mode: small counts, one run; the figures are not meaningful.**"
  echo
  echo "| workload | Bolide | Apache RocketMQ | Bolide / RocketMQ | target | met | Bolide CPU s / M msgs (server + client) | RocketMQ CPU s / M msgs (server + client) |"
  echo "|---|---|---|---|---|---|---|---|"
  row "1 producer, synchronous send (async flush)" p1
  row "16 producers, synchronous send (async flush)" p16
  row "asynchronous producer, $ASYNC_WINDOW in flight (async flush)" async1
  row "batched producer: batch $ASYNC_BATCH, $ASYNC_INFLIGHT in flight (async flush)" batch
  row "16 producers, durable ack (sync flush / SYNC_FLUSH)" durable
  row "consume a backlog of $(grp "$BACKLOG") (fresh group, pulls of $PULL_BATCH)" consume
  e2e_row
  mem_row
  mem_part_row RssAnon "of which RssAnon (private: heaps, stacks)"
  mem_part_row RssFile "of which RssFile (mapped files: executable, JVM libraries and class data)"
  echo
  echo "Messages per run: $(grp "$MSGS_1") (1 producer), $(grp "$MSGS_16") (16 producers), $(grp "$MSGS_ASYNC1") (asynchronous)," \
    "$(grp "$MSGS_ASYNC") (batched), $(grp "$MSGS_DURABLE") (durable), $(grp "$BACKLOG") (backlog), each produce run after" \
    "$(grp "$WARMUP") untimed; end-to-end: $(grp "$E2E_RATE") msgs/s for $E2E_DURATION, the first $E2E_WARMUP untimed, sent by $E2E_SENDERS" \
    "threads on a fixed schedule ($E2E_SEND sends$([[ $E2E_SEND == async ]] && echo ", at most $E2E_INFLIGHT in flight per thread")), received by a push consumer" \
    "($E2E_CONSUMERS threads, up to $E2E_CONSUME_BATCH messages per listener call); latency from each message's scheduled send time to its" \
    "receipt, \"sends p99 … late\": the 99th percentile of how long after its scheduled time a send call started. CPU s / M msgs: CPU seconds per million" \
    "messages, medians; server = NameServer + broker (utime + stime, /proc/<pid>/stat) over the step, warm-up messages" \
    "counted; client = rmqbench's process CPU time over its timed window. Idle memory: VmRSS ${IDLE_SETTLE}s after start," \
    "before any traffic, and its parts RssAnon and RssFile (/proc/<pid>/status); Bolide's binaries built as \`make release\`" \
    "builds them (static, -trimpath, stripped, tags $BUILD_TAGS)${BOLIDE_BIN:+ unless BOLIDE_BIN gave others}. Commands and raw outputs: .bench/results/$stamp/ (made by scripts/bench-vs-rocketmq.sh)." \
    "$(settle_note)"
} >"$table"
cp "$table" "$OUT"
echo
cat "$table"
echo
say "table written to $table and $OUT"
((failed == 0)) || die "$failed step(s) failed; see $res"
