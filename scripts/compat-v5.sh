#!/usr/bin/env bash
# compat-v5.sh — run the compatibility suite of Apache RocketMQ's official
# RocketMQ 5 Go client (test/rocketmq-v5, a module of its own with
# github.com/apache/rocketmq-clients/golang/v5 pinned) against real Bolide
# processes: it builds bolide-nameserver, bolide-broker and bolide once,
# then runs `go test` in the test module, which starts NameServers and
# brokers on free loopback ports with temporary data directories. The
# clients speak gRPC (apache.rocketmq.v2.MessagingService) to the
# NameServer as access point and to the brokers, over TLS (the client's
# default) except in TestPlaintext.
#
# Settings (environment):
#
#   GO_TEST_FLAGS   extra `go test` flags (e.g. "-run TestSimple -v"); the
#                   script's arguments are passed on to `go test` too
#   PARALLEL        tests run at once           (default 4)
#   TIMEOUT         go test -timeout            (default 15m)
#   BOLIDE_BIN      use these binaries instead of building them
#   RMQV5_KEEP=1    keep the clusters' directories (logs, stores)
#   RMQV5_LOG       the client's log level (default info; its log is shown
#                   when the run fails)
#   RMQV5_POP_N     messages of TestPopUnderFaults (default 3000 here;
#                   make pop-faults runs 100000)
#
# -mod=mod: the test module takes Bolide from ../.. (replace), so a new
# dependency of the main module would otherwise fail it on a missing
# go.sum line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

if [[ -z ${BOLIDE_BIN:-} ]]; then
  BOLIDE_BIN=$(mktemp -d "${TMPDIR:-/tmp}/bolide-compat-v5-bin.XXXXXX")
  trap 'rm -rf "$BOLIDE_BIN"' EXIT
  echo "compat-v5: building the daemons and the CLI into $BOLIDE_BIN" >&2
  (cd "$root" && go build -o "$BOLIDE_BIN/" ./cmd/bolide-nameserver ./cmd/bolide-broker ./cmd/bolide)
fi
export BOLIDE_BIN

cd "$root/test/rocketmq-v5"
start=$(date +%s)
status=0
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test -mod=mod ./... -count=1 -timeout "${TIMEOUT:-15m}" -parallel "${PARALLEL:-4}" ${GO_TEST_FLAGS:-} "$@" || status=$?
echo "compat-v5: $(( $(date +%s) - start )) s, exit status $status" >&2
exit "$status"
