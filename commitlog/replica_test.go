package commitlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/message"
)

// copyAll ships everything committed in src to dst with ReadChunk and
// AppendRaw, as the replication protocol does, and returns the number of
// chunks.
func copyAll(t testing.TB, src, dst *Log, max int) int {
	t.Helper()
	n := 0
	var buf []byte
	for {
		off := dst.MaxOffset()
		chunk, next, err := src.ReadChunk(off, max, buf[:0])
		if err != nil {
			t.Fatalf("read chunk at %d: %v", off, err)
		}
		buf = chunk
		if next == off {
			return n
		}
		end, err := dst.AppendRaw(context.Background(), off, chunk)
		if err != nil {
			t.Fatalf("append raw at %d (%d bytes): %v", off, len(chunk), err)
		}
		if end != next {
			t.Fatalf("append raw at %d: log ends at %d, chunk ends at %d", off, end, next)
		}
		n++
	}
}

// sameBytes compares the segment files of two logs from the later of their
// minimum offsets up to the maximum offset (which must be equal).
func sameBytes(t testing.TB, a, b *Log) {
	t.Helper()
	if a.MaxOffset() != b.MaxOffset() {
		t.Fatalf("max offsets differ: %d and %d", a.MaxOffset(), b.MaxOffset())
	}
	from := max(a.MinOffset(), b.MinOffset())
	end := a.MaxOffset()
	segs := func(l *Log) map[int64]string {
		m := make(map[int64]string)
		for _, s := range l.Segments() {
			m[s.Start] = s.Path
		}
		return m
	}
	sa, sb := segs(a), segs(b)
	size := a.Options().SegmentSize
	for start := from - from%size; start < end; start += size {
		fa, err := os.ReadFile(sa[start])
		if err != nil {
			t.Fatal(err)
		}
		fb, err := os.ReadFile(sb[start])
		if err != nil {
			t.Fatal(err)
		}
		n := min(end-start, size)
		if !bytes.Equal(fa[:n], fb[:n]) {
			i := 0
			for fa[i] == fb[i] {
				i++
			}
			t.Fatalf("segment %d differs at byte %d (offset %d)", start, i, start+int64(i))
		}
	}
}

func TestReplicateByteIdentical(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			master := openTestLog(t, testOptions(t.TempDir(), m.flush, m.write), 0)
			// The slave runs the other write path: the bytes must not depend on it.
			slaveWrite := WriteMmap
			if m.write == WriteMmap {
				slaveWrite = WritePwrite
			}
			slaveDir := t.TempDir()
			slave := openTestLog(t, testOptions(slaveDir, m.flush, slaveWrite), 0)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, 2))
			var wg sync.WaitGroup
			var appendErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 400; i++ {
					body := bytes.Repeat([]byte{byte(i)}, rng.IntN(9000))
					if _, err := master.Append(ctx, record(t, "rep", int32(i%3), body)); err != nil {
						appendErr = err
						return
					}
				}
			}()
			// Copy while the master appends, then the rest.
			for done := false; !done; {
				ch := master.CommittedChanged()
				copyAll(t, master, slave, 16<<10)
				select {
				case <-ch:
				case <-time.After(50 * time.Millisecond):
					wg.Wait()
					done = true
				}
			}
			if appendErr != nil {
				t.Fatal(appendErr)
			}
			if err := master.Flush(); err != nil {
				t.Fatal(err)
			}
			copyAll(t, master, slave, 16<<10)
			if len(master.Segments()) < 4 {
				t.Fatalf("only %d segments: the test wants several segment ends", len(master.Segments()))
			}
			sameBytes(t, master, slave)
			ml, ok, err := master.LastRecord()
			if err != nil || !ok {
				t.Fatalf("master last record: %v %v", ok, err)
			}
			sl, ok, err := slave.LastRecord()
			if err != nil || !ok || sl != ml {
				t.Fatalf("slave last record %+v (%v %v), master %+v", sl, ok, err, ml)
			}
			if ml.StoreTimestamp == 0 || master.LastStoreTimestamp() != ml.StoreTimestamp || slave.LastStoreTimestamp() != ml.StoreTimestamp {
				t.Fatalf("store timestamps: last record %d, master %d, slave %d", ml.StoreTimestamp, master.LastStoreTimestamp(), slave.LastStoreTimestamp())
			}
			// The replicated log recovers as a log of its own.
			end := slave.MaxOffset()
			if err := slave.Close(); err != nil {
				t.Fatal(err)
			}
			re := openTestLog(t, testOptions(slaveDir, m.flush, slaveWrite), 0)
			if re.MaxOffset() != end || re.Recovery().Torn {
				t.Fatalf("reopened slave ends at %d (torn %v %s), want %d", re.MaxOffset(), re.Recovery().Torn, re.Recovery().TornReason, end)
			}
			if rl, ok, err := re.LastRecord(); err != nil || !ok || rl != ml {
				t.Fatalf("reopened slave last record %+v (%v %v), want %+v", rl, ok, err, ml)
			}
			sameBytes(t, master, re)
		})
	}
}

func TestReadChunk(t *testing.T) {
	o := testOptions(t.TempDir(), FlushAsync, WritePwrite)
	l := openTestLog(t, o, 0)
	ctx := context.Background()
	if chunk, next, err := l.ReadChunk(0, 1024, nil); err != nil || len(chunk) != 0 || next != 0 {
		t.Fatalf("empty log: %d bytes, next %d, %v", len(chunk), next, err)
	}
	small := sizedRecord(t, "c", 0, 1000, 'a')
	var ends []int64
	for i := 0; i < 5; i++ {
		r, err := l.Append(ctx, sizedRecord(t, "c", 0, 1000, byte('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, r.End())
	}
	_ = small
	// max is respected in whole records.
	chunk, next, err := l.ReadChunk(0, 2500, nil)
	if err != nil || len(chunk) != 2000 || next != 2000 {
		t.Fatalf("chunk of at most 2500: %d bytes, next %d, %v", len(chunk), next, err)
	}
	// At least one record, however small max is.
	chunk, next, err = l.ReadChunk(1000, 10, nil)
	if err != nil || len(chunk) != 1000 || next != 2000 {
		t.Fatalf("chunk of at most 10: %d bytes, next %d, %v", len(chunk), next, err)
	}
	// Fill the segment so it ends with a blank.
	for l.MaxOffset() < o.SegmentSize-20000 {
		if _, err := l.Append(ctx, sizedRecord(t, "c", 1, 9000, 'z')); err != nil {
			t.Fatal(err)
		}
	}
	last := l.MaxOffset()
	if _, err := l.Append(ctx, sizedRecord(t, "c", 1, 30000, 'y')); err != nil {
		t.Fatal(err)
	}
	chunk, next, err = l.ReadChunk(ends[len(ends)-1], 1<<30, nil)
	if err != nil || next != last {
		t.Fatalf("chunk to the blank: next %d, want %d, %v", next, last, err)
	}
	chunk, next, err = l.ReadChunk(last, 1<<30, nil)
	if err != nil || len(chunk) != message.BlankSize || next != o.SegmentSize {
		t.Fatalf("blank chunk: %d bytes, next %d, %v", len(chunk), next, err)
	}
	if h, _ := message.PeekHeader(chunk); !h.IsBlank() || int64(h.TotalSize) != o.SegmentSize-last {
		t.Fatalf("blank chunk header %+v", h)
	}
	info, err := l.RecordAt(last)
	if err != nil || !info.Blank {
		t.Fatalf("RecordAt(blank): %+v %v", info, err)
	}
	info, err = l.RecordAt(1000)
	if err != nil || info.Blank || info.Size != 1000 || info.StoreTimestamp == 0 {
		t.Fatalf("RecordAt(1000): %+v %v", info, err)
	}
	if _, err := l.RecordAt(l.MaxOffset()); !errors.Is(err, ErrOffset) {
		t.Fatalf("RecordAt(end): %v", err)
	}
	if _, err := l.RecordAt(1001); err == nil {
		t.Fatal("RecordAt inside a record succeeded")
	}
}

func TestCommittedChanged(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			l := openTestLog(t, testOptions(t.TempDir(), m.flush, m.write), 0)
			ch := l.CommittedChanged()
			done := make(chan error, 1)
			go func() {
				_, err := l.Append(context.Background(), record(t, "c", 0, []byte("x")))
				done <- err
			}()
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
				t.Fatal("CommittedChanged did not fire")
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if l.CommittedOffset() != l.MaxOffset() {
				t.Fatalf("committed %d, max %d", l.CommittedOffset(), l.MaxOffset())
			}
		})
	}
}

func TestStartAt(t *testing.T) {
	o := testOptions(t.TempDir(), FlushAsync, WritePwrite)
	master := openTestLog(t, o, 0)
	ctx := context.Background()
	for master.MaxOffset() < 3*o.SegmentSize+10000 {
		if _, err := master.Append(ctx, sizedRecord(t, "s", 0, 7000, 'm')); err != nil {
			t.Fatal(err)
		}
	}
	start := 2 * o.SegmentSize
	slaveOpts := testOptions(t.TempDir(), FlushSync, WritePwrite)
	slave := openTestLog(t, slaveOpts, 0)
	if err := slave.StartAt(start + 4096); err == nil {
		t.Fatal("StartAt accepted an offset inside a segment")
	}
	if err := slave.StartAt(start); err != nil {
		t.Fatal(err)
	}
	if slave.MaxOffset() != start || slave.MinOffset() != start {
		t.Fatalf("after StartAt: min %d max %d", slave.MinOffset(), slave.MaxOffset())
	}
	if _, ok, err := slave.LastRecord(); ok || err != nil {
		t.Fatalf("empty log has a last record: %v %v", ok, err)
	}
	copyAll(t, master, slave, 64<<10)
	sameBytes(t, master, slave)
	if err := slave.StartAt(0); err == nil {
		t.Fatal("StartAt accepted a log holding data")
	}
	if segs := slave.Segments(); segs[0].Start != start {
		t.Fatalf("slave's first segment starts at %d", segs[0].Start)
	}
	end := slave.MaxOffset()
	if err := slave.Close(); err != nil {
		t.Fatal(err)
	}
	re := openTestLog(t, slaveOpts, 0)
	if re.MinOffset() != start || re.MaxOffset() != end {
		t.Fatalf("reopened: min %d max %d, want %d %d", re.MinOffset(), re.MaxOffset(), start, end)
	}
	// Appends continue after the replicated bytes.
	if _, err := re.Append(ctx, record(t, "s", 0, []byte("after"))); err != nil {
		t.Fatal(err)
	}
}

func TestAppendRawRejects(t *testing.T) {
	ctx := context.Background()
	src := openTestLog(t, testOptions(t.TempDir(), FlushAsync, WritePwrite), 0)
	for i := 0; i < 3; i++ {
		if _, err := src.Append(ctx, sizedRecord(t, "r", 0, 500, 'r')); err != nil {
			t.Fatal(err)
		}
	}
	good, _, err := src.ReadChunk(0, 1<<20, nil)
	if err != nil || len(good) != 1500 {
		t.Fatalf("chunk: %d %v", len(good), err)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		off  int64
		data []byte
		keep int64 // bytes that stay appended before the bad one
	}{
		{"wrong offset", 500, good, 0},
		{"flipped body byte", 0, mutate(func(b []byte) []byte { b[600+100] ^= 1; return b }), 500},
		{"wrong physical offset", 0, good[500:1000], 0},
		{"partial record", 0, good[:1200], 1000},
		{"trailing bytes", 0, good[:1004], 1000},
		{"garbage magic", 0, mutate(func(b []byte) []byte { b[1004] = 0; return b }), 1000},
		{"blank of the wrong size", 0, func() []byte {
			b := append([]byte(nil), good[:500]...)
			var h [8]byte
			message.EncodeBlank(h[:], 12345)
			return append(b, h[:]...)
		}(), 500},
		{"size field too large", 0, mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[1000:], 1<<30); return b }), 1000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := openTestLog(t, testOptions(t.TempDir(), FlushAsync, WritePwrite), 0)
			end, err := l.AppendRaw(ctx, c.off, c.data)
			if err == nil {
				t.Fatalf("accepted; log ends at %d", end)
			}
			if end != c.keep || l.MaxOffset() != c.keep {
				t.Fatalf("log ends at %d (returned %d), want %d: %v", l.MaxOffset(), end, c.keep, err)
			}
			// The log still takes the right bytes afterwards.
			if _, err := l.AppendRaw(ctx, c.keep, good[c.keep:]); err != nil {
				t.Fatalf("good bytes after the failure: %v", err)
			}
		})
	}
}

func TestAppendRawSyncIsDurable(t *testing.T) {
	ctx := context.Background()
	src := openTestLog(t, testOptions(t.TempDir(), FlushAsync, WritePwrite), 0)
	for i := 0; i < 10; i++ {
		if _, err := src.Append(ctx, sizedRecord(t, "d", 0, 700, 'd')); err != nil {
			t.Fatal(err)
		}
	}
	chunk, next, err := src.ReadChunk(0, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modes() {
		if m.flush != FlushSync {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			l := openTestLog(t, testOptions(t.TempDir(), m.flush, m.write), 0)
			end, err := l.AppendRaw(ctx, 0, chunk)
			if err != nil || end != next {
				t.Fatalf("append raw: %d %v", end, err)
			}
			if l.FlushedOffset() < end || l.Readable() < end {
				t.Fatalf("sync AppendRaw returned before the flush: flushed %d readable %d end %d", l.FlushedOffset(), l.Readable(), end)
			}
		})
	}
}
