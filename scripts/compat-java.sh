#!/usr/bin/env bash
# compat-java.sh — Apache RocketMQ's Java client (rocketmq-client 5.5.0, from Maven Central)
# against a real Bolide cluster: builds the Go binaries, then runs the Maven module
# test/rocketmq-java, whose tests start a NameServer and a broker of their own on free loopback
# ports (see BolideCluster.java) and stop them at the end. Needs Go, Java 17+ and Maven 3.8+;
# the first run downloads the client and JUnit into ~/.m2.
#
#   scripts/compat-java.sh                      # every test
#   scripts/compat-java.sh -Dtest=ProducerTest  # extra arguments go to mvn
#
# Settings (environment):
#   BOLIDE_BIN   use these prebuilt binaries instead of building (a directory)
#   MVN          the Maven command (default mvn)
# Logs: test/rocketmq-java/target/bolide-logs (the daemons), target/rocketmq-client-logs (the
# client), target/surefire-reports (the tests).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
MVN=${MVN:-mvn}

if [[ -n ${BOLIDE_BIN:-} ]]; then
  bin=$(cd "$BOLIDE_BIN" && pwd)
else
  bin=$(mktemp -d "${TMPDIR:-/tmp}/bolide-compat-java.XXXXXX")
  trap 'rm -rf "$bin"' EXIT
  echo "compat-java: building the binaries into $bin" >&2
  (cd "$root" && go build -o "$bin/" ./cmd/...)
fi

start=$(date +%s)
status=0
"$MVN" -q -B -f "$root/test/rocketmq-java/pom.xml" test -DbolideBin="$bin" "$@" || status=$?
echo "compat-java: mvn test exited with status $status after $(( $(date +%s) - start )) s" >&2
exit "$status"
