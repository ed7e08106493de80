#!/usr/bin/env bash
# bench-security.sh — what access control and TLS cost a send: the send rate
# of `bolide bench produce` and the broker's CPU seconds per message, on one
# broker, in three modes, alternating which goes first, a fresh broker each
# run, `sync` before each measured run:
#
#   off       --tls-mode permissive (the default), ACL off, the CLI in plain
#             text: what a broker without issue 19's settings does
#   tls       --tls-mode enforcing with a certificate this script makes
#             (ECDSA P-256, signed by its own CA), ACL off, the CLI over TLS
#             (BOLIDE_TLS=1; not verified: the NameServer keeps its
#             self-signed certificate, and verification costs once per
#             connection, not per message)
#   acl+tls   --tls-mode enforcing and --acl with a file of two users: an
#             admin (creates the topic) and a producer allowed PUB on the
#             topic only, whose keys the CLI signs with (BOLIDE_ACCESS_KEY,
#             BOLIDE_SECRET_KEY)
#
# The NameServer keeps its defaults (permissive, ACL off): the broker is
# what is measured.
#
# Settings (environment):
#   MSGS        messages per run                   (200000)
#   REPS        runs of each mode                  (3)
#   PRODUCERS   concurrent producers               (16)
#   SIZE        body bytes                         (1024)
#   FLUSH       the broker's flush mode            (async)
#   MODES       modes to run                       ("off tls acl+tls")
#   OUT         copy of the table                  (.bench/bench-security.md)
#
# Usage: scripts/bench-security.sh   (or: make bench-security)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
MSGS=${MSGS:-200000}
REPS=${REPS:-3}
PRODUCERS=${PRODUCERS:-16}
SIZE=${SIZE:-1024}
FLUSH=${FLUSH:-async}
MODES=${MODES:-off tls acl+tls}
work=$root/.bench/security
DATA_DIR=${DATA_DIR:-$work/data}
OUT=${OUT:-$root/.bench/bench-security.md}
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
read -r -a modes <<<"$MODES"
for m in "${modes[@]}"; do
	case $m in off | tls | acl+tls) ;; *) echo "bench-security: unknown mode $m (off, tls, acl+tls)" >&2; exit 2 ;; esac
done
command -v openssl >/dev/null || { echo "bench-security: needs openssl (to make the test certificates)" >&2; exit 1; }
bench_build

# The certificates (a CA and a server certificate for 127.0.0.1) and the
# ACL file, outside the broker's store (bench_start wipes it).
sec=$work/sec
rm -rf "$sec"
mkdir -p "$sec"
chmod 700 "$sec"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench CA" \
	-keyout "$sec/ca-key.pem" -out "$sec/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=bench" \
	-keyout "$sec/server-key.pem" -out "$sec/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >"$sec/ext.cnf"
openssl x509 -req -in "$sec/server.csr" -CA "$sec/ca.pem" -CAkey "$sec/ca-key.pem" -CAcreateserial -days 2 \
	-extfile "$sec/ext.cnf" -out "$sec/server.pem" 2>/dev/null
admin_ak=bench-admin admin_sk=bench-admin-secret-0123456789
prod_ak=bench-producer prod_sk=bench-producer-secret-0123456789
cat >"$sec/plain_acl.yml" <<EOF
accounts:
  - accessKey: $admin_ak
    secretKey: $admin_sk
    admin: true
  - accessKey: $prod_ak
    secretKey: $prod_sk
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [bench=PUB]
EOF
chmod 600 "$sec/plain_acl.yml"
trap 'rm -rf "$sec"' EXIT

# cli_env MODE ROLE: the environment bin/bolide runs with (ROLE admin or
# producer; ACL mode only).
cli_env() {
	local mode=$1 role=$2
	env=(-u BOLIDE_TLS -u BOLIDE_TLS_CA -u BOLIDE_ACCESS_KEY -u BOLIDE_SECRET_KEY)
	[[ $mode == off ]] && return
	env+=(BOLIDE_TLS=1)
	[[ $mode == acl+tls ]] || return 0
	if [[ $role == admin ]]; then
		env+=("BOLIDE_ACCESS_KEY=$admin_ak" "BOLIDE_SECRET_KEY=$admin_sk")
	else
		env+=("BOLIDE_ACCESS_KEY=$prod_ak" "BOLIDE_SECRET_KEY=$prod_sk")
	fi
}

run_bench() { # count
	local out
	out=$(env "${env[@]}" "$bin/bolide" -n "$ns" bench produce --topic bench --count "$1" --producers "$PRODUCERS" \
		--size "$SIZE" -o json 2>"$work/bench.err" | tail -1)
	python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["errors"] == 0, d
open(sys.argv[2], "w").write(d["transport"])
print(round(d["msgsPerSec"]))' "$out" "$work/transport" ||
		{ echo "bench-security: bolide bench produce failed ($mode): $(cat "$work/bench.err") $out" >&2; exit 1; }
}

# refused MODE checks that the broker runs in MODE: a send in plain text
# is refused with TLS on, and one without credentials with ACL on.
refused() {
	local mode=$1 out
	[[ $mode == off ]] && return
	cli_env off producer
	if out=$(env "${env[@]}" "$bin/bolide" -n "$ns" send --topic bench x 2>&1); then
		echo "bench-security: a plain-text send was accepted in mode $mode: $out" >&2
		exit 1
	fi
	[[ $mode == acl+tls ]] || return 0
	cli_env tls producer
	if out=$(env "${env[@]}" "$bin/bolide" -n "$ns" send --topic bench x 2>&1); then
		echo "bench-security: a send without credentials was accepted in mode $mode: $out" >&2
		exit 1
	fi
	[[ $out == *UNAUTHENTICATED* ]] || { echo "bench-security: a send without credentials: $out" >&2; exit 1; }
}

# one MODE REP: a fresh NameServer and broker in MODE, the topic, a
# warm-up, one measured run.
one() {
	mode=$1
	local rep=$2 flags=()
	case $mode in
	off) flags=() ;;
	tls) flags=(--tls-mode enforcing --tls-cert "$sec/server.pem" --tls-key "$sec/server-key.pem") ;;
	acl+tls) flags=(--tls-mode enforcing --tls-cert "$sec/server.pem" --tls-key "$sec/server-key.pem"
		--acl --acl-file "$sec/plain_acl.yml") ;;
	esac
	bench_start ${flags[@]+"${flags[@]}"}
	trap 'bench_cleanup; rm -rf "$sec"' EXIT # bench_start set its own
	cli_env "$mode" admin
	local ok=
	for _ in $(seq 100); do
		if env "${env[@]}" "$bin/bolide" -n "$ns" topic create bench --queues 8 >/dev/null 2>"$work/topic.err"; then
			ok=1
			break
		fi
		sleep 0.2
	done
	[[ -n $ok ]] || { echo "bench-security: topic create ($mode): $(cat "$work/topic.err")" >&2; exit 1; }
	sleep 3 # the route reaches the NameServer with the next registration
	refused "$mode"
	cli_env "$mode" producer
	run_bench 20000 >/dev/null
	measure "$mode" "$rep" run_bench "$MSGS"
	for p in "${bench_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	bench_pids=()
}

n=${#modes[@]}
for rep in $(seq "$REPS"); do
	# Each rep starts with the next mode: every mode goes first in turn.
	for i in $(seq 0 $((n - 1))); do
		one "${modes[$(((rep - 1 + i) % n))]}" "$rep"
	done
done

base=${modes[0]}
base_cpu=$(echo "${cpus[$base]}" | median)
base_rate=$(echo "${rates[$base]}" | median)
{
	echo "| mode | broker CPU µs per msg (runs) | median | msgs/s (runs) | median | CPU / $base | rate / $base |"
	echo "|---|---|---|---|---|---|---|"
	for m in "${modes[@]}"; do
		c=$(echo "${cpus[$m]}" | median)
		r=$(echo "${rates[$m]}" | median)
		echo "| $m | ${cpus[$m]}| $c | ${rates[$m]}| $r | $(python3 -c "print(f'{$c/$base_cpu:.2f}')") | $(python3 -c "print(f'{$r/$base_rate:.2f}')") |"
	done
	echo
	echo "($MSGS messages of $SIZE bytes per run, $PRODUCERS producers over $(cat "$work/transport"), flush $FLUSH, $REPS runs per mode, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ))"
} | tee "$OUT"
