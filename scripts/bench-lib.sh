# bench-lib.sh — shared by the benchmark scripts. The scripts that compare
# client paths on one broker (bench-remoting.sh, bench-v5.sh, ...) source it
# after setting
#   root      the repository root
#   work      a working directory (logs, binaries in $work/bin)
#   DATA_DIR  the broker's store (wiped at start and at exit)
#   FLUSH     the broker's flush mode
# The side-by-side comparisons (bench-vs-nats.sh, bench-vs-rocketmq.sh) leave
# $work unset and use only the CPU and memory helpers at the end.
# It defines:
#   bench_build [module-dir cmd]...  build the daemons and the CLI into $bin
#                                    (as `make release` does: bench_go_build),
#                                    and each named command of a test module
#   bench_start [broker flags]...    start a NameServer and one broker on free
#                                    loopback ports ($ns, $broker_pid), stopped
#                                    at exit
#   bench_topic TOPIC [queues]       create a topic and wait for its route
#   cpu                              the broker's utime + stime in clock ticks
#   ticks                            clock ticks per second
#   measure NAME REP CMD...          run CMD (printing msgs/s) between two cpu
#                                    readings: appends to cpus[NAME] (broker
#                                    CPU µs per message of $MSGS) and
#                                    rates[NAME]; sets last_rate
#   median                           the median of the numbers on stdin
# and, for any script:
#   bench_go_build OUT PKG...        go build PKG... into directory OUT the way
#                                    `make release` builds the shipped
#                                    binaries: static (CGO_ENABLED=0),
#                                    -trimpath, stripped (-ldflags "-s -w"),
#                                    the Makefile's BUILD_TAGS (grpcnotrace
#                                    unless set), the version of the tree
#                                    in the current directory embedded; under
#                                    `timeout $BUILD_TIMEOUT` when that is
#                                    set. So what a benchmark
#                                    measures (memory above all: the
#                                    executable's pages are most of an idle
#                                    daemon's VmRSS) is what users run
#   bench_port                       a free loopback TCP port
#   proc_ticks PID...                CPU of the processes (utime + stime +
#                                    cutime + cstime, clock ticks), summed;
#                                    0 for a process that is gone
#   child_ticks                      CPU of this shell's waited-for children
#                                    and their descendants (cutime + cstime
#                                    of $$): read before and after a client
#                                    run in the foreground, the difference is
#                                    the client's CPU
#   per_million TICKS MSGS           CPU seconds per million messages
#   rss_kib PID                      the process's VmRSS in KiB
#   status_kib PID FIELD             a field of /proc/PID/status in KiB
#                                    (VmRSS, RssAnon, RssFile, ...); 0 for a
#                                    process that is gone
#   seconds D                        the seconds of a Go duration like
#                                    30s, 1m30s or 500ms
#   jnum FILE KEY                    the first number under "KEY" in the
#                                    JSON of FILE (- : stdin); a key that
#                                    also appears further on (p99 of an e2e
#                                    run's latencyMs, then ackLatencyMs)
#                                    yields its first occurrence
#   jobjnum FILE OBJECT KEY          the number under KEY inside the first
#                                    object named OBJECT
#   settle PID...                    before a timed step of a side-by-side
#                                    run: `sync`, then wait until the
#                                    processes together use at most
#                                    SETTLE_PCT % of one CPU (20) over a
#                                    second, at most SETTLE_MAX seconds (20),
#                                    so that what one system does after its
#                                    previous step (a collection, a flush, a
#                                    dispatch catching up) does not run in
#                                    the other's timed step; then
#                                    warm_memory; prints the seconds waited,
#                                    the busiest process's share of the
#                                    last second and the MiB warmed
#   warm_memory                      touch and free WARM_MIB MiB (2048, at
#                                    most a quarter of MemAvailable; 0:
#                                    none) just before a timed step, so that
#                                    the step's new page-cache pages are
#                                    ones the hypervisor has not taken back
#                                    (docs/BENCHMARKS.md, "first touch")
#   settle_note                      the table's sentence on those waits
#   inodes_freed                     record that a store of many files (tens
#                                    of thousands of queues) was just deleted
#                                    (in $root/.bench/inodes-freed)
#   inodes_age [SECS]                wait until SECS (INODE_AGE, 360; 0: do
#                                    not wait) have passed since the last
#                                    inodes_freed. ext4 does not hand out an
#                                    inode freed in the last 60 s (360 s while
#                                    its inode-table block is dirty, as the
#                                    next allocations in it make it); on a
#                                    file system without a journal it checks
#                                    each such free inode it passes, one
#                                    buffer lookup apiece, so making 80 000
#                                    queues' directories and files right after
#                                    deleting as many spends most of the
#                                    broker's time in that check
#                                    (docs/BENCHMARKS.md, "2026-12-05,
#                                    morning")
#   wait_file FILE PID NAME [SECS]   wait until daemon NAME (PID) has written
#                                    FILE (its address), at most SECS (60);
#                                    calls the script's die if it exits or
#                                    takes longer ($res: where its log is)
if [[ -n ${work:-} ]]; then
	bin=$work/bin
	mkdir -p "$bin"
fi

# inodes_freed and inodes_age: see the list at the top.
inodes_freed() {
	mkdir -p "$root/.bench"
	date +%s >"$root/.bench/inodes-freed"
}
inodes_age() {
	local age=${1:-${INODE_AGE:-360}} mark=$root/.bench/inodes-freed left
	[[ -f $mark ]] && ((age > 0)) || return 0
	left=$(($(cat "$mark") + age - $(date +%s)))
	((left > 0)) || return 0
	echo "waiting ${left}s for the inodes of a store deleted $((age - left))s ago to age (INODE_AGE=$age; 0: do not wait)" >&2
	sleep "$left"
}

# The build tags of bench_go_build: the Makefile's default unless set.
BUILD_TAGS=${BUILD_TAGS-grpcnotrace}

# The flags of the Makefile's release target (keep the two in step).
bench_go_build() {
	local out=$1 version
	shift
	version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
	local limit=()
	if [[ -n ${BUILD_TIMEOUT:-} ]]; then limit=(timeout -k 10 "$BUILD_TIMEOUT"); fi
	CGO_ENABLED=0 "${limit[@]}" go build -trimpath -tags "$BUILD_TAGS" \
		-ldflags "-s -w -X github.com/bolide-mq/bolide/cmd/internal/daemon.Version=$version" \
		-o "$out/" "$@"
}

bench_build() {
	echo "building binaries" >&2
	(cd "$root" && bench_go_build "$bin" ./cmd/...)
	while (($# >= 2)); do
		(cd "$root/$1" && go build -o "$bin/" "$2")
		shift 2
	done
}

bench_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

bench_pids=()
bench_cleanup() {
	for p in "${bench_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$DATA_DIR"
}

bench_start() {
	local ns_port br_port
	ns_port=$(bench_port)
	br_port=$(bench_port)
	ns=127.0.0.1:$ns_port
	rm -rf "$DATA_DIR"
	mkdir -p "$DATA_DIR"
	trap bench_cleanup EXIT
	"$bin/bolide-nameserver" --listen "$ns" --gossip off --admin-listen off >"$work/namesrv.log" 2>&1 &
	bench_pids+=($!)
	"$bin/bolide-broker" --namesrv "$ns" --listen "127.0.0.1:$br_port" --store-dir "$DATA_DIR" --gossip off \
		--admin-listen off --flush "$FLUSH" --register-interval 2s "$@" >"$work/broker.log" 2>&1 &
	broker_pid=$!
	bench_pids+=("$broker_pid")
}

bench_topic() {
	for _ in $(seq 100); do
		if "$bin/bolide" -n "$ns" topic create "$1" --queues "${2:-8}" >/dev/null 2>&1; then break; fi
		sleep 0.2
	done
	sleep 3 # the route reaches the NameServer with the next registration
}

ticks=$(getconf CLK_TCK)
SETTLE_PCT=${SETTLE_PCT:-20} SETTLE_MAX=${SETTLE_MAX:-20}
WARM_MIB=${WARM_MIB:-2048}
cpu() { awk '{print $14 + $15}' "/proc/$broker_pid/stat"; }

declare -A cpus rates
measure() { # name rep command...
	local name=$1 rep=$2 before after r
	shift 2
	sync
	before=$(cpu)
	r=$("$@")
	after=$(cpu)
	cpus[$name]+="$(python3 -c "print(f'{($after-$before)/$ticks/$MSGS*1e6:.1f}')") "
	rates[$name]+="$r "
	echo "$name run $rep: $(python3 -c "print(f'{($after-$before)/$ticks:.2f}')") broker CPU s for $MSGS msgs, $r msgs/s" >&2
	last_rate=$r
}

jnum() { grep -o "\"$2\":[-0-9.eE+]*" "$1" | head -n 1 | cut -d: -f2; }
jobjnum() { grep -o "\"$2\":{[^}]*}" "$1" | head -n 1 | grep -o "\"$3\":[-0-9.eE+]*" | cut -d: -f2; }

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# /proc/PID/stat's second field (the command) may hold spaces: the fields are
# counted after its closing parenthesis, where utime is the 12th.
proc_ticks() {
	local p t=0 v
	for p in "$@"; do
		v=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13 + $14 + $15}') || v=0
		t=$((t + ${v:-0}))
	done
	echo "$t"
}
child_ticks() { sed 's/^.*) //' "/proc/$$/stat" | awk '{print $14 + $15}'; }
settle() {
	local waited=0 p d busy top
	local -A before
	sync
	while :; do
		for p in "$@"; do before[$p]=$(proc_ticks "$p"); done
		sleep 1
		waited=$((waited + 1))
		busy=0 top=0
		for p in "$@"; do
			d=$(($(proc_ticks "$p") - ${before[$p]}))
			busy=$((busy + d))
			((d > top)) && top=$d
		done
		# ticks in one second, as a percentage of one CPU: busy * 100 / ticks.
		if ((busy * 100 <= SETTLE_PCT * ticks || waited >= SETTLE_MAX)); then break; fi
	done
	local warmed
	warmed=$(warm_memory)
	echo "waited=${waited}s busy=$((busy * 100 / ticks))% top=$((top * 100 / ticks))% warmed=${warmed}MiB"
}

# warm_memory writes WARM_MIB MiB of zeros into a file in /dev/shm
# (tmpfs: memory) and removes it, and prints the MiB it wrote. On a
# virtual machine that reports free pages to its host (virtio-balloon's
# free page reporting), memory left free for a few seconds goes back to
# the host, and the next first touch of each of its pages waits for the
# host to supply it again: on this project's machine 1.5 s a GiB against
# 0.4 s for a page freed a moment ago. A step that writes a gigabyte of new
# data into the page cache then runs slower or faster depending on whether
# someone freed memory just before it (NATS purges its stream at the start
# of each `nats bench`; a fresh Bolide broker frees nothing until its
# CommitLog cache window is full). Pages freed here head the free lists for
# the next step, both systems alike.
warm_memory() {
	local mib=$WARM_MIB avail
	avail=$(awk '/^MemAvailable:/ {print int($2 / 1024 / 4)}' /proc/meminfo 2>/dev/null) || avail=0
	((mib > ${avail:-0})) && mib=${avail:-0}
	if ((mib > 0)) && [[ -d /dev/shm ]]; then
		dd if=/dev/zero of=/dev/shm/bolide-bench-warm bs=1M count="$mib" status=none 2>/dev/null || mib=0
		rm -f /dev/shm/bolide-bench-warm
	fi
	echo "$mib"
}
per_million() { awk -v t="$1" -v n="$2" -v hz="$ticks" 'BEGIN { if (n > 0) printf "%.2f\n", t / hz / n * 1e6 }'; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
status_kib() {
	local v
	v=$(awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status" 2>/dev/null) || v=
	echo "${v:-0}"
}

# The side-by-side scripts' report helpers. Each figure of a run is a line
# appended to $res/fig-KEY.

# fig_stat KEY prints "median min max" of KEY's figures (nothing if none).
fig_stat() {
  [[ -s $res/fig-$1 ]] || return 0
  sort -g "$res/fig-$1" | awk '{v[NR] = $1} END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%s %s %s\n", m, v[1], v[NR] }'
}

# grp N prints N with its digits in groups of three ("1 000 000").
grp() { sed -e :a -e 's/\([0-9]\)\([0-9]\{3\}\)\($\| \)/\1 \2\3/; ta' <<<"$1"; }

# table_awk: awk functions for the rows of the side-by-side tables, put
# before a row's program. up(v) rounds v up to hundredths, so that a
# shortfall never reads smaller than it is; group(x) writes x with its
# digits in groups of three; cell(st) writes fig_stat's "median min max" as
# "median (min–max)", the median alone when the awk variable reps is 1.
table_awk='
function up(v,   c) { c = int(v * 100); if (c < v * 100) c++; return c / 100 }
function group(x,   s, r) {
  s = sprintf("%.0f", x); r = ""
  while (length(s) > 3) { r = " " substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
  return s r
}
function cell(st,   f) {
  if (st == "") return "failed"
  split(st, f, " ")
  if (reps > 1) return group(f[1]) " (" group(f[2]) "–" group(f[3]) ")"
  return group(f[1])
}
'

# cpucell KEY prints KEY's median server and client CPU seconds per million
# messages as "server + client" (– if none).
cpucell() {
  local s c
  s=$(fig_stat "$1-cpusrv" | cut -d' ' -f1)
  c=$(fig_stat "$1-cpucli" | cut -d' ' -f1)
  if [[ -z $s ]]; then echo "–"; else printf '%.1f + %.1f\n' "$s" "${c:-0}"; fi
}

# settle_note prints the table's sentence on the waits before the steps
# (from the $res/*.settle files that settle's output went to).
settle_note() {
  local -a w
  mapfile -t w < <(sed -n 's/^waited=\([0-9]*\)s.*/\1/p' "$res"/*.settle 2>/dev/null | sort -n)
  ((${#w[@]} > 0)) || return 0
  local at_max=0 x
  for x in "${w[@]}"; do ((x >= $SETTLE_MAX)) && at_max=$((at_max + 1)); done
  local warmed
  warmed=$(sed -n 's/.*warmed=\([0-9]*\)MiB.*/\1/p' "$res"/*.settle 2>/dev/null | sort -n |
    awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR) print (lo == hi ? lo : lo "–" hi)}')
  echo "Before each step: \`sync\`, then a wait until the daemons of both systems together used at most $SETTLE_PCT % of one CPU" \
    "over a second (median wait ${w[$(((${#w[@]} - 1) / 2))]} s; $at_max of ${#w[@]} steps stopped waiting at the $SETTLE_MAX s limit)," \
    "then ${warmed:-0} MiB of memory touched and freed, so that the step's new pages are not ones the hypervisor took back (warm_memory in scripts/bench-lib.sh)."
}

wait_file() {
	local file=$1 pid=$2 name=$3 limit=${4:-60}
	local deadline=$((SECONDS + limit))
	while [[ ! -s $file ]]; do
		kill -0 "$pid" 2>/dev/null || die "$name exited before serving${res:+; see its log in $res}"
		((SECONDS < deadline)) || die "$name did not start within ${limit}s${res:+; see its log in $res}"
		sleep 0.05
	done
}

seconds() {
	awk -v d="$1" 'BEGIN {
		t = 0
		while (match(d, /^[0-9.]+(ms|s|m|h)/)) {
			v = substr(d, 1, RLENGTH); d = substr(d, RLENGTH + 1)
			n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
			t += (u == "ms") ? n / 1000 : (u == "s") ? n : (u == "m") ? n * 60 : n * 3600
		}
		print t
	}'
}
