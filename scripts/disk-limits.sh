#!/usr/bin/env bash
# disk-limits.sh — measure this machine's raw disk limits, for comparison with
# the storage benchmarks (docs/BENCHMARKS.md).
#
# Usage: scripts/disk-limits.sh [DIR]
#
# DIR (default ./data/disk-limits) must be on the file system to measure —
# the one holding the repository and the broker's data. The script works in a
# fresh temporary directory under DIR and removes it afterwards. It needs
# about 1.1 GiB free. It prints a markdown table:
#
#   - dd, 1 GiB sequential, bs=1M, oflag=direct     (bypasses the page cache)
#   - dd, 1 GiB sequential, bs=1M, conv=fdatasync   (page cache, one sync)
#   - dd, 2000 × 4 KiB, oflag=dsync                 (one durable write each)
#   - dd, 2000 × 64 KiB, oflag=dsync                (one group-commit flush each)
#   - fio, if installed: 1 GiB sequential 1 MiB writes, libaio, iodepth 8,
#     direct; and 64 MiB of 4 KiB writes each followed by fsync.
set -euo pipefail
export LC_ALL=C

base=${1:-./data/disk-limits}
# Remember the outermost directory we create, to remove what we made.
created=""
d=$base
while [ ! -e "$d" ]; do created=$d; d=$(dirname -- "$d"); done
mkdir -p -- "$base"
work=$(mktemp -d "$base/run.XXXXXX")
cleanup() {
	rm -rf -- "$work"
	[ -n "$created" ] || return 0
	local d=$base
	while rmdir -- "$d" 2>/dev/null && [ "$d" != "$created" ]; do d=$(dirname -- "$d"); done
}
trap cleanup EXIT INT TERM

die() { echo "disk-limits: $*" >&2; exit 1; }
command -v dd >/dev/null || die "dd not found"

# dd_run ARGS... — runs dd, prints the elapsed seconds it reports.
dd_run() {
	local out
	out=$(dd "$@" 2>&1) || die "dd $* failed: $out"
	awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") print $(i-1) }' <<<"$out"
}

mib_s() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f MiB/s", b / 1048576 / s }'; }
per_s() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f writes/s (%.3f ms each)", n / s, s * 1000 / n }'; }

fs=$(df -hT "$work" | awk 'NR == 2 { print $1 " (" $2 ", " $3 " total, " $5 " free)" }')
echo "## Disk limits"
echo
echo "- directory: $(cd "$base" && pwd) on $fs"
echo "- host: $(uname -srm), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "| test | command | result |"
echo "|---|---|---|"

f="$work/dd.bin"
s=$(dd_run if=/dev/zero of="$f" bs=1M count=1024 oflag=direct)
echo "| sequential write, direct I/O | \`dd bs=1M count=1024 oflag=direct\` | $(mib_s $((1024 * 1048576)) "$s") |"
rm -f -- "$f"

s=$(dd_run if=/dev/zero of="$f" bs=1M count=1024 conv=fdatasync)
echo "| sequential write + fdatasync | \`dd bs=1M count=1024 conv=fdatasync\` | $(mib_s $((1024 * 1048576)) "$s") |"
rm -f -- "$f"

s=$(dd_run if=/dev/zero of="$f" bs=4k count=2000 oflag=dsync)
echo "| 4 KiB durable writes | \`dd bs=4k count=2000 oflag=dsync\` | $(per_s 2000 "$s") |"
rm -f -- "$f"

# What one group-commit flush for 64 writers of 1 KiB records costs.
s=$(dd_run if=/dev/zero of="$f" bs=64k count=2000 oflag=dsync)
echo "| 64 KiB durable writes | \`dd bs=64k count=2000 oflag=dsync\` | $(per_s 2000 "$s") |"
rm -f -- "$f"

if command -v fio >/dev/null; then
	# Terse output (v3): field 48 is the write bandwidth in KiB/s, 49 the
	# write IOPS.
	fio_run() {
		local out
		out=$(cd "$work" && fio --minimal --terse-version=3 "$@" 2>&1) || die "fio $* failed: $out"
		rm -f -- "$work"/seq* "$work"/sync4k*
		awk -F';' '$1 == "3" { printf "%.1f MiB/s, %.0f IOPS", $48 / 1024, $49 }' <<<"$out"
	}
	r=$(fio_run --name=seq --rw=write --bs=1m --size=1g --iodepth=8 --ioengine=libaio --direct=1)
	echo "| fio sequential write | \`fio --name=seq --rw=write --bs=1m --size=1g --iodepth=8 --ioengine=libaio --direct=1\` | $r |"
	r=$(fio_run --name=sync4k --rw=write --bs=4k --size=64m --fsync=1)
	echo "| fio 4 KiB write + fsync | \`fio --name=sync4k --rw=write --bs=4k --size=64m --fsync=1\` | $r |"
else
	echo "| fio | — | fio is not installed (apt-get install -y fio) |"
fi
