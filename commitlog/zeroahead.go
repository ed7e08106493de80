package commitlog

import (
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Zeros ahead of a durable writer.
//
// A segment is preallocated, so its extents are unwritten: the file system
// records that the blocks hold nothing yet. When appended bytes reach the
// disk in such an extent, the file system must also record that the part
// is written now, so each fdatasync after appends into a new part of the
// file writes the extent tree besides the data. In sync flush mode (with
// pwrite) that is on every acknowledgement's path: on this project's
// reference machine a 16 KiB pwrite and fdatasync took 0.23 ms in a
// preallocated file and 0.16 ms in one written with zeros beforehand.
//
// So zeroLoop writes zeros into the active segment ahead of the writer, up
// to Options.ZeroAhead bytes ahead, in steps of zeroStep bytes, and waits
// for each step's write-back (sync_file_range), which turns the extent
// into a written one; the writer's next fdatasync records that once for the
// step rather than once per flush.
//
// In mmap write mode zeros serve another end: populate (mmapwrite.go)
// writes them, without waiting for their write-back, into the whole pages
// it is about to make writable ahead of the writer. Making a page present
// and writable that is not in the page cache first reads it (for an
// unwritten extent, a zero-fill) and then marks it for writing, two faults;
// after a pwrite of zeros has put it in the cache it is one, and the two
// steps together cost about half the CPU per page (docs/BENCHMARKS.md).
// These zeros are claimed the same way, from populateZeroGap past the
// writer on.
//
// The zeros must never land on appended bytes. A step claims its range
// under the append lock, and only from the first page boundary at or past
// the writer's position. An append whose bytes could reach a claimed range
// waits, before it takes an offset, until the step is over (zeroDone, on
// the append lock); it then holds the append lock to its end, so no claim
// is made under it. Everything below the writer's position is out of reach
// of every later claim, and a truncation, which moves the writer back,
// takes the segment list's write lock, which a step holds shared while it
// writes.

// zeroStep is how much one claim of zeroLoop covers, and how much of its
// claim populate writes with one pwrite.
const zeroStep = 1 << 20

// zeroBuf is what every zero step writes from. It is never written, so it
// stays in the executable's zero-filled data and costs no memory: reading
// its pages maps the kernel's shared zero page.
var zeroBuf [zeroStep]byte

// populateZeroGap is how far past the writer populate's zeros start at
// the least, so that an append rarely waits for them: only when it stores
// this much while they are being written (a few milliseconds at most).
// The pages in the gap are populated without zeros. A log takes the value
// when it opens; tests set 0, so that appenders run into claims.
var populateZeroGap int64 = PopulateAhead / 4

// zeroClaimDelay, when set (by tests only), stretches each step of the
// logs opened meanwhile between its claim and its write, so that appenders
// run into steps in progress.
var zeroClaimDelay time.Duration

// zeroing reports whether zeros are to be written ahead of a durable
// writer (zeroLoop).
func (o *Options) zeroing(mode WriteMode) bool {
	return o.ZeroAhead > 0 && mode == WritePwrite && o.FlushMode == FlushSync
}

// zeroingPopulated reports whether mmap write mode writes zeros into the
// pages it makes writable ahead of the writer before it does
// (mmapwrite.go); ZeroAhead 0 turns that off too.
func (o *Options) zeroingPopulated(mode WriteMode) bool {
	return o.ZeroAhead > 0 && mode == WriteMmap
}

// waitZeroLocked waits while a zero step claims a range that n bytes
// appended at the writer's position could reach (never with zeroing off:
// no step runs). l.mu is held (zeroDone's lock); it is released while
// waiting, so the caller must not have taken an offset yet.
func (l *Log) waitZeroLocked(n int64) {
	for l.zeroBusy && l.wpos+n > l.zeroFrom {
		l.zeroDone.Wait()
	}
}

// askZeroLocked wakes zeroLoop when the writer, now at rel in seg, is within
// half of ZeroAhead of the zeros written before it. l.mu is held.
func (l *Log) askZeroLocked(seg *segment, rel int64) {
	if seg.zeroed-rel < l.opts.ZeroAhead/2 && seg.zeroed < seg.size && !l.zeroOff.Load() {
		signal(l.zeroReq)
	}
}

// zeroLoop writes zeros ahead of the writer whenever asked, until the log
// closes.
func (l *Log) zeroLoop() {
	defer l.wg.Done()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.zeroReq:
		}
		for l.ctx.Err() == nil && l.zeroOnce() {
		}
	}
}

// zeroOnce claims the next step ahead of the writer and writes it; it
// returns false when there is nothing to do or zeroing failed.
func (l *Log) zeroOnce() bool {
	l.mu.Lock()
	seg := l.active
	if seg == nil {
		l.mu.Unlock()
		return false
	}
	lo, hi, ok := l.claimZerosLocked(seg, 0, l.wpos-seg.start+l.opts.ZeroAhead, zeroStep)
	l.mu.Unlock()
	if !ok {
		return false
	}
	if l.zeroDelay > 0 {
		time.Sleep(l.zeroDelay)
	}
	err := l.writeZeros(seg, lo, hi)
	l.endZeroClaim(seg, hi, err)
	if err != nil {
		// Only a cost: the writer's flushes record the extents themselves.
		l.zeroingFailed(err, "durable flushes go on without")
		return false
	}
	return true
}

// claimZerosLocked claims for a zero step the whole pages of seg from the
// first page boundary at least gap bytes past the writer and past what is
// zeroed already, up to hi and at most most bytes (offsets relative to
// seg). ok is false, and nothing claimed, when nothing is left to claim,
// seg is not the active segment or zeroing is off. l.mu is held.
func (l *Log) claimZerosLocked(seg *segment, gap, hi, most int64) (lo, end int64, ok bool) {
	if seg != l.active || l.zeroOff.Load() || l.closed.Load() {
		return 0, 0, false
	}
	rel := l.wpos - seg.start + gap
	lo = max(seg.zeroed, (rel+pageSize-1)&^(pageSize-1))
	end = min(seg.size, hi&^(pageSize-1), lo+most)
	if end <= lo {
		return 0, 0, false
	}
	l.zeroBusy, l.zeroFrom = true, seg.start+lo
	return lo, end, true
}

// endZeroClaim ends the claim of a zero step over seg up to end, which is
// zeroed now unless err says otherwise, and wakes the appenders waiting
// for it.
func (l *Log) endZeroClaim(seg *segment, end int64, err error) {
	l.mu.Lock()
	l.zeroBusy = false
	if err == nil {
		seg.zeroed = max(seg.zeroed, end)
	}
	l.zeroDone.Broadcast()
	l.mu.Unlock()
}

// zeroingFailed turns zeroing off for good after a failed zero step,
// logging it once: zeros are only ever a saving, never needed.
func (l *Log) zeroingFailed(err error, without string) {
	if !l.zeroOff.Swap(true) {
		l.log.Warn("writing zeros ahead of the CommitLog writer failed; "+without, zap.Error(err))
	}
}

// pwriteZeros writes zeros into [lo, hi) of seg, zeroStep bytes at a
// time.
func pwriteZeros(seg *segment, lo, hi int64) error {
	for lo < hi {
		n := min(hi-lo, zeroStep)
		if _, err := seg.f.WriteAt(zeroBuf[:n], lo); err != nil {
			return fmt.Errorf("write zeros into %s at %d: %w", seg.path, lo, err)
		}
		lo += n
	}
	return nil
}

// writeZeros writes zeros into [lo, hi) of seg and waits for their
// write-back, if seg is still part of the log (inLiveSegment).
func (l *Log) writeZeros(seg *segment, lo, hi int64) error {
	return l.inLiveSegment(seg, func() error {
		if err := pwriteZeros(seg, lo, hi); err != nil {
			return err
		}
		flags := unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
		if err := unix.SyncFileRange(int(seg.f.Fd()), lo, hi-lo, flags); err != nil {
			return fmt.Errorf("write back zeros of %s at %d: %w", seg.path, lo, err)
		}
		return nil
	})
}
