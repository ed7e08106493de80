#!/usr/bin/env bash
# compat-go.sh — run the compatibility suite of Apache RocketMQ's Go client
# (test/rocketmq-go, a module of its own with the client pinned) against
# real Bolide processes: it builds bolide-nameserver and bolide-broker once,
# then runs `go test` in the test module, which starts NameServers and
# brokers on free loopback ports with temporary data directories.
#
# Settings (environment):
#
#   GO_TEST_FLAGS   extra `go test` flags (e.g. "-run TestMixed -v"); the
#                   script's arguments are passed on to `go test` too
#   PARALLEL        tests run at once           (default 6; most of them wait)
#   TIMEOUT         go test -timeout            (default 15m)
#   BOLIDE_BIN      use these binaries instead of building them
#   RMQGO_KEEP=1    keep the clusters' directories (logs, stores)
#   RMQGO_LOG       the RocketMQ client's log level (default warn; its log is shown
#                   when the run fails)
#   RMQGO_MIXED_N   messages of each mixed-group run (default 20000)
#
# -mod=mod: the test module takes the SDK from ../.. (replace), so a new
# dependency of the main module would otherwise fail it on a missing go.sum
# line.
#
# Not with -race: rocketmq-client-go has data races of its own (its pull
# consumer, its consumer shutdown), which fail the tests that use it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

if [[ -z ${BOLIDE_BIN:-} ]]; then
  BOLIDE_BIN=$(mktemp -d "${TMPDIR:-/tmp}/bolide-compat-go-bin.XXXXXX")
  trap 'rm -rf "$BOLIDE_BIN"' EXIT
  echo "compat-go: building the daemons into $BOLIDE_BIN" >&2
  (cd "$root" && go build -o "$BOLIDE_BIN/" ./cmd/bolide-nameserver ./cmd/bolide-broker)
fi
export BOLIDE_BIN

cd "$root/test/rocketmq-go"
start=$(date +%s)
status=0
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test -mod=mod ./... -count=1 -timeout "${TIMEOUT:-15m}" -parallel "${PARALLEL:-6}" ${GO_TEST_FLAGS:-} "$@" || status=$?
echo "compat-go: $(( $(date +%s) - start )) s, exit status $status" >&2
exit "$status"
