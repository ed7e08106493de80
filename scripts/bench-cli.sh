#!/usr/bin/env bash
# bench-cli.sh — `bolide bench produce|consume` against a local cluster of
# real processes (scripts/cluster-up.sh: one NameServer, broker-a, broker-b),
# once with async flush and once with sync flush; 1 KiB messages, 1 and 16
# producers. Prints one JSON summary per run (the figures in
# docs/BENCHMARKS.md come from here). Usage: scripts/bench-cli.sh [count]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
count=${1:-50000}
bolide=bin/bolide
for flush in async sync; do
  dir=$(mktemp -d "${TMPDIR:-/tmp}/bolide-bench.XXXXXX")
  export CLUSTER_DIR=$dir FLUSH=$flush
  scripts/cluster-up.sh >/dev/null
  trap 'scripts/cluster-down.sh >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
  $bolide topic create bench --queues 8 >/dev/null
  for producers in 1 16; do
    n=$count
    [ "$producers" = 1 ] && n=$((count / 5))
    echo "flush=$flush producers=$producers: $($bolide bench produce --topic bench --count "$n" --producers "$producers" --size 1024 -o json)"
  done
  echo "flush=$flush producers=16 batch=32: $($bolide bench produce --topic bench --count "$((count * 4))" --producers 16 --batch 32 --size 1024 -o json)"
  echo "flush=$flush consume: $($bolide bench consume --topic bench --count "$count" -o json)"
  scripts/cluster-down.sh >/dev/null
  rm -rf "$dir"
  trap - EXIT
done
