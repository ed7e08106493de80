#!/usr/bin/env bash
# compat-java5.sh — RocketMQ 5's official Java client (org.apache.rocketmq:rocketmq-client-java
# 5.2.0, from Maven Central) against a real Bolide cluster over the RocketMQ 5 gRPC protocol (TLS,
# the Java client's default, and plaintext): builds the Go binaries, then runs the Maven module
# test/rocketmq-java5, whose test classes start a NameServer and a broker of their own on free
# loopback ports (BolideCluster.java) and stop them at the end. Needs Go, Java 17+ and Maven 3.8+;
# the first run downloads the client and JUnit into ~/.m2.
#
#   scripts/compat-java5.sh                          # every test
#   scripts/compat-java5.sh -Dtest=ProducerTest      # extra arguments go to mvn
#
# Settings (environment):
#   BOLIDE_BIN        use these prebuilt binaries instead of building (a directory)
#   BOLIDE_RUN_GAPS   1: also run the tests skipped for a missing server piece
#                     (src/test/resources/gaps.properties)
#   BOLIDE_V5_ACCESS  broker: the clients' access point is the broker's port, not the NameServer's
#   MVN               the Maven command (default mvn)
# Logs: test/rocketmq-java5/target/bolide-logs (the daemons), target/rocketmq-client-logs (the
# client), target/surefire-reports (the tests).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
MVN=${MVN:-mvn}

if [[ -n ${BOLIDE_BIN:-} ]]; then
  bin=$(cd "$BOLIDE_BIN" && pwd)
else
  bin=$(mktemp -d "${TMPDIR:-/tmp}/bolide-compat-java5.XXXXXX")
  trap 'rm -rf "$bin"' EXIT
  echo "compat-java5: building the binaries into $bin" >&2
  (cd "$root" && go build -o "$bin/" ./cmd/...)
fi

start=$(date +%s)
status=0
"$MVN" -q -B -f "$root/test/rocketmq-java5/pom.xml" test -DbolideBin="$bin" "$@" || status=$?
echo "compat-java5: mvn test exited with status $status after $(( $(date +%s) - start )) s" >&2
exit "$status"
