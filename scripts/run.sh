#!/usr/bin/env bash
# run.sh — run a NameServer and one broker on loopback in the foreground, on
# their embedded defaults (NameServer 127.0.0.1:9876, broker broker-a on
# 127.0.0.1:10911, data in ./data/broker-a). Both log to this terminal.
# Ctrl-C (or SIGTERM) stops the broker, then the NameServer, each with one
# SIGTERM so that they drain and exit cleanly; the script exits with the
# first non-zero status of the two, or 0. `make run` builds, then runs this.
#
#   BIN   directory of the binaries (default ./bin)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$(cd "$here/.." && pwd)/bin}
run_dir=./data/run
mkdir -p "$run_dir"

for b in bolide-nameserver bolide-broker; do
  [[ -x $BIN/$b ]] || { echo "run: $BIN/$b is missing: run 'make build' first" >&2; exit 1; }
done

ns_pid="" broker_pid=""
ns_status=0 broker_status=0
stopping=0 failed=0

# stop sends one SIGTERM to the broker, waits for it, then to the
# NameServer. The daemons run in sessions of their own (setsid), so the
# terminal's Ctrl-C reaches only this script: a daemon that got the
# terminal's SIGINT and our SIGTERM would take the second signal as "exit
# now, without draining".
stop() {
  if (( stopping )); then
    # A second Ctrl-C: a daemon that gets a second signal exits at once.
    echo "run: forcing" >&2
    for p in $broker_pid $ns_pid; do kill -TERM "$p" 2>/dev/null; done
    return
  fi
  stopping=1
  echo "run: stopping" >&2
  if [[ -n $broker_pid ]] && kill -0 "$broker_pid" 2>/dev/null; then
    kill -TERM "$broker_pid" 2>/dev/null
    while kill -0 "$broker_pid" 2>/dev/null; do wait "$broker_pid"; broker_status=$?; done
    echo "run: broker exited with status $broker_status" >&2
  fi
  if [[ -n $ns_pid ]] && kill -0 "$ns_pid" 2>/dev/null; then
    kill -TERM "$ns_pid" 2>/dev/null
    while kill -0 "$ns_pid" 2>/dev/null; do wait "$ns_pid"; ns_status=$?; done
    echo "run: NameServer exited with status $ns_status" >&2
  fi
  (( broker_status != 0 )) && exit "$broker_status"
  (( ns_status != 0 )) && exit "$ns_status"
  exit "$failed"
}
trap stop INT TERM

# wait_addr FILE PID NAME waits until the daemon writes its address file.
wait_addr() {
  local i
  for ((i = 0; i < 600; i++)); do
    [[ -s $1 ]] && return 0
    if ! kill -0 "$2" 2>/dev/null; then
      echo "run: the $3 exited before serving" >&2
      failed=1
      stop
    fi
    sleep 0.05
  done
  echo "run: the $3 did not serve within 30s" >&2
  failed=1
  stop
}

setsid "$BIN/bolide-nameserver" --addr-file "$run_dir/namesrv.addr" </dev/null &
ns_pid=$!
wait_addr "$run_dir/namesrv.addr" "$ns_pid" NameServer
setsid "$BIN/bolide-broker" --addr-file "$run_dir/broker.addr" </dev/null &
broker_pid=$!
wait_addr "$run_dir/broker.addr" "$broker_pid" broker

cat >&2 <<EOF
run: Bolide is running: NameServer $(cat "$run_dir/namesrv.addr"), broker broker-a $(cat "$run_dir/broker.addr"), data in ./data
run: try   bin/bolide topic create demo && bin/bolide send --topic demo hello && bin/bolide consume --topic demo --group g
run: Ctrl-C stops both
EOF

# Wait for a signal, or for a daemon to end on its own.
while :; do
  wait -n "$ns_pid" "$broker_pid"
  st=$?
  if ! kill -0 "$broker_pid" 2>/dev/null; then
    echo "run: the broker exited on its own with status $st" >&2
    broker_pid="" broker_status=$st failed=1
    stop
  fi
  if ! kill -0 "$ns_pid" 2>/dev/null; then
    echo "run: the NameServer exited on its own with status $st" >&2
    ns_pid="" ns_status=$st failed=1
    stop
  fi
done
