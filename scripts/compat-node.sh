#!/usr/bin/env bash
# compat-node.sh — RocketMQ 5's official Node.js client (rocketmq-client-nodejs 1.0.8, from the npm
# registry) against a real Bolide cluster over the RocketMQ 5 gRPC protocol (plaintext, the Node.js
# client's default): builds the Go binaries, installs the locked dependencies (npm ci) and runs
# test/rocketmq-nodejs with node's built-in test runner. Each test file starts a NameServer and a
# broker of its own on free loopback ports (lib/cluster.js) and stops them at the end. Needs Go,
# Node.js 20+ and npm.
#
#   scripts/compat-node.sh                                  # every test
#   scripts/compat-node.sh --test-name-pattern='FIFO'       # extra arguments go to node --test
#
# Settings (environment):
#   BOLIDE_BIN        use these prebuilt binaries instead of building (a directory)
#   BOLIDE_RUN_GAPS   1: also run the tests skipped for a missing server piece (lib/gaps.json)
#   BOLIDE_V5_ACCESS  broker: the clients' access point is the broker's port, not the NameServer's
#   BOLIDE_KEEP       keep each cluster's data directory
# Logs: test/rocketmq-nodejs/logs (the daemons' and the clients' logs, one set per test file).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/test/rocketmq-nodejs"

if [[ -n ${BOLIDE_BIN:-} ]]; then
  bin=$(cd "$BOLIDE_BIN" && pwd)
else
  bin=$(mktemp -d "${TMPDIR:-/tmp}/bolide-compat-node.XXXXXX")
  trap 'rm -rf "$bin"' EXIT
  echo "compat-node: building the binaries into $bin" >&2
  (cd "$root" && go build -o "$bin/" ./cmd/...)
fi

cd "$dir"
npm ci --no-audit --no-fund --loglevel=error
rm -rf logs

# One test file at a time (each runs its own cluster); force the exit once the files are done
# (a client that failed to start may leave a timer behind). Both flags are newer than Node 18.
flags=()
node_version=$(node -p 'process.versions.node')
IFS=. read -r major minor _ <<<"$node_version"
if (( major > 20 || (major == 20 && minor >= 10) )); then flags+=(--test-concurrency=1); fi
if (( major > 20 || (major == 20 && minor >= 14) )); then flags+=(--test-force-exit); fi
echo "compat-node: node $node_version, npm $(npm --version)" >&2

start=$(date +%s)
status=0
BOLIDE_BIN="$bin" node --test "${flags[@]}" "$@" test/ || status=$?
echo "compat-node: node --test exited with status $status after $(( $(date +%s) - start )) s" >&2
exit "$status"
