#!/usr/bin/env bash
# failover-demo.sh — automatic failover on loopback, with real processes:
# three NameServers with embedded controllers (a Raft group of three) and
# three brokers of one group (broker-a, replica ids 1, 2, 3, sync
# replication). It sends messages, shows `bolide controller status` and
# `bolide cluster list`, kills the master with SIGKILL, times how long until
# a send is acknowledged again (by the new master), shows the status again,
# restarts the old master (it rejoins as a slave) and shows it once more.
# Everything it started is stopped at the end (KEEP=1 leaves it running).
#
#   DEMO_DIR      data, logs and pids          (default: a new directory under ./data)
#   NAMESRV_BASE  first NameServer port        (default 19876; then +10, +20)
#   BROKER_BASE   first broker port            (default 20911; then +10, +20)
#   REPLICATION   sync or async                (default sync)
#   BIN           directory of the binaries    (default ./bin; run `make build` first)
#   KEEP          1: leave the cluster running (stop it: kill the pids in DEMO_DIR/*.pid)
#
# Ports per NameServer P: P (gRPC, remoting and the controller service),
# P+2 admin, P+3 controller Raft (gossip is off). Per broker B: B, B+1 HA,
# B+2 admin.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BIN=${BIN:-$root/bin}
NAMESRV_BASE=${NAMESRV_BASE:-19876}
BROKER_BASE=${BROKER_BASE:-20911}
REPLICATION=${REPLICATION:-sync}
KEEP=${KEEP:-0}
mkdir -p "$root/data"
DEMO_DIR=${DEMO_DIR:-$(mktemp -d "$root/data/failover-demo.XXXXXX")}
mkdir -p "$DEMO_DIR"
DEMO_DIR=$(cd "$DEMO_DIR" && pwd)

say() { printf '\n== %s\n' "$*"; }
die() { echo "failover-demo: $*" >&2; exit 1; }

for b in bolide-nameserver bolide-broker bolide; do
  [[ -x $BIN/$b ]] || die "$BIN/$b is missing: run 'make build' first"
done

pids=()
stop_all() {
  local status=$?
  if [[ $KEEP == 1 && $status == 0 ]]; then
    echo "failover-demo: left running; data, logs and pids in $DEMO_DIR"
    return
  fi
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  (( status == 0 )) || echo "failover-demo: failed; logs in $DEMO_DIR" >&2
}
trap stop_all EXIT

# start NAME BINARY ARGS... runs a daemon in the background, its output in
# NAME.log, its pid in NAME.pid.
start() {
  local name=$1; shift
  rm -f "$DEMO_DIR/$name.addr"
  "$@" --addr-file "$DEMO_DIR/$name.addr" >>"$DEMO_DIR/$name.log" 2>&1 &
  pids+=("$!")
  echo "$!" >"$DEMO_DIR/$name.pid"
}

wait_served() {
  local deadline=$((SECONDS + 30))
  until [[ -s $DEMO_DIR/$1.addr ]]; do
    (( SECONDS < deadline )) || { tail -n 20 "$DEMO_DIR/$1.log" >&2; die "$1 did not start"; }
    sleep 0.05
  done
}

ns=() peers=()
for i in 0 1 2; do
  p=$((NAMESRV_BASE + 10 * i))
  ns+=("127.0.0.1:$p")
  peers+=("n$i=127.0.0.1:$((p + 3))")
done
ns_list=$(IFS=,; echo "${ns[*]}")
peer_list=$(IFS=,; echo "${peers[*]}")
export BOLIDE_NAMESRV=$ns_list
bolide() { "$BIN/bolide" "$@"; }

say "starting 3 NameServers with controllers ($peer_list)"
for i in 0 1 2; do
  p=$((NAMESRV_BASE + 10 * i))
  start "namesrv-n$i" "$BIN/bolide-nameserver" --listen "127.0.0.1:$p" --gossip off \
    --controller --controller-id "n$i" --controller-peers "$peer_list" \
    --controller-dir "$DEMO_DIR/controller-n$i"
done
for i in 0 1 2; do wait_served "namesrv-n$i"; done

broker_args() { # replica id
  local port=$((BROKER_BASE + 10 * ($1 - 1)))
  echo --namesrv "$ns_list" --controller-addr "$ns_list" --listen "127.0.0.1:$port" \
    --store-dir "$DEMO_DIR/broker-a-$1" --broker-name broker-a --broker-id "$1" --gossip off \
    --replication "$REPLICATION" --in-sync-replicas 1 --segment-size 67108864
}
say "starting 3 brokers of broker-a (replica ids 1, 2, 3; $REPLICATION replication)"
for id in 1 2 3; do
  # shellcheck disable=SC2046
  start "broker-a-$id" "$BIN/bolide-broker" $(broker_args "$id")
done
for id in 1 2 3; do wait_served "broker-a-$id"; done

# status_json prints the controllers' view (one JSON line); master_id the
# master's replica id, sss_size the size of broker-a's sync state set.
status_json() { bolide controller status -o json --timeout 2s 2>/dev/null || true; }
master_id() { status_json | grep -o '"masterId":[0-9]*' | head -1 | cut -d: -f2; }
sss_size() {
  local s
  s=$(status_json | grep -o '"syncStateSet":\[[0-9,]*\]' | head -1 | sed 's/.*\[//; s/\]//')
  if [[ -z $s ]]; then echo 0; else echo $(( $(tr -cd ',' <<<"$s" | wc -c) + 1 )); fi
}

deadline=$((SECONDS + 60))
until [[ -n $(master_id) && $(master_id) != 0 && $(sss_size) -ge 2 ]]; do
  (( SECONDS < deadline )) || { bolide controller status || true; die "no master with a sync state set of 2 or more after 60 s"; }
  sleep 0.2
done
until bolide topic create demo --queues 4 >/dev/null 2>&1; do
  (( SECONDS < deadline )) || die "cannot create topic demo"
  sleep 0.2
done
created=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
bolide send --topic demo --count 100 'before {{Count}}' >/dev/null
# Slaves take the master's topics every --metadata-sync-interval (3 s):
# wait until each has synced since the topic was made, so that whichever
# is elected serves it.
for id in 1 2 3; do
  [[ $id == "$(master_id)" ]] && continue
  addr=127.0.0.1:$((BROKER_BASE + 10 * (id - 1)))
  until [[ $(bolide broker status "$addr" -o json | grep -o '"lastMetadataSync":"[^"]*"' | cut -d'"' -f4) > $created ]]; do
    (( SECONDS < deadline )) || die "replica $id did not sync the master's topics"
    sleep 0.2
  done
done

say "bolide controller status"
bolide controller status
say "bolide cluster list"
bolide cluster list

old=$(master_id)
say "killing the master, replica $old (SIGKILL), and sending until a send is acknowledged"
pid=$(cat "$DEMO_DIR/broker-a-$old.pid")
{ kill -9 "$pid"; wait "$pid"; } 2>/dev/null || true
t0=$(date +%s%N)
until err=$(bolide send --topic demo --timeout 1s 'after the kill' 2>&1 >/dev/null); do
  (( ($(date +%s%N) - t0) / 1000000000 < 60 )) || die "no acknowledged send within 60 s of the kill; the last: $err"
  sleep 0.05
done
t1=$(date +%s%N)
echo "first acknowledged send $(( (t1 - t0) / 1000000 )) ms after the kill (the CLI is a new process per send: a fresh route each time)"

say "bolide controller status (after the failover)"
bolide controller status

say "restarting the old master, replica $old: it rejoins as a slave"
# shellcheck disable=SC2046
start "broker-a-$old" "$BIN/bolide-broker" $(broker_args "$old")
wait_served "broker-a-$old"
deadline=$((SECONDS + 30))
until status_json | grep -q "\"id\":$old,[^}]*\"alive\":true,\"role\":\"SLAVE\"[^}]*\"inSync\":true"; do
  (( SECONDS < deadline )) || { echo "(replica $old has not rejoined the sync state set within 30 s)"; break; }
  sleep 0.2
done
bolide controller status
say "bolide cluster list"
bolide cluster list
