#!/usr/bin/env bash
# cluster-up.sh — start a local Bolide cluster of real processes on loopback:
# NameServers and two broker groups (broker-a, broker-b, one master each),
# with every file under one directory:
#
#   $CLUSTER_DIR/namesrv-<port>.{log,pid,addr,exit}
#   $CLUSTER_DIR/broker-a/            the broker's store
#   $CLUSTER_DIR/broker-a.{log,pid,addr,exit}
#
# It returns once every daemon serves (its --addr-file exists) and every
# NameServer lists both brokers (polled with `bin/bolide cluster list`).
# scripts/cluster-down.sh stops the cluster. Settings (environment):
#
#   CLUSTER_DIR     data, logs and pids        (default ./data/cluster)
#   NAMESRV_PORTS   NameServer ports, 1 or 2   (default "9876"; e.g. "9876 9886")
#   BROKER_A_PORT   broker-a's port            (default 10911)
#   BROKER_B_PORT   broker-b's port            (default 10921)
#   CLUSTER_NAME    cluster name               (default DefaultCluster)
#   FLUSH           sync or async              (default async)
#   SEGMENT_SIZE    CommitLog segment bytes    (default 67108864 = 64 MiB, not
#                   the broker's 1 GiB; a store made with another size keeps it)
#   BIN             directory of the binaries  (default ./bin; run `make build` first)
#   UP_TIMEOUT      seconds to wait for it all (default 30)
#
# Security (docs/security.md), all off unless set:
#
#   TLS_MODE        --tls-mode of every daemon: off, permissive (the daemons'
#                   default) or enforcing (TLS only; the daemons dial each
#                   other with TLS, and this script's own bolide calls use
#                   it: BOLIDE_TLS=1)
#   NAMESRV_TLS_MODE  override TLS_MODE for the NameServers or the brokers
#   BROKER_TLS_MODE   alone
#   TLS_CERT        PEM certificate and key of every daemon (--tls-cert,
#   TLS_KEY         --tls-key; default: each makes a self-signed one)
#   TLS_CA          PEM CA that signed TLS_CERT: the daemons verify each other
#                   with it (--tls-ca) and so does bolide (BOLIDE_TLS_CA)
#   ACL_FILE        turns ACL on (--acl) with this plain_acl.yml (create it
#                   with bolide acl init): it seeds each daemon's own file,
#                   copied when the daemon has none yet (a broker's is
#                   <store>/config/plain_acl.yml, a NameServer's
#                   $CLUSTER_DIR/namesrv-<port>.acl.yml); bolide acl user
#                   put/delete change them all
#   ACCESS_KEY      an admin user of ACL_FILE: the daemons sign their calls to
#   SECRET_KEY      each other with it (--access-key, and the secret key in
#                   BOLIDE_{NAMESRV,BROKER}_SECRET_KEY), and so does bolide
#                   (BOLIDE_ACCESS_KEY, BOLIDE_SECRET_KEY)
#   GOSSIP_KEY      base64 AES key encrypting gossip (--gossip-key)
#
# Gossip ports are derived: NameServer port + 1, broker port + 3.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BIN=${BIN:-$root/bin}
CLUSTER_DIR=${CLUSTER_DIR:-./data/cluster}
NAMESRV_PORTS=${NAMESRV_PORTS:-9876}
BROKER_A_PORT=${BROKER_A_PORT:-10911}
BROKER_B_PORT=${BROKER_B_PORT:-10921}
CLUSTER_NAME=${CLUSTER_NAME:-DefaultCluster}
FLUSH=${FLUSH:-async}
SEGMENT_SIZE=${SEGMENT_SIZE:-}
UP_TIMEOUT=${UP_TIMEOUT:-30}
TLS_MODE=${TLS_MODE:-}
NAMESRV_TLS_MODE=${NAMESRV_TLS_MODE:-$TLS_MODE}
BROKER_TLS_MODE=${BROKER_TLS_MODE:-$TLS_MODE}
TLS_CERT=${TLS_CERT:-}
TLS_KEY=${TLS_KEY:-}
TLS_CA=${TLS_CA:-}
ACL_FILE=${ACL_FILE:-}
ACCESS_KEY=${ACCESS_KEY:-}
SECRET_KEY=${SECRET_KEY:-}
GOSSIP_KEY=${GOSSIP_KEY:-}

say() { echo "cluster-up: $*"; }
die() { echo "cluster-up: $*" >&2; exit 1; }

for b in bolide-nameserver bolide-broker bolide; do
  [[ -x $BIN/$b ]] || die "$BIN/$b is missing: run 'make build' first"
done
read -r -a ns_ports <<<"$NAMESRV_PORTS"
(( ${#ns_ports[@]} >= 1 && ${#ns_ports[@]} <= 2 )) || die "NAMESRV_PORTS must name 1 or 2 ports, not '$NAMESRV_PORTS'"

if [[ -n $TLS_CERT && -z $TLS_KEY || -z $TLS_CERT && -n $TLS_KEY ]]; then
  die "TLS_CERT and TLS_KEY go together: set both or neither"
fi
if [[ -n $ACCESS_KEY && -z $SECRET_KEY || -z $ACCESS_KEY && -n $SECRET_KEY ]]; then
  die "ACCESS_KEY and SECRET_KEY go together: set both or neither"
fi
if [[ -n $ACL_FILE && -z $ACCESS_KEY ]]; then
  die "ACL_FILE needs ACCESS_KEY and SECRET_KEY of an admin user (the daemons call each other with it)"
fi
[[ -z $ACL_FILE || -f $ACL_FILE ]] || die "ACL_FILE $ACL_FILE does not exist (create it with: bolide acl init --file $ACL_FILE ...)"

# sec: the security flags every daemon gets (and its --tls-mode).
sec=()
[[ -n $TLS_CERT ]] && sec+=(--tls-cert "$TLS_CERT" --tls-key "$TLS_KEY")
[[ -n $TLS_CA ]] && sec+=(--tls-ca "$TLS_CA")
[[ -n $ACL_FILE ]] && sec+=(--acl)
[[ -n $ACCESS_KEY ]] && sec+=(--access-key "$ACCESS_KEY")
# The secret key goes through the daemons' environment, not their command
# lines (which ps shows to everyone).
if [[ -n $SECRET_KEY ]]; then
  export BOLIDE_NAMESRV_SECRET_KEY=$SECRET_KEY BOLIDE_BROKER_SECRET_KEY=$SECRET_KEY
fi
[[ -n $GOSSIP_KEY ]] && sec+=(--gossip-key "$GOSSIP_KEY")

# cli_env: what this script's bolide calls need to reach the daemons.
cli_env=()
if [[ $NAMESRV_TLS_MODE == enforcing || $BROKER_TLS_MODE == enforcing ]]; then
  cli_env+=(BOLIDE_TLS=1)
  [[ -n $TLS_CA ]] && cli_env+=("BOLIDE_TLS_CA=$TLS_CA")
fi
[[ -n $ACCESS_KEY ]] && cli_env+=("BOLIDE_ACCESS_KEY=$ACCESS_KEY" "BOLIDE_SECRET_KEY=$SECRET_KEY")

mkdir -p "$CLUSTER_DIR"
CLUSTER_DIR=$(cd "$CLUSTER_DIR" && pwd)

# acl_file PATH sets acl to the --acl-file arguments of a daemon whose own
# file is PATH, seeding it from ACL_FILE if it does not exist (none when
# ACL is off).
acl_file() {
  acl=()
  [[ -n $ACL_FILE ]] || return 0
  if [[ ! -e $1 ]]; then
    mkdir -p "$(dirname "$1")"
    (umask 077 && cp "$ACL_FILE" "$1")
  fi
  acl=(--acl-file "$1")
}

# Refuse to start over a running cluster.
for pidfile in "$CLUSTER_DIR"/*.pid; do
  [[ -e $pidfile ]] || continue
  pid=$(cat "$pidfile" 2>/dev/null || true)
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    die "a cluster is already running in $CLUSTER_DIR ($(basename "$pidfile" .pid) is pid $pid): run scripts/cluster-down.sh first"
  fi
done

started=()   # names of the daemons started, for the cleanup on failure

# cleanup stops what this run started when a later step fails.
cleanup() {
  local status=$?
  if (( status != 0 )) && (( ${#started[@]} > 0 )); then
    echo "cluster-up: failed; stopping what was started" >&2
    CLUSTER_DIR=$CLUSTER_DIR "$here/cluster-down.sh" >&2 || true
  fi
}
trap cleanup EXIT

# start NAME BINARY ARGS... runs a daemon in its own session, in the
# background, through a small wrapper shell that records the daemon's pid
# and, once it ends, its exit status (cluster-down reports it).
start() {
  local name=$1; shift
  local base=$CLUSTER_DIR/$name
  rm -f "$base.addr" "$base.exit" "$base.pid"
  setsid bash -c '
    base=$1; shift
    "$@" --addr-file "$base.addr" >>"$base.log" 2>&1 &
    pid=$!
    echo "$pid" >"$base.pid"
    wait "$pid"
    echo $? >"$base.exit"
  ' wrapper "$base" "$@" </dev/null >/dev/null 2>&1 &
  started+=("$name")
}

# wait_served NAME waits for the daemon's address file; if the daemon
# exits first its log's tail is shown.
wait_served() {
  local name=$1 base=$CLUSTER_DIR/$1
  local deadline=$((SECONDS + UP_TIMEOUT))
  while [[ ! -s $base.addr ]]; do
    if [[ -e $base.exit ]]; then
      echo "cluster-up: $name exited with status $(cat "$base.exit") before serving; last lines of $base.log:" >&2
      tail -n 15 "$base.log" >&2 || true
      return 1
    fi
    (( SECONDS < deadline )) || { echo "cluster-up: $name did not serve within ${UP_TIMEOUT}s (see $base.log)" >&2; return 1; }
    sleep 0.05
  done
  say "$name serves on $(cat "$base.addr") (pid $(cat "$base.pid"))"
}

# segment_size STORE_DIR prints the CommitLog segment size for a broker:
# SEGMENT_SIZE if set, else that of the store's existing segments (a store
# cannot be opened with another size), else 64 MiB.
segment_size() {
  if [[ -n $SEGMENT_SIZE ]]; then echo "$SEGMENT_SIZE"; return; fi
  local seg
  for seg in "$1"/store/commitlog/[0-9]*; do
    [[ -f $seg ]] && { stat -c %s "$seg"; return; }
  done
  echo 67108864
}

namesrvs=()
seed=""
for port in "${ns_ports[@]}"; do
  args=(--listen "127.0.0.1:$port")
  [[ -n $NAMESRV_TLS_MODE ]] && args+=(--tls-mode "$NAMESRV_TLS_MODE")
  acl_file "$CLUSTER_DIR/namesrv-$port.acl.yml"
  args+=(${acl[@]+"${acl[@]}"})
  [[ -n $seed ]] && args+=(--gossip-seeds "$seed")
  start "namesrv-$port" "$BIN/bolide-nameserver" "${args[@]}" ${sec[@]+"${sec[@]}"}
  namesrvs+=("127.0.0.1:$port")
  [[ -n $seed ]] || seed="127.0.0.1:$((port + 1))"
done
for port in "${ns_ports[@]}"; do
  wait_served "namesrv-$port"
done
namesrv_list=$(IFS=';'; echo "${namesrvs[*]}")

brokers=(broker-a broker-b)
broker_ports=("$BROKER_A_PORT" "$BROKER_B_PORT")
broker_tls=()
[[ -n $BROKER_TLS_MODE ]] && broker_tls=(--tls-mode "$BROKER_TLS_MODE")
for i in 0 1; do
  name=${brokers[$i]}
  acl_file "$CLUSTER_DIR/$name/config/plain_acl.yml"
  start "$name" "$BIN/bolide-broker" ${broker_tls[@]+"${broker_tls[@]}"} ${acl[@]+"${acl[@]}"} --namesrv "$namesrv_list" --listen "127.0.0.1:${broker_ports[$i]}" \
    --store-dir "$CLUSTER_DIR/$name" --broker-name "$name" --broker-id 0 --cluster "$CLUSTER_NAME" \
    --flush "$FLUSH" --segment-size "$(segment_size "$CLUSTER_DIR/$name")" ${sec[@]+"${sec[@]}"}
done
for name in "${brokers[@]}"; do
  wait_served "$name"
done

# Every NameServer must list both brokers.
deadline=$((SECONDS + UP_TIMEOUT))
for ns in "${namesrvs[@]}"; do
  while :; do
    out=$(env ${cli_env[@]+"${cli_env[@]}"} "$BIN/bolide" cluster list --namesrv "$ns" --timeout 2s -o json 2>/dev/null || true)
    n=0
    for name in "${brokers[@]}"; do
      grep -q "\"broker\":\"$name\"" <<<"$out" && n=$((n + 1))
    done
    (( n == ${#brokers[@]} )) && break
    (( SECONDS < deadline )) || die "NameServer $ns does not list ${brokers[*]} after ${UP_TIMEOUT}s (see $CLUSTER_DIR/*.log)"
    sleep 0.1
  done
done

trap - EXIT
say "cluster $CLUSTER_NAME is up: NameServer(s) $namesrv_list; brokers ${brokers[*]} on ports ${broker_ports[*]}"
say "data, logs and pids in $CLUSTER_DIR; stop it with scripts/cluster-down.sh"
say "export BOLIDE_NAMESRV='$namesrv_list'   # for bin/bolide"
for kv in ${cli_env[@]+"${cli_env[@]}"}; do
  case $kv in
    BOLIDE_SECRET_KEY=*) say "export BOLIDE_SECRET_KEY=...   # the secret key of $ACCESS_KEY" ;;
    *) say "export ${kv%%=*}='${kv#*=}'" ;;
  esac
done
