#!/usr/bin/env bash
# footprint.sh — idle footprint of the real daemons: starts a NameServer and
# a broker on an empty store (default options, loopback, ports picked by
# the kernel), waits for each one's /readyz to answer 200, and prints the
# time from exec to ready and the resident set (VmRSS) once idle.
#
#   BIN        directory of the binaries (default ./bin; `make build` first)
#   SETTLE     seconds to stay idle before reading VmRSS (default 2)
#   KEEP=1     keep the work directory (logs, store)
#
# Targets (docs/BENCHMARKS.md): broker ≤ 64 MiB and ready ≤ 200 ms on an
# empty store, NameServer ≤ 32 MiB.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$(cd "$here/.." && pwd)/bin}
SETTLE=${SETTLE:-2}
for b in bolide-nameserver bolide-broker; do
  [[ -x $BIN/$b ]] || { echo "footprint: $BIN/$b is missing: run 'make build' first" >&2; exit 1; }
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/bolide-footprint.XXXXXX")
pids=()
cleanup() {
  # The broker first (it unregisters), then the NameServer.
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[$i]}" 2>/dev/null || true
    wait "${pids[$i]}" 2>/dev/null || true
  done
  if [[ ${KEEP:-0} == 1 ]]; then echo "footprint: kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT

# http_status HOST:PORT PATH prints the HTTP status of a GET, or nothing;
# bash's /dev/tcp spares a process per poll, which on a loaded machine
# would add tens of milliseconds to the measured time.
http_status() {
  local line
  exec 3<>"/dev/tcp/${1%:*}/${1##*:}" 2>/dev/null || return 0
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&3
  IFS=' ' read -r _ line _ <&3 || true
  exec 3<&- 3>&-
  echo "$line"
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# start NAME ARGS... starts a daemon, waits for /readyz = 200 and sets
# READY_MS and PID.
start() {
  local name=$1; shift
  local t0 admin code
  t0=$(now_ms)
  "$@" --admin-addr-file "$dir/$name.admin" --log-format json >"$dir/$name.log" 2>&1 &
  PID=$!
  pids+=("$PID")
  while :; do
    kill -0 "$PID" 2>/dev/null || { echo "footprint: $name exited; log:" >&2; cat "$dir/$name.log" >&2; exit 1; }
    if [[ -s $dir/$name.admin ]]; then
      admin=$(<"$dir/$name.admin")
      code=$(http_status "$admin" /readyz)
      [[ $code == 200 ]] && break
    fi
    (( $(now_ms) - t0 < 20000 )) || { echo "footprint: $name not ready after 20 s" >&2; exit 1; }
    sleep 0.005
  done
  READY_MS=$(( $(now_ms) - t0 ))
}

# log_ms FILE PATTERN is the time (ms since the epoch) of the first JSON
# log line of FILE matching PATTERN.
log_ms() {
  local ts
  ts=$(grep -m1 "$2" "$1" | sed -n 's/.*"ts":"\([^"]*\)".*/\1/p')
  echo $(( $(date -d "$ts" +%s%N) / 1000000 ))
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

start nameserver "$BIN/bolide-nameserver" --listen 127.0.0.1:0 --addr-file "$dir/ns.addr"
ns_pid=$PID ns_ready=$READY_MS
start broker "$BIN/bolide-broker" --listen 127.0.0.1:0 --ha-listen 127.0.0.1:0 --namesrv "$(<"$dir/ns.addr")" \
  --store-dir "$dir/broker-a"
br_pid=$PID br_ready=$READY_MS
# In-process start-up: from the first log line (configuration read) to
# "started" (store recovered, listeners bound, registered). The wall figure
# adds exec, runtime start and this script's polling.
ns_inproc=$(( $(log_ms "$dir/nameserver.log" '"nameserver started"') - $(log_ms "$dir/nameserver.log" 'starting') ))
br_inproc=$(( $(log_ms "$dir/broker.log" '"broker started"') - $(log_ms "$dir/broker.log" 'starting') ))
sleep "$SETTLE"
ns_rss=$(rss_kib "$ns_pid") br_rss=$(rss_kib "$br_pid")

printf '%-18s %16s %20s %12s\n' daemon "ready, wall (ms)" "started, in-process" "VmRSS (MiB)"
awk -v r="$ns_ready" -v i="$ns_inproc" -v k="$ns_rss" 'BEGIN { printf "%-18s %16d %20d %12.1f\n", "bolide-nameserver", r, i, k / 1024 }'
awk -v r="$br_ready" -v i="$br_inproc" -v k="$br_rss" 'BEGIN { printf "%-18s %16d %20d %12.1f\n", "bolide-broker", r, i, k / 1024 }'
