package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Read-ahead for readers that go through the log in order (a consumer
// catching up on a backlog, a slave catching up on its master): see
// Prefetch. Without it a cold read faults its pages in one fault at a
// time, and a goroutine blocked in a page fault keeps its P, so a broker
// whose readers fault waits on the disk with its cores idle.

const (
	// DefaultReadAhead is how far ahead of a reader Prefetch keeps the
	// kernel reading when Options.ReadAhead is 0.
	DefaultReadAhead = 16 << 20
	// raWindows is how many independent readers (positions in the log)
	// the read-ahead follows; the least recently used one is forgotten.
	raWindows = 16
	// raQueue is how many read-ahead requests may wait for the worker; a
	// request that does not fit is dropped (it is a hint).
	raQueue = 64
	// raMinChunk is the most one fadvise(WILLNEED) call asks for when the
	// device's limits are unknown. The kernel reads at most
	// max(read_ahead_kb, max_sectors_kb) per call (force_page_cache_ra),
	// never less than 128 KiB on a default set-up, so a longer range is
	// asked for in pieces.
	raMinChunk = 128 << 10
	// raMaxChunk bounds one call however large the device's limits.
	raMaxChunk = 8 << 20
)

// raChunkFor returns how much one fadvise(WILLNEED) call may ask for on
// the device holding dir: max(read_ahead_kb, max_sectors_kb) of its
// request queue (/sys/dev/block/MAJ:MIN/queue, or the whole disk's for a
// partition), between raMinChunk and raMaxChunk; raMinChunk when it
// cannot tell (tmpfs, overlay file systems and the like).
func raChunkFor(dir string) int64 {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return raMinChunk
	}
	dev := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	var kb int64
	for _, q := range []string{dev + "/queue", dev + "/../queue"} {
		for _, f := range []string{"read_ahead_kb", "max_sectors_kb"} {
			b, err := os.ReadFile(filepath.Join(q, f))
			if err != nil {
				continue
			}
			if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
				kb = max(kb, v)
			}
		}
		if kb > 0 {
			break
		}
	}
	return min(max(kb<<10, raMinChunk), raMaxChunk)
}

// raWindow is one reader's read-ahead: the kernel has been asked for the
// log's bytes up to next.
type raWindow struct {
	next int64
	used uint64 // raState.clock at the last use; 0: free
}

// raReq asks the worker for [from, to).
type raReq struct{ from, to int64 }

// raState follows readers' positions; mu guards wins and clock.
type raState struct {
	size  int64 // bytes kept ahead; 0: off
	chunk int64 // bytes per fadvise call (raChunkFor)
	mu    sync.Mutex
	wins  [raWindows]raWindow
	clock uint64
	reqs  chan raReq
	// advised, if set (by tests, before the first Prefetch), is called by
	// the worker after each request.
	advised func(from, to int64)
}

func (o *Options) readAhead() int64 {
	switch {
	case o.ReadAhead < 0:
		return 0
	case o.ReadAhead == 0:
		return DefaultReadAhead
	}
	return o.ReadAhead
}

// Prefetch tells the log that a reader is about to read the records in
// [from, to) and will probably go on past to. When those bytes or the
// ReadAhead bytes after them have not been asked for yet, a background
// worker asks the kernel to read them into the page cache (posix_fadvise
// WILLNEED, as much per call as the device's read-ahead allows): the
// reader then finds its pages in memory instead of waiting on one page
// fault after another.
//
// It costs no system call on the reader's side, and none at all while the
// reader stays inside what was already asked for: the log remembers, for
// up to 16 reading positions, how far ahead it has asked, and a reader
// ReadAhead/4 past the last request makes the next. Nothing past Readable
// is asked for, so a reader at the tail of the log (its pages are in
// memory) costs nothing after its first request.
func (l *Log) Prefetch(from, to int64) {
	ra := &l.ra
	if ra.size == 0 || l.closed.Load() {
		return
	}
	readable := l.Readable()
	if from < 0 || from >= readable {
		return
	}
	to = max(to, from)
	want := min(to+ra.size, readable)
	ra.mu.Lock()
	ra.clock++
	w := ra.find(from)
	start := from
	if w != nil {
		start = max(w.next, from)
		if want-start < ra.size/4 { // not worth a request yet
			w.next = start // the reader is past what was asked for
			w.used = ra.clock
			ra.mu.Unlock()
			return
		}
	} else {
		w = ra.lru()
	}
	if start >= want {
		w.next = max(w.next, want)
		w.used = ra.clock
		ra.mu.Unlock()
		return
	}
	select {
	case ra.reqs <- raReq{start, want}:
		w.next = want
		w.used = ra.clock
	default: // the worker is behind: leave the window for a later call
		if w.used == 0 {
			w.next = from
			w.used = ra.clock
		}
	}
	ra.mu.Unlock()
}

// find returns the window a reader at off continues: one that asked for
// bytes up to at most ReadAhead past off, and not more than 4×ReadAhead
// before it (readers of one backlog through several queues read the log
// in one region together, some a little behind the others). ra.mu is
// held.
func (ra *raState) find(off int64) *raWindow {
	var best *raWindow
	for i := range ra.wins {
		w := &ra.wins[i]
		if w.used == 0 || off > w.next+ra.size || off < w.next-4*ra.size {
			continue
		}
		if best == nil || w.next > best.next {
			best = w
		}
	}
	return best
}

// lru returns a free window, or the least recently used one, emptied.
// ra.mu is held.
func (ra *raState) lru() *raWindow {
	w := &ra.wins[0]
	for i := range ra.wins {
		if ra.wins[i].used < w.used {
			w = &ra.wins[i]
		}
	}
	*w = raWindow{}
	return w
}

// readAheadLoop asks the kernel for the ranges Prefetch queued, until the
// log closes.
func (l *Log) readAheadLoop() {
	defer l.wg.Done()
	for {
		select {
		case <-l.ctx.Done():
			return
		case r := <-l.ra.reqs:
			l.willNeed(r.from, r.to)
			if l.ra.advised != nil {
				l.ra.advised(r.from, r.to)
			}
		}
	}
}

// willNeed asks the kernel to read [from, to) of the log into the page
// cache, ra.chunk at a time. Each call holds segMu's read lock (so the file
// stays open) but not the whole pass: a call may wait for room in the
// disk's request queue, and a segment roll waits for segMu. Bytes of a
// segment removed meanwhile are skipped; errors are only logged (the hint
// is advisory).
func (l *Log) willNeed(from, to int64) {
	for off := from; off < to && l.ctx.Err() == nil; {
		next, err := l.willNeedChunk(off, to)
		if err != nil {
			l.log.Debug("read-ahead failed", zap.Int64("offset", off), zap.Error(err))
			return
		}
		off = next
	}
}

// willNeedChunk asks for up to ra.chunk bytes from off (not past to or the
// end of off's segment) and returns where the next chunk starts.
func (l *Log) willNeedChunk(off, to int64) (int64, error) {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	seg := l.segmentFor(off)
	if seg == nil {
		if len(l.segs) == 0 || off >= l.segs[len(l.segs)-1].end() {
			return to, nil
		}
		return max(off+1, l.segs[0].start), nil // below the oldest segment
	}
	end := min(to, seg.end(), off+l.ra.chunk)
	if err := seg.willNeed(off-seg.start, end-off); err != nil {
		return to, err
	}
	return end, nil
}
