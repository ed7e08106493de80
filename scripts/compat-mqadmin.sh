#!/usr/bin/env bash
# compat-mqadmin.sh — Apache RocketMQ's admin tool (mqadmin, rocketmq-tools 5.5.0 from Maven
# Central) against a Bolide cluster: resolves the tool's class path with Maven (test/mqadmin/pom.xml;
# nothing is built), then runs the Go test test/mqadmin, which starts a NameServer and a broker in
# process, stores data, runs each mqadmin command with `java -cp` and checks its output. Needs Go,
# Java 17+ and Maven 3.8+; the first run downloads the tool into ~/.m2.
#
#   scripts/compat-mqadmin.sh                  # every command
#   scripts/compat-mqadmin.sh -run 'TestMQAdmin/queryMsg'   # extra arguments go to go test
#
# Settings (environment):
#   MVN   the Maven command (default mvn)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
MVN=${MVN:-mvn}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bolide-compat-mqadmin.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "compat-mqadmin: resolving mqadmin's class path" >&2
"$MVN" -q -B -f "$root/test/mqadmin/pom.xml" dependency:build-classpath -Dmdep.outputFile="$tmp/classpath"
export BOLIDE_MQADMIN_CP="$tmp/classpath"

start=$(date +%s)
status=0
(cd "$root" && go test ./test/mqadmin/ -count=1 -v "$@") || status=$?
echo "compat-mqadmin: go test exited with status $status after $(( $(date +%s) - start )) s" >&2
exit "$status"
