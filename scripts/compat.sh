#!/usr/bin/env bash
# compat.sh runs every compatibility suite (`make compat`) in two lanes side
# by side: the suites of Apache RocketMQ's JVM clients and tools (they share
# Maven's local repository, which one build at a time should write, so they
# run one after another), and the rest (Go and Node.js clients).
#
# The suites spend most of their wall time waiting on the clients' own
# timers (rebalancing, heartbeats, retries): make compat-node used 16 CPU s
# in 91 s, make compat-mqadmin 52 in 114. Two at a time halve the wall time
# on two vCPUs without starving either.
#
# Each suite's output is printed whole when it ends, under a line naming it,
# so the two lanes never interleave. The script exits non-zero if any suite
# failed; a lane stops at its first failure, the other runs on.
#
#   bash scripts/compat.sh                 # both lanes
#   COMPAT_LANES="compat-go compat-java" bash scripts/compat.sh
#                                          # one lane per word, each one suite
set -uo pipefail
cd "$(dirname "$0")/.."

# One lane per entry; the suites of an entry run in order.
if [ -n "${COMPAT_LANES:-}" ]; then
  read -r -a lanes <<<"$COMPAT_LANES"
else
  lanes=("compat-java compat-mqadmin compat-java5" "compat-go compat-v5 compat-node")
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bolide-compat.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run_lane SUITE...: runs the suites in order and prints each one's output
# when it ends (under the lock, so outputs do not interleave).
run_lane() {
  local s log rc t0
  for s in "$@"; do
    log="$tmp/$s.log"
    t0=$SECONDS
    make --no-print-directory "$s" >"$log" 2>&1
    rc=$?
    {
      flock 9
      echo "==== $s: exit status $rc after $((SECONDS - t0)) s"
      cat "$log"
      echo "==== $s: end (exit status $rc)"
    } 9>"$tmp/print.lock"
    [ "$rc" -eq 0 ] || return "$rc"
  done
}

start=$SECONDS
for lane in "${lanes[@]}"; do
  # Each lane in its own process group, so that an interrupt stops its
  # suites and the daemons they started.
  # shellcheck disable=SC2086 # a lane is a list of words
  setsid bash -c "$(declare -f run_lane); tmp=$(printf %q "$tmp"); run_lane $lane" &
  pids+=("$!")
done

status=0
failed=()
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    status=1
    failed+=("${lanes[$i]}")
  fi
done
pids=()
echo "compat: every lane ended after $((SECONDS - start)) s"
if [ "$status" -ne 0 ]; then
  for l in "${failed[@]}"; do echo "compat: FAILED in the lane: $l" >&2; done
fi
exit "$status"
