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
// The zeros must never land on appended bytes. A step claims its range
// under the append lock, and only from the first page boundary at or past
// the writer's position. An append whose bytes could reach a claimed range
// waits, before it takes an offset, until the step is over (zeroDone, on
// the append lock); it then holds the append lock to its end, so no claim
// is made under it. Everything below the writer's position is out of reach
// of every later claim, and a truncation, which moves the writer back,
// takes the segment list's write lock, which a step holds shared while it
// writes.

// zeroStep is how much one claim of zeroLoop covers.
const zeroStep = 1 << 20

// zeroClaimDelay, when set (by tests only), stretches each step of the
// logs opened meanwhile between its claim and its write, so that appenders
// run into steps in progress.
var zeroClaimDelay time.Duration

// zeroing reports whether zeros are to be written ahead of the writer.
func (o *Options) zeroing(mode WriteMode) bool {
	return o.ZeroAhead > 0 && mode == WritePwrite && o.FlushMode == FlushSync
}

// waitZeroLocked waits while a zero step claims a range that n bytes
// appended at the writer's position could reach. l.mu is held (zeroDone's
// lock); it is released while waiting, so the caller must not have taken
// an offset yet.
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
	zeros := make([]byte, zeroStep)
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.zeroReq:
		}
		for l.ctx.Err() == nil && l.zeroOnce(zeros) {
		}
	}
}

// zeroOnce claims the next step ahead of the writer and writes it; it
// returns false when there is nothing to do or zeroing failed.
func (l *Log) zeroOnce(zeros []byte) bool {
	l.mu.Lock()
	seg := l.active
	if seg == nil || l.zeroOff.Load() || l.closed.Load() {
		l.mu.Unlock()
		return false
	}
	rel := l.wpos - seg.start
	lo := max(seg.zeroed, (rel+pageSize-1)&^(pageSize-1))
	hi := min(seg.size, (rel+l.opts.ZeroAhead)&^(pageSize-1), lo+zeroStep)
	if hi <= lo {
		l.mu.Unlock()
		return false
	}
	l.zeroBusy, l.zeroFrom = true, seg.start+lo
	l.mu.Unlock()
	if l.zeroDelay > 0 {
		time.Sleep(l.zeroDelay)
	}

	err := l.writeZeros(seg, zeros[:hi-lo], lo)

	l.mu.Lock()
	l.zeroBusy = false
	if err == nil {
		seg.zeroed = max(seg.zeroed, hi)
	}
	l.zeroDone.Broadcast()
	l.mu.Unlock()
	if err != nil {
		// Only a cost: the writer's flushes record the extents themselves.
		if !l.zeroOff.Swap(true) {
			l.log.Warn("writing zeros ahead of the CommitLog writer failed; durable flushes go on without", zap.Error(err))
		}
		return false
	}
	return true
}

// writeZeros writes zeros at rel of seg and waits for their write-back,
// if seg is still part of the log (inLiveSegment).
func (l *Log) writeZeros(seg *segment, zeros []byte, rel int64) error {
	return l.inLiveSegment(seg, func() error {
		if _, err := seg.f.WriteAt(zeros, rel); err != nil {
			return fmt.Errorf("write zeros into %s at %d: %w", seg.path, rel, err)
		}
		flags := unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
		if err := unix.SyncFileRange(int(seg.f.Fd()), rel, int64(len(zeros)), flags); err != nil {
			return fmt.Errorf("write back zeros of %s at %d: %w", seg.path, rel, err)
		}
		return nil
	})
}
