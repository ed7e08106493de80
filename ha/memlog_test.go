package ha

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/bolide-mq/bolide/message"
)

// memLog is an in-memory segmented log with the CommitLog's record and
// blank layout, playing both the master's Source and the slave's
// ReplicaLog in these tests.
type memLog struct {
	mu      sync.Mutex
	segSize int64
	segs    map[int64][]byte
	min     int64
	end     int64
	last    RecordRef
	lastOK  bool
	sig     notifier
	// durable, when set, blocks WaitDurable until it is closed.
	durable chan struct{}
	appends int // AppendRaw calls
}

func newMemLog(segSize int64) *memLog {
	return &memLog{segSize: segSize, segs: make(map[int64][]byte)}
}

var host = netip.MustParseAddrPort("127.0.0.1:10911")

func (l *memLog) segLocked(off int64) []byte {
	start := off - off%l.segSize
	s := l.segs[start]
	if s == nil {
		s = make([]byte, l.segSize)
		l.segs[start] = s
	}
	return s
}

// append stores a record with a body of n bytes of b, ending the segment
// with a blank when it does not fit; it returns the record's end.
func (l *memLog) append(n int, b byte) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := &message.Ext{Message: message.Message{Topic: "t", Body: bytes.Repeat([]byte{b}, n)}, BornHost: host, StoreHost: host}
	rec, err := message.Encode(nil, e)
	if err != nil {
		panic(err)
	}
	left := l.segSize - l.end%l.segSize
	if int64(len(rec))+message.BlankSize > left {
		message.EncodeBlank(l.segLocked(l.end)[l.end%l.segSize:], int32(left))
		l.end += left
	}
	ts := time.Now().UnixMilli()
	message.Stamp(rec, 0, l.end, ts)
	copy(l.segLocked(l.end)[l.end%l.segSize:], rec)
	crc, _ := message.RecordChecksum(rec)
	l.last = RecordRef{Offset: l.end, Size: int32(len(rec)), Checksum: crc, StoreTimestamp: ts}
	l.lastOK = true
	l.end += int64(len(rec))
	l.sig.notify()
	return l.end
}

// clone returns a copy of the log.
func (l *memLog) clone() *memLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := newMemLog(l.segSize)
	for k, v := range l.segs {
		c.segs[k] = bytes.Clone(v)
	}
	c.min, c.end, c.last, c.lastOK = l.min, l.end, l.last, l.lastOK
	return c
}

// dropBefore forgets whole segments below off (retention).
func (l *memLog) dropBefore(off int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.segs {
		if s+l.segSize <= off {
			delete(l.segs, s)
		}
	}
	l.min = off - off%l.segSize
}

func (l *memLog) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []byte
	for s := l.min; s < l.end; s += l.segSize {
		out = append(out, l.segs[s][:min(l.segSize, l.end-s)]...)
	}
	return out
}

func (l *memLog) MinOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.min
}

func (l *memLog) CommittedOffset() int64 { return l.MaxOffset() }

func (l *memLog) CommittedChanged() <-chan struct{} { return l.sig.c() }

func (l *memLog) SegmentSize() int64 { return l.segSize }

func (l *memLog) MaxOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

func (l *memLog) LastStoreTimestamp() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last.StoreTimestamp
}

func (l *memLog) ReadChunk(off int64, max int, dst []byte) ([]byte, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off >= l.end {
		return dst, off, nil
	}
	if off < l.min {
		return dst, off, fmt.Errorf("offset %d below min %d", off, l.min)
	}
	seg := l.segLocked(off)
	base := off - off%l.segSize
	limit := min(l.end, base+l.segSize)
	p := off
	for p < limit {
		h, _ := message.PeekHeader(seg[p-base:])
		if h.IsBlank() {
			if p == off {
				return append(dst, seg[p-base:p-base+8]...), base + l.segSize, nil
			}
			break
		}
		if p > off && p+int64(h.TotalSize)-off > int64(max) {
			break
		}
		p += int64(h.TotalSize)
	}
	return append(dst, seg[off-base:p-base]...), p, nil
}

func (l *memLog) RecordAt(off int64) (RecordRef, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off < l.min || off+8 > l.end {
		return RecordRef{}, fmt.Errorf("offset %d out of range", off)
	}
	seg := l.segLocked(off)
	rel := off % l.segSize
	h, _ := message.PeekHeader(seg[rel:])
	if h.IsBlank() {
		return RecordRef{Offset: off, Blank: true, Size: h.TotalSize}, nil
	}
	if !h.IsRecord() || rel+int64(h.TotalSize) > l.segSize {
		return RecordRef{}, fmt.Errorf("no record at %d", off)
	}
	rec := seg[rel : rel+int64(h.TotalSize)]
	crc, ok := message.RecordChecksum(rec)
	if !ok {
		return RecordRef{}, fmt.Errorf("no trailer at %d", off)
	}
	return RecordRef{Offset: off, Size: h.TotalSize, Checksum: crc}, nil
}

func (l *memLog) LastRecord() (RecordRef, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last, l.lastOK, nil
}

func (l *memLog) StartAt(off int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.end != l.min || l.lastOK || off%l.segSize != 0 {
		return fmt.Errorf("cannot start at %d", off)
	}
	l.min, l.end = off, off
	return nil
}

func (l *memLog) AppendRaw(off int64, data []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.appends++
	if off != l.end {
		return l.end, fmt.Errorf("append at %d, log ends at %d", off, l.end)
	}
	for p := 0; p < len(data); {
		h, _ := message.PeekHeader(data[p:])
		seg := l.segLocked(l.end)
		rel := l.end % l.segSize
		if h.IsBlank() {
			if int64(h.TotalSize) != l.segSize-rel {
				return l.end, fmt.Errorf("bad blank at %d", l.end)
			}
			copy(seg[rel:], data[p:p+8])
			l.end += int64(h.TotalSize)
			p += 8
			continue
		}
		rec := data[p : p+int(h.TotalSize)]
		if err := message.Verify(rec); err != nil {
			return l.end, err
		}
		if phys := int64(binary.BigEndian.Uint64(rec[message.PosPhysicalOffset:])); phys != l.end {
			return l.end, fmt.Errorf("record at %d says %d", l.end, phys)
		}
		copy(seg[rel:], rec)
		crc, _ := message.RecordChecksum(rec)
		l.last = RecordRef{Offset: l.end, Size: h.TotalSize, Checksum: crc}
		l.lastOK = true
		l.end += int64(len(rec))
		p += len(rec)
	}
	l.sig.notify()
	return l.end, nil
}

func (l *memLog) DurableOnAppend() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable == nil
}

func (l *memLog) WaitDurable(ctx context.Context, _ int64) error {
	l.mu.Lock()
	ch := l.durable
	l.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// truncate cuts the log at off, which must be a record or segment
// boundary at or above its minimum offset, zeroing what follows.
func (l *memLog) truncate(off int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off < l.min || off > l.end {
		return fmt.Errorf("truncate at %d, log holds %d..%d", off, l.min, l.end)
	}
	var last RecordRef
	lastOK := false
	for p := l.min; p < off; {
		seg := l.segLocked(p)
		rel := p % l.segSize
		h, _ := message.PeekHeader(seg[rel:])
		if h.IsBlank() {
			p += l.segSize - rel
			continue
		}
		if !h.IsRecord() || h.TotalSize <= 0 {
			return fmt.Errorf("no record at %d", p)
		}
		rec := seg[rel : rel+int64(h.TotalSize)]
		crc, _ := message.RecordChecksum(rec)
		last, lastOK = RecordRef{Offset: p, Size: h.TotalSize, Checksum: crc}, true
		p += int64(h.TotalSize)
		if p > off {
			return fmt.Errorf("truncate at %d, inside the record at %d", off, last.Offset)
		}
	}
	for s, b := range l.segs {
		switch {
		case s >= off:
			delete(l.segs, s)
		case s+l.segSize > off:
			clear(b[off-s:])
		}
	}
	l.end, l.last, l.lastOK = off, last, lastOK
	l.sig.notify()
	return nil
}
