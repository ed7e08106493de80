#!/usr/bin/env bash
# run.sh — run a NameServer and one broker (broker-a) on loopback in the
# foreground. Both log to this terminal. Ctrl-C (or SIGTERM) stops the
# broker, then the NameServer, each with one SIGTERM so that they drain and
# exit cleanly; the script exits with the first non-zero status of the two,
# or 0. `make run` builds, then runs this; make passes its variables on
# (`make run NAMESRV_PORT=19876 BROKER_PORT=20911`). Settings (environment):
#
#   NAMESRV_PORT  the NameServer's port     (default 9876; gossip +1, admin +2)
#   BROKER_PORT   the broker's port         (default 10911; HA +1, admin +2, gossip +3)
#   DATA_DIR      the store and run files   (default ./data: ./data/broker-a, ./data/run)
#   SEGMENT_SIZE  CommitLog segment bytes   (default 67108864 = 64 MiB; a store made
#                                            with another size keeps its own)
#   BIN           directory of the binaries (default ./bin)
#
# The daemons' other settings can come from BOLIDE_NAMESRV_* and
# BOLIDE_BROKER_* variables (docs/config.md); the flags this script passes
# (listen, namesrv, store-dir, segment-size) win over them.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$(cd "$here/.." && pwd)/bin}
NAMESRV_PORT=${NAMESRV_PORT:-9876}
BROKER_PORT=${BROKER_PORT:-10911}
DATA_DIR=${DATA_DIR:-./data}
store_dir=$DATA_DIR/broker-a
run_dir=$DATA_DIR/run
mkdir -p "$run_dir"

# Local runs use 64 MiB segments, not the broker's 1 GiB default: each
# segment (and the next one, prepared ahead) is allocated in full on disk.
# A store cannot be opened with another segment size than it was made
# with, so unless SEGMENT_SIZE is set an existing store keeps its own.
segment_size=${SEGMENT_SIZE:-67108864}
if [[ -z ${SEGMENT_SIZE:-} ]]; then
  for seg in "$store_dir"/store/commitlog/[0-9]*; do
    [[ -f $seg ]] && { segment_size=$(stat -c %s "$seg"); break; }
  done
fi

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

namesrv=127.0.0.1:$NAMESRV_PORT
rm -f "$run_dir/namesrv.addr" "$run_dir/broker.addr"
setsid "$BIN/bolide-nameserver" --listen "$namesrv" --addr-file "$run_dir/namesrv.addr" </dev/null &
ns_pid=$!
wait_addr "$run_dir/namesrv.addr" "$ns_pid" NameServer
setsid "$BIN/bolide-broker" --namesrv "$namesrv" --listen "127.0.0.1:$BROKER_PORT" --store-dir "$store_dir" \
  --segment-size "$segment_size" --addr-file "$run_dir/broker.addr" </dev/null &
broker_pid=$!
wait_addr "$run_dir/broker.addr" "$broker_pid" broker

cat >&2 <<EOF
run: Bolide is running: NameServer $(cat "$run_dir/namesrv.addr"), broker broker-a $(cat "$run_dir/broker.addr"), data in $DATA_DIR
EOF
[[ $namesrv == 127.0.0.1:9876 ]] || echo "run: export BOLIDE_NAMESRV=$namesrv   # for bin/bolide" >&2
cat >&2 <<EOF
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
