#!/usr/bin/env bash
# bench-vs-nats.sh — Bolide and NATS JetStream side by side, in one run, on
# this machine: 1 KiB messages, one replica, file storage, client and server
# on loopback. It builds nats-server and natscli from the Go module proxy
# (once; cached under .bench/tools/), builds Bolide's binaries into
# .bench/bolide/ as `make release` does (static, -trimpath, stripped, gRPC tracing left out:
# bench_go_build in scripts/bench-lib.sh), and compares like with like:
#
#   Bolide async flush  vs  NATS default config (acks before fsync)
#   Bolide sync flush   vs  NATS sync_interval: always (fsync before each ack)
#
# Workloads (Bolide: `bolide bench`; NATS: `nats bench js`; median of REPS;
# the system that goes first alternates per workload and repetition; before
# each step, `sync`, a wait until every daemon of both systems is quiet, and
# WARM_MIB of memory touched and freed: settle in scripts/bench-lib.sh):
#
#   1 producer, synchronous send      produce --producers 1        | pub sync --clients 1
#   16 producers, synchronous send    produce --producers 16       | pub sync --clients 16
#   batched asynchronous producer     produce --batch B --async    | pub async --batch 500 (and, for
#                                                                    reference, pub fast --batch 500)
#   16 producers, durable ack         produce --producers 16       | pub sync --clients 16 (always)
#   consume a backlog                 consume (fresh group)        | ordered (ephemeral ordered consumer)
#   end-to-end latency at a rate      e2e --rate R --duration D    | n/a (natscli has no JetStream
#                                                                    end-to-end mode)
#
# It prints one markdown table (Bolide, NATS, ratio, target) and writes it,
# with every command's raw output, under .bench/results/<time>/; the table is
# also copied to $OUT. Each step runs under `timeout`.
#
# CPU per message: around every measured step the script reads the CPU time
# (utime + stime, children included, from /proc/<pid>/stat) of the measured
# system's server processes (Bolide: NameServer and broker; NATS:
# nats-server) and of the client (the step's command and everything it ran:
# cutime + cstime of this shell, scripts/bench-lib.sh), and reports both as
# CPU seconds per million messages beside the throughput: "server + client".
# On a shared machine it is steadier than throughput. The figures of each
# step are in .bench/results/<time>/<step>.cpu (clock ticks).
#
# Settings (environment; QUICK=1 shrinks the defaults to check the script
# in a minute or two — its figures mean nothing):
#
#   QUICK            1: small counts, one repetition            (default 0)
#   REPS             repetitions of each measurement            (3; QUICK 1)
#   MSGS_1           messages, 1 producer                       (100000; QUICK 2000)
#   MSGS_16          messages, 16 producers                     (200000; QUICK 10000)
#   MSGS_ASYNC       messages, batched/async producer           (1000000; QUICK 50000)
#   MSGS_DURABLE     messages, 16 producers with durable acks   (100000; QUICK 5000)
#   BACKLOG          messages in the backlog to consume         (1000000; QUICK 50000)
#   E2E_RATE         end-to-end run: messages/s                 (10000)
#   E2E_RATE_HIGH    a second end-to-end run at this rate       (50000; 0: none)
#   E2E_DURATION     end-to-end run: how long                   (30s; QUICK 5s)
#   E2E_WARMUP       end-to-end run: untimed start              (1s)
#   FLOOR_DURATION   the loopback round-trip floor measured before each
#                    end-to-end run: how long                   (5s; QUICK 2s)
#   ASYNC_BATCH      Bolide messages per request                (64)
#   ASYNC_INFLIGHT   Bolide requests in flight                  (16)
#   PULL_BATCH       Bolide messages per pull when consuming    (500, like NATS_BATCH; the broker caps it at --pull-max-messages, 1024)
#   NATS_BATCH       NATS outstanding acks / batch size         (500)
#   NATS_STREAM_BYTES  size limit of each NATS stream           (4GB)
#   QUEUES           queues of each Bolide topic                (8)
#   SIZE             message body bytes                         (1024)
#   STEP_TIMEOUT     seconds for one step                       (600; QUICK 120)
#   SETTLE_PCT, SETTLE_MAX  before each step, wait (at most SETTLE_MAX s)
#                    until the daemons use at most SETTLE_PCT % of one CPU
#                    over a second                              (20, 20)
#   WARM_MIB         then touch and free this many MiB of memory (at most a
#                    quarter of what is available; 0: none), so that the
#                    step's new page-cache pages are not ones the hypervisor
#                    took back (warm_memory in scripts/bench-lib.sh) (2048)
#   BUILD_TIMEOUT    seconds for one build                      (1200)
#   DATA_DIR         where both systems store data (same disk as a real
#                    deployment; not tmpfs)                     (.bench/data)
#   OUT              copy of the table                          (.bench/bench-vs-nats.md)
#   KEEP             1: keep DATA_DIR afterwards                (0)
#   NATS_SERVER_VERSION / NATSCLI_VERSION                       (v2.15.2 / v0.5.0)
#   BOLIDE_BIN       a directory of prebuilt bolide, bolide-nameserver and
#                    bolide-broker to measure instead of building this tree
#                    (to compare two builds: run them alternately)     (unset)
#
# Usage: scripts/bench-vs-nats.sh        (or: make bench-vs-nats QUICK=1)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

QUICK=${QUICK:-0}
q() { if [[ $QUICK == 1 ]]; then echo "$2"; else echo "$1"; fi; }
REPS=${REPS:-$(q 3 1)}
MSGS_1=${MSGS_1:-$(q 100000 2000)}
MSGS_16=${MSGS_16:-$(q 200000 10000)}
MSGS_ASYNC=${MSGS_ASYNC:-$(q 1000000 50000)}
MSGS_DURABLE=${MSGS_DURABLE:-$(q 100000 5000)}
BACKLOG=${BACKLOG:-$(q 1000000 50000)}
E2E_RATE=${E2E_RATE:-10000}
E2E_RATE_HIGH=${E2E_RATE_HIGH:-50000}
E2E_DURATION=${E2E_DURATION:-$(q 30s 5s)}
E2E_WARMUP=${E2E_WARMUP:-1s}
FLOOR_DURATION=${FLOOR_DURATION:-$(q 5s 2s)}
ASYNC_BATCH=${ASYNC_BATCH:-64}
ASYNC_INFLIGHT=${ASYNC_INFLIGHT:-16}
PULL_BATCH=${PULL_BATCH:-500}
NATS_BATCH=${NATS_BATCH:-500}
NATS_STREAM_BYTES=${NATS_STREAM_BYTES:-4GB}
QUEUES=${QUEUES:-8}
SIZE=${SIZE:-1024}
STEP_TIMEOUT=${STEP_TIMEOUT:-$(q 600 120)}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-1200}
NATS_SERVER_VERSION=${NATS_SERVER_VERSION:-v2.15.2}
NATSCLI_VERSION=${NATSCLI_VERSION:-v0.5.0}
BENCH_DIR=$root/.bench
DATA_DIR=${DATA_DIR:-$BENCH_DIR/data}
OUT=${OUT:-$BENCH_DIR/bench-vs-nats.md}
KEEP=${KEEP:-0}

stamp=$(date -u +%Y%m%dT%H%M%SZ)
res=$BENCH_DIR/results/$stamp
mkdir -p "$res"
say() { echo "bench-vs-nats: $*" >&2; }
die() { say "$*"; exit 1; }
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
for c in go timeout awk sed; do
  command -v "$c" >/dev/null || die "$c is missing"
done

# ---------------------------------------------------------------- builds
tools=$BENCH_DIR/tools
nats_server=$tools/nats-server-$NATS_SERVER_VERSION/nats-server
nats=$tools/natscli-$NATSCLI_VERSION/nats
bolide_bin=${BOLIDE_BIN:-$BENCH_DIR/bolide}
bolide=$bolide_bin/bolide

# install BINARY MODULE@VERSION builds a tool once into BINARY's directory.
install_tool() {
  local bin=$1 pkg=$2
  [[ -x $bin ]] && return 0
  say "building $pkg (once; cached in $(dirname "$bin"))"
  mkdir -p "$(dirname "$bin")"
  GOBIN=$(dirname "$bin") timeout -k 10 "$BUILD_TIMEOUT" go install "$pkg" >"$res/build-$(basename "$bin").log" 2>&1 ||
    die "go install $pkg failed; see $res/build-$(basename "$bin").log"
}
install_tool "$nats_server" "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"
install_tool "$nats" "github.com/nats-io/natscli/nats@$NATSCLI_VERSION"
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

# The machine's own latency floor, measured before each end-to-end run
# (test/loopback-rtt: TCP round trips on loopback, paced and timed as
# `bolide bench e2e` paces and times its messages).
loopback_rtt=$BENCH_DIR/loopback-rtt/loopback-rtt
mkdir -p "$(dirname "$loopback_rtt")"
bench_go_build "$(dirname "$loopback_rtt")" ./test/loopback-rtt || die "building test/loopback-rtt failed"

# ------------------------------------------------------------- processes
pids=()   # every daemon this run started
bolide_srv=() nats_srv=()   # the server processes of each system (CPU per message)
stop_pid() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}
stop_all() {
  local pid
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
  pids=() bolide_srv=() nats_srv=()
}
cleanup() {
  stop_all
  if [[ $KEEP != 1 ]]; then rm -rf "$DATA_DIR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM


# start_bolide FLUSH starts one NameServer and one broker (flush mode FLUSH)
# on free loopback ports; sets NS.
start_bolide() {
  local flush=$1 dir=$DATA_DIR/bolide-$1
  rm -rf "$dir" && mkdir -p "$dir"
  "$bolide_bin/bolide-nameserver" --listen 127.0.0.1:0 --gossip off --addr-file "$dir/ns.addr" \
    >"$res/bolide-$flush-nameserver.log" 2>&1 &
  pids+=($!)
  bolide_srv=($!)
  wait_file "$dir/ns.addr" $! "bolide-nameserver"
  NS=$(cat "$dir/ns.addr")
  "$bolide_bin/bolide-broker" --namesrv "$NS" --listen 127.0.0.1:0 --ha-listen 127.0.0.1:0 --gossip off \
    --store-dir "$dir/broker-a" --broker-name broker-a --flush "$flush" --addr-file "$dir/broker.addr" \
    >"$res/bolide-$flush-broker.log" 2>&1 &
  pids+=($!)
  bolide_srv+=($!)
  wait_file "$dir/broker.addr" $! "bolide-broker"
  local deadline=$((SECONDS + 60))
  until "$bolide" cluster list -n "$NS" --timeout 2s -o json 2>/dev/null | grep -q '"broker":"broker-a"'; do
    ((SECONDS < deadline)) || die "the NameServer does not list broker-a after 60s"
    sleep 0.1
  done
  say "Bolide ($flush flush): NameServer $NS, broker $(cat "$dir/broker.addr")"
}

# start_nats NAME [EXTRA-JETSTREAM-SETTING] starts nats-server with file
# storage on a free loopback port; sets NATS_URL.
start_nats() {
  local name=$1 extra=${2:-} dir=$DATA_DIR/nats-$1
  rm -rf "$dir" && mkdir -p "$dir/ports"
  cat >"$dir/nats.conf" <<EOF
listen: 127.0.0.1:-1
server_name: bench-$name
jetstream {
  store_dir: "$dir/store"
  max_file_store: 64GB
  max_memory_store: 1GB
  $extra
}
EOF
  "$nats_server" -c "$dir/nats.conf" --ports_file_dir "$dir/ports" >"$res/nats-$name-server.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  nats_srv=("$pid")
  wait_file "$dir/ports/nats-server_$pid.ports" "$pid" "nats-server ($name)"
  NATS_URL=$(grep -o 'nats://[^"]*' "$dir/ports/nats-server_$pid.ports" | head -n 1)
  say "NATS ($name${extra:+, $extra}): $NATS_URL"
}

# ------------------------------------------------------------- measuring
failed=0
# step NAME CMD... runs one measurement under timeout; its stdout goes to
# $res/NAME.out. A failure is reported and the run goes on.
# CMD "b ARGS" is `bolide ARGS` against this run's NameServer, "nb ARGS" is
# `nats bench js ARGS` against this run's NATS server. It sets srv_ticks
# and cli_ticks: the CPU of the system's servers and of the client during
# the step (also in $res/NAME.cpu).
step() {
  local name=$1; shift
  local cmd=("$@") status=0 srv=() s0 c0
  case $1 in
    b) cmd=("$bolide" -n "$NS" "${@:2}"); srv=("${bolide_srv[@]}") ;;
    nb) cmd=("$nats" --no-context -s "$NATS_URL" bench js "${@:2}" --size="$SIZE" --no-progress); srv=("${nats_srv[@]}") ;;
  esac
  settle "${pids[@]}" >"$res/$name.settle"
  say "$name: ${cmd[*]#"$root"/} (settled: $(<"$res/$name.settle"))"
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
    failed=$((failed + 1))
    return 1
  fi
}

# record KEY VALUE appends one figure of KEY (one line per repetition).
record() { if [[ -n $2 ]]; then echo "$2" >>"$res/fig-$1"; fi; }
# record_cpu KEY MSGS records the last step's server and client CPU seconds
# per million messages (MSGS: the messages the step handled).
record_cpu() {
  record "$1-cpusrv" "$(per_million "$srv_ticks" "$2")"
  record "$1-cpucli" "$(per_million "$cli_ticks" "$2")"
}
# natsrate FILE reads the aggregate msgs/s of a `nats bench` report.
natsrate() {
  local line
  line=$(grep 'aggregated stats:' "$1" || grep ' stats: ' "$1" || true)
  sed -n 's/.*stats: \([0-9,]*\) msgs\/sec.*/\1/p' <<<"$line" | head -n 1 | tr -d ,
}

b() { "$bolide" -n "$NS" "$@"; }
# Each stream reserves its --maxbytes of the server's max_file_store.
pubflags=(--create --purge --storage=file --replicas=1 --maxbytes="$NATS_STREAM_BYTES")

# bolide_produce KEY TOPIC COUNT ARGS... / nats_pub KEY KIND COUNT ARGS...
bolide_produce() {
  local key=$1 topic=$2 count=$3 r=$4; shift 4
  step "$key-bolide-$r" b bench produce --topic "$topic" --count "$count" --size "$SIZE" -o json "$@" &&
    record "$key-bolide" "$(jnum "$res/$key-bolide-$r.out" msgsPerSec)" && record_cpu "$key-bolide" "$count"
}
nats_pub() {
  local key=$1 kind=$2 count=$3 r=$4; shift 4
  step "$key-nats-$r" nb pub "$kind" "bench.$key" --stream="bench$key" "${pubflags[@]}" --msgs="$count" "$@" &&
    record "$key-nats" "$(natsrate "$res/$key-nats-$r.out")" && record_cpu "$key-nats" "$count"
}

# in_turn W N runs repetitions 1..REPS of workload W: the functions
# W_bolide and W_nats, each given the repetition. Bolide goes first when the
# repetition plus N (the workload's own index) is odd, so the first system
# changes with every repetition and between workloads.
in_turn() {
  local w=$1 n=$2 r sys
  for ((r = 1; r <= REPS; r++)); do
    for sys in $(if (((r + n) % 2)); then echo bolide nats; else echo nats bolide; fi); do
      "${w}_$sys" "$r" || true
    done
  done
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
# e2e_msgs RATE: the messages of one end-to-end run at RATE, warm-up
# included (its CPU covers both).
e2e_msgs() {
  awk -v r="$1" -v d="$(seconds "$E2E_DURATION")" -v w="$(seconds "$E2E_WARMUP")" 'BEGIN { printf "%.0f", r * (d + w) }'
}
# The end-to-end rates: the issue's targets are at 10 000 and 50 000 msgs/s.
e2e_rates=("$E2E_RATE")
((E2E_RATE_HIGH > 0)) && e2e_rates+=("$E2E_RATE_HIGH")

# Phase 1: Bolide async flush, NATS default (no fsync before the ack).
start_bolide async
start_nats default
for t in p1 p16 async backlog "${e2e_rates[@]/#/e2e}"; do
  b topic create "$t" --queues "$QUEUES" >/dev/null
done
p1_bolide() { bolide_produce p1 p1 "$MSGS_1" "$1" --producers 1; }
p1_nats() { nats_pub p1 sync "$MSGS_1" "$1" --clients=1; }
p16_bolide() { bolide_produce p16 p16 "$MSGS_16" "$1" --producers 16; }
p16_nats() { nats_pub p16 sync "$MSGS_16" "$1" --clients=16; }
async_bolide() {
  bolide_produce async async "$MSGS_ASYNC" "$1" --producers 1 --batch "$ASYNC_BATCH" --async --inflight "$ASYNC_INFLIGHT"
}
async_nats() {
  nats_pub async async "$MSGS_ASYNC" "$1" --batch="$NATS_BATCH" || true
  nats_pub fast fast "$MSGS_ASYNC" "$1" --batch="$NATS_BATCH"
}
in_turn p1 1
in_turn p16 2
in_turn async 3
# The backlog: written once by each system, then read REPS times from the
# first message (Bolide: a fresh group each time; NATS: an ephemeral
# ordered consumer).
step fill-bolide b bench produce --topic backlog --count "$BACKLOG" --size "$SIZE" --batch "$ASYNC_BATCH" --async \
  --inflight "$ASYNC_INFLIGHT" -o json || true
step fill-nats nb pub async bench.backlog --stream=benchbacklog "${pubflags[@]}" --msgs="$BACKLOG" --batch="$NATS_BATCH" || true
consume_bolide() {
  step "consume-bolide-$1" b bench consume --topic backlog --count "$BACKLOG" --pull-batch "$PULL_BATCH" -o json &&
    record consume-bolide "$(jnum "$res/consume-bolide-$1.out" msgsPerSec)" && record_cpu consume-bolide "$BACKLOG"
}
consume_nats() {
  step "consume-nats-$1" nb ordered --stream=benchbacklog --msgs="$BACKLOG" --batch="$NATS_BATCH" &&
    record consume-nats "$(natsrate "$res/consume-nats-$1.out")" && record_cpu consume-nats "$BACKLOG"
}
in_turn consume 4
for rate in "${e2e_rates[@]}"; do
  for ((r = 1; r <= REPS; r++)); do
    if step "e2e$rate-floor-$r" "$loopback_rtt" --rate "$rate" --duration "$FLOOR_DURATION" --size "$SIZE"; then
      for f in p50 p99 p999; do
        record "e2e$rate-floor-$f" "$(jnum "$res/e2e$rate-floor-$r.out" "$f")"
      done
    fi
    if step "e2e$rate-bolide-$r" b bench e2e --topic "e2e$rate" --rate "$rate" --duration "$E2E_DURATION" \
      --warmup "$E2E_WARMUP" --size "$SIZE" -o json; then
      for f in p50 p99 p999 msgsPerSec missing; do
        record "e2e$rate-$f" "$(jnum "$res/e2e$rate-bolide-$r.out" "$f")"
      done
      record "e2e$rate-ack-p99" "$(jobjnum "$res/e2e$rate-bolide-$r.out" ackLatencyMs p99)"
      record "e2e$rate-lag-p99" "$(jobjnum "$res/e2e$rate-bolide-$r.out" sendLagMs p99)"
      record_cpu "e2e$rate" "$(e2e_msgs "$rate")"
    fi
  done
done
stop_all
if [[ $KEEP != 1 ]]; then rm -rf "$DATA_DIR"; fi

# Phase 2: Bolide sync flush, NATS sync_interval: always.
start_bolide sync
start_nats always "sync_interval: always"
b topic create durable --queues "$QUEUES" >/dev/null
durable_bolide() { bolide_produce durable durable "$MSGS_DURABLE" "$1" --producers 16; }
durable_nats() { nats_pub durable sync "$MSGS_DURABLE" "$1" --clients=16; }
in_turn durable 5
stop_all
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- report
# fig_stat, grp, cpucell and table_awk: scripts/bench-lib.sh.

# row LABEL BOLIDE-KEY NATS-KEY TARGET-RATIO [MIN-ABSOLUTE]
row() {
  local label=$1 bs ns bc nc
  bs=$(fig_stat "$2")
  ns=$(fig_stat "$3")
  bc=$(cpucell "$2")
  nc=$(cpucell "$3")
  awk -v label="$label" -v bs="$bs" -v ns="$ns" -v bc="$bc" -v nc="$nc" -v target="$4" -v abs="${5:-0}" -v reps="$REPS" "$table_awk"'
    BEGIN {
      split(bs, B, " "); split(ns, N, " ")
      ratio = "–"; met = "–"
      if (bs != "" && ns != "" && N[1] > 0) {
        x = B[1] / N[1]; ratio = sprintf("%.2f×", x)
        if (target > 0) {
          short = ""
          if (x < target) short = sprintf("%.2f× short", up(target / x))
          if (abs > 0 && B[1] < abs) short = short (short != "" ? "; " : "") sprintf("the rate %.2f× short", up(abs / B[1]))
          met = short == "" ? "yes" : "**no** (" short ")"
        }
      }
      t = target > 0 ? sprintf("≥ %s×", target) : "(reference)"
      if (abs > 0) t = t " and ≥ " group(abs) " msgs/s"
      printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", label, cell(bs), cell(ns), ratio, t, met, bc, nc
    }'
}

# e2e_row RATE P99-MAX [P999-MAX] prints the end-to-end row of RATE against
# its targets (ms; P999-MAX empty: none).
e2e_row() {
  local k=e2e$1 p50 p99 p999 rate missing
  p50=$(fig_stat "$k-p50"); p99=$(fig_stat "$k-p99"); p999=$(fig_stat "$k-p999"); rate=$(fig_stat "$k-msgsPerSec")
  missing=$(fig_stat "$k-missing")
  awk -v p50="$p50" -v p99="$p99" -v p999="$p999" -v rate="$rate" -v missing="$missing" -v want="$(grp "$1")" \
    -v max99="$2" -v max999="${3:-}" -v bc="$(cpucell "$k")" \
    -v f99="$(fig_stat "$k-floor-p99")" -v f999="$(fig_stat "$k-floor-p999")" -v ack99="$(fig_stat "$k-ack-p99")" \
    -v lag99="$(fig_stat "$k-lag-p99")" "$table_awk"'
    BEGIN {
      target = "p99 ≤ " max99 " ms"
      if (max999 != "") target = target ", p99.9 ≤ " max999 " ms"
      if (p99 == "") { printf "| end-to-end latency at %s msgs/s | failed | n/a | – | %s | – | – | – |\n", want, target; exit }
      split(p50, a, " "); split(p99, b, " "); split(p999, c, " "); split(rate, d, " "); split(missing, e, " ")
      note = sprintf("p50 %.2f / p99 %.2f / p99.9 %.2f ms (sent %.0f msgs/s", a[1], b[1], c[1], d[1])
      if (e[1] > 0) note = note sprintf(", %d missing", e[1])
      if (ack99 != "") { split(ack99, k, " "); note = note sprintf("; acknowledged p99 %.2f ms", k[1]) }
      if (lag99 != "") { split(lag99, l, " "); note = note sprintf("; sends p99 %.2f ms late", l[1]) }
      note = note ")"
      if (f99 != "") { split(f99, g, " "); split(f999, h, " "); note = note sprintf("; loopback floor p99 %.2f / p99.9 %.2f ms", g[1], h[1]) }
      ok = b[1] <= max99 && (max999 == "" || c[1] <= max999)
      if (!ok) {
        short = ""
        if (b[1] > max99) short = sprintf("p99 %.2f×", up(b[1] / max99))
        if (max999 != "" && c[1] > max999) short = short (short != "" ? ", " : "") sprintf("p99.9 %.2f×", up(c[1] / max999))
      }
      met = ok ? "yes" : "**no** (" short " the bound)"
      printf "| end-to-end latency at %s msgs/s (async flush) | %s | n/a | – | %s | %s | %s | – |\n", want, note, target, met, bc
    }'
}

table=$res/table.md
{
  echo "### Bolide vs NATS JetStream, side by side ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo
  echo "Machine: $(nproc) vCPU, $(uname -r), $(go version | awk '{print $3}'); load average $load_start at the start," \
    "$load_end at the end. Bolide ${BOLIDE_BIN:+binaries in $BOLIDE_BIN, tree }$(git describe --always --dirty 2>/dev/null || echo '?')," \
    "nats-server $NATS_SERVER_VERSION, natscli $NATSCLI_VERSION. $SIZE-byte messages, one replica, file storage," \
    "client and server on loopback; one Bolide NameServer and one broker, topics of $QUEUES queues." \
    "Figures are msgs/s, the median of $REPS run(s)$( ((REPS > 1)) && echo ' (min–max)')."
  ((QUICK == 1)) && echo && echo "**QUICK mode: small counts, one run; the figures are not meaningful.**"
  echo
  echo "| workload | Bolide | NATS JetStream | Bolide / NATS | target | met | Bolide CPU s / M msgs (server + client) | NATS CPU s / M msgs (server + client) |"
  echo "|---|---|---|---|---|---|---|---|"
  row "1 producer, synchronous send (async flush / NATS default)" p1-bolide p1-nats 1.2
  row "16 producers, synchronous send (async flush / NATS default)" p16-bolide p16-nats 1.5
  row "batched producer: batch $ASYNC_BATCH, $ASYNC_INFLIGHT in flight / NATS async publish, $NATS_BATCH outstanding" \
    async-bolide async-nats 2 300000
  row "… the same Bolide figure / NATS fast batch publish, batch $NATS_BATCH" async-bolide fast-nats 0
  row "16 producers, durable ack (sync flush / NATS sync_interval: always)" durable-bolide durable-nats 5
  row "consume a backlog of $(grp "$BACKLOG") (fresh group / NATS ordered consumer)" consume-bolide consume-nats 2
  e2e_row "$E2E_RATE" 2 5
  ((E2E_RATE_HIGH > 0)) && e2e_row "$E2E_RATE_HIGH" 5
  echo
  echo "Messages per run: $(grp "$MSGS_1") (1 producer), $(grp "$MSGS_16") (16 producers), $(grp "$MSGS_ASYNC") (batched)," \
    "$(grp "$MSGS_DURABLE") (durable), $(grp "$BACKLOG") (backlog); end-to-end: $(grp "$E2E_RATE")$( ((E2E_RATE_HIGH > 0)) && echo " and $(grp "$E2E_RATE_HIGH")") msgs/s for $E2E_DURATION each," \
    "the first $E2E_WARMUP untimed; its latency runs from each message's scheduled send time to its receipt" \
    "(acknowledged: to its send's acknowledgement; sends late: how late each send started against its schedule, the bench's own share)." \
    "The loopback floor is this machine's own TCP round trip on loopback at the same rate, paced and timed alike, measured" \
    "for $FLOOR_DURATION before each end-to-end run (test/loopback-rtt; medians): a message through the broker makes at least two such trips." \
    "natscli has no JetStream end-to-end latency mode ('nats latency' times core NATS without storage), hence n/a." \
    "CPU s / M msgs: CPU seconds (utime + stime, children included, /proc/<pid>/stat) per million messages during" \
    "each step, medians: the system's server processes (Bolide: NameServer + broker; NATS: nats-server), then the" \
    "client process (bolide bench / nats bench); the end-to-end run counts its warm-up messages too." \
    "Commands and raw outputs: .bench/results/$stamp/ (made by scripts/bench-vs-nats.sh)." \
    "$(settle_note)"
} >"$table"
cp "$table" "$OUT"
echo
cat "$table"
echo
say "table written to $table and $OUT"
((failed == 0)) || die "$failed step(s) failed; see $res"
