#!/usr/bin/env bash
# cluster-down.sh — stop the local cluster scripts/cluster-up.sh started:
# SIGTERM to the brokers (they unregister and flush), wait, then to the
# NameServers, wait, and report each daemon's exit status. A daemon still
# running after STOP_TIMEOUT seconds gets SIGKILL. Data and logs stay.
#
#   CLUSTER_DIR    the cluster's directory (default ./data/cluster)
#   STOP_TIMEOUT   seconds to wait for each group of daemons (default 40)
#
# Exits 0 when every daemon exited 0 (or none was running), 1 otherwise.
set -euo pipefail

CLUSTER_DIR=${CLUSTER_DIR:-./data/cluster}
STOP_TIMEOUT=${STOP_TIMEOUT:-40}

say() { echo "cluster-down: $*"; }

if [[ ! -d $CLUSTER_DIR ]]; then
  say "nothing to stop: no directory $CLUSTER_DIR"
  exit 0
fi

status=0
stopped=0

# stop_group PIDFILE... sends SIGTERM to each running daemon, then waits
# for all of them and reports how each ended.
stop_group() {
  local names=() pids=()
  local f name pid
  for f in "$@"; do
    [[ -e $f ]] || continue
    name=$(basename "$f" .pid)
    pid=$(cat "$f" 2>/dev/null || true)
    if [[ -z $pid ]] || ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$f"
      continue
    fi
    kill -TERM "$pid" 2>/dev/null || true
    names+=("$name")
    pids+=("$pid")
  done
  local i base deadline=$((SECONDS + STOP_TIMEOUT))
  for i in "${!names[@]}"; do
    name=${names[$i]} pid=${pids[$i]} base=$CLUSTER_DIR/${names[$i]}
    while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      say "$name (pid $pid) did not stop within ${STOP_TIMEOUT}s: killed"
      status=1
    else
      # The wrapper shell writes the status right after the daemon ends.
      local t=0
      while [[ ! -s $base.exit ]] && (( t < 40 )); do
        sleep 0.05
        t=$((t + 1))
      done
      if [[ -s $base.exit ]]; then
        local code
        code=$(cat "$base.exit")
        say "$name (pid $pid) exited with status $code"
        [[ $code == 0 ]] || status=1
      else
        say "$name (pid $pid) exited (status unknown)"
      fi
    fi
    rm -f "$base.pid"
    stopped=$((stopped + 1))
  done
}

shopt -s nullglob
stop_group "$CLUSTER_DIR"/broker-*.pid
stop_group "$CLUSTER_DIR"/namesrv-*.pid
if (( stopped == 0 )); then
  say "nothing was running in $CLUSTER_DIR"
fi
exit "$status"
