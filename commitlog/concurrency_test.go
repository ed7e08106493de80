package commitlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// TestConcurrentAppenders runs 16 appenders × 500 records over several
// topics and queues in every mode, with a tailing reader (what the
// dispatcher does) and a sampler of the log's offsets running alongside.
func TestConcurrentAppenders(t *testing.T) {
	const writers, perWriter = 16, 500
	topics := []string{"TopicA", "TopicB", "TopicC"}
	const queues = 4
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			opts := testOptions(t.TempDir(), m.flush, m.write)
			l := openTestLog(t, opts, 0)
			ctx := context.Background()

			stop := make(chan struct{})
			var bg sync.WaitGroup

			// Sampler: every offset is monotonic, flushed ≤ readable ≤ written,
			// and with sync flush nothing readable is unflushed.
			var samples atomic.Int64
			bg.Add(1)
			go func() {
				defer bg.Done()
				var lastF, lastR, lastM int64
				for {
					select {
					case <-stop:
						return
					default:
					}
					r := l.Readable()
					f := l.FlushedOffset()
					if m.flush == FlushSync && r > f {
						t.Errorf("sync mode: readable %d > flushed %d", r, f)
						return
					}
					f2 := l.FlushedOffset()
					r2 := l.Readable()
					mx := l.MaxOffset()
					if f2 > r2 || r2 > mx {
						t.Errorf("want flushed %d <= readable %d <= max %d", f2, r2, mx)
						return
					}
					if f < lastF || r < lastR || mx < lastM {
						t.Errorf("offsets went backwards: flushed %d->%d readable %d->%d max %d->%d", lastF, f, lastR, r, lastM, mx)
						return
					}
					lastF, lastR, lastM = f2, r2, mx
					samples.Add(1)
				}
			}()

			// Tailing reader: scans whatever is readable, verifying every
			// record, until it has seen them all.
			var tailSeen []int64
			tailErr := make(chan error, 1)
			go func() {
				var off int64
				deadline := time.After(60 * time.Second)
				for {
					ch := l.ReadableChanged()
					limit := l.Readable()
					next, err := l.Scan(off, limit, func(o int64, rec []byte) error {
						if err := message.Verify(rec); err != nil {
							return fmt.Errorf("tail: record at %d: %w", o, err)
						}
						if p := physicalOffsetOf(rec); p != o {
							return fmt.Errorf("tail: record at %d says %d", o, p)
						}
						tailSeen = append(tailSeen, o)
						return nil
					})
					if err != nil {
						tailErr <- err
						return
					}
					off = next
					if len(tailSeen) == writers*perWriter {
						tailErr <- nil
						return
					}
					select {
					case <-ch:
					case <-deadline:
						tailErr <- fmt.Errorf("tail: saw %d records, readable %d, max %d", len(tailSeen), l.Readable(), l.MaxOffset())
						return
					}
				}
			}()

			results := make([][]appended, writers)
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < perWriter; i++ {
						topic := topics[(w+i)%len(topics)]
						q := int32((w*7 + i) % queues)
						body := fmt.Appendf(nil, "w%02d-i%03d-", w, i)
						for len(body) < 50+(w*31+i*17)%700 {
							body = append(body, byte('a'+len(body)%26))
						}
						e := &message.Ext{
							Message:   message.Message{Topic: topic, Body: body},
							QueueID:   q,
							BornHost:  testHost,
							StoreHost: testHost,
						}
						rec, err := message.Encode(nil, e)
						if err != nil {
							t.Error(err)
							return
						}
						r, err := l.Append(ctx, &Entry{Record: rec, Topic: topic, QueueID: q})
						if err != nil {
							t.Errorf("writer %d append %d: %v", w, i, err)
							return
						}
						if m.flush == FlushSync && l.FlushedOffset() < r.End() {
							t.Errorf("sync append returned before its flush: flushed %d < end %d", l.FlushedOffset(), r.End())
							return
						}
						results[w] = append(results[w], appended{res: r, topic: topic, queue: q, body: body})
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				close(stop)
				bg.Wait()
				return
			}
			if err := <-tailErr; err != nil {
				close(stop)
				bg.Wait()
				t.Fatal(err)
			}
			close(stop)
			bg.Wait()
			if samples.Load() == 0 {
				t.Fatal("sampler took no samples")
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if l.FlushedOffset() != l.MaxOffset() || l.Readable() != l.MaxOffset() {
				t.Fatalf("after Flush: flushed %d readable %d max %d", l.FlushedOffset(), l.Readable(), l.MaxOffset())
			}

			var all []appended
			for w, rs := range results {
				// One writer's records are in its program order.
				for i := 1; i < len(rs); i++ {
					if rs[i].res.PhysicalOffset <= rs[i-1].res.PhysicalOffset {
						t.Fatalf("writer %d: record %d at %d not after record %d at %d", w, i, rs[i].res.PhysicalOffset, i-1, rs[i-1].res.PhysicalOffset)
					}
				}
				all = append(all, rs...)
			}
			if len(all) != writers*perWriter {
				t.Fatalf("%d results, want %d", len(all), writers*perWriter)
			}
			sortByOffset(all)
			if all[0].res.PhysicalOffset != 0 {
				t.Fatalf("first record at %d", all[0].res.PhysicalOffset)
			}
			if end := checkContiguous(t, l, all, 0); end != l.MaxOffset() {
				t.Fatalf("records end at %d, log at %d", end, l.MaxOffset())
			}
			if len(l.Segments()) < 5 {
				t.Fatalf("only %d segments: the test should roll several", len(l.Segments()))
			}

			// Per queue, in log order: 0, 1, …, n-1.
			next := map[queueKey]int64{}
			for _, a := range all {
				k := queueKey{a.topic, a.queue}
				if a.res.QueueOffset != next[k] {
					t.Fatalf("%s/%d: record at %d has queue offset %d, want %d", a.topic, a.queue, a.res.PhysicalOffset, a.res.QueueOffset, next[k])
				}
				next[k]++
			}
			if len(next) != len(topics)*queues {
				t.Fatalf("%d queues used, want %d", len(next), len(topics)*queues)
			}
			for k, n := range next {
				if got := l.QueueOffset(k.topic, k.id); got != n {
					t.Fatalf("%s/%d: next queue offset %d, want %d", k.topic, k.id, got, n)
				}
			}

			checkRecords(t, l, all)
			checkScan(t, l, 0, all)
			for i, off := range tailSeen {
				if off != all[i].res.PhysicalOffset {
					t.Fatalf("tail reader saw record %d at %d, want %d", i, off, all[i].res.PhysicalOffset)
				}
			}
		})
	}
}

// TestAppendBatchContiguous checks that a batch lands contiguously (only a
// segment roll may separate two of its records) even while other goroutines
// append, that its queue offsets are consecutive, and that a sync batch is
// durable when it returns.
func TestAppendBatchContiguous(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			opts := testOptions(t.TempDir(), m.flush, m.write)
			l := openTestLog(t, opts, 0)
			ctx := context.Background()
			const batchers, singles, rounds, batchLen = 4, 4, 40, 10
			var mu sync.Mutex
			var all []appended
			var batches [][]Result
			var wg sync.WaitGroup
			for g := 0; g < batchers; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					topic := fmt.Sprintf("B%d", g)
					for r := 0; r < rounds; r++ {
						entries := make([]*Entry, batchLen)
						var acks []appended
						for i := range entries {
							body := fmt.Appendf(nil, "batch-%d-%d-%d-%0*d", g, r, i, 200+(r*13+i*97)%900, 0)
							entries[i] = record(t, topic, 0, body)
							acks = append(acks, appended{topic: topic, queue: 0, body: body})
						}
						// dst already holds a sentinel: results go after it.
						dst := []Result{{PhysicalOffset: -1}}
						res, err := l.AppendBatch(ctx, entries, dst)
						if err != nil {
							t.Errorf("batch: %v", err)
							return
						}
						if len(res) != batchLen+1 || res[0].PhysicalOffset != -1 {
							t.Errorf("batch returned %d results (sentinel %+v)", len(res), res[0])
							return
						}
						res = res[1:]
						if m.flush == FlushSync && l.FlushedOffset() < res[batchLen-1].End() {
							t.Errorf("sync batch returned before flush: flushed %d < %d", l.FlushedOffset(), res[batchLen-1].End())
							return
						}
						for i := range acks {
							acks[i].res = res[i]
						}
						mu.Lock()
						all = append(all, acks...)
						batches = append(batches, res)
						mu.Unlock()
					}
				}()
			}
			for g := 0; g < singles; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < rounds*batchLen/2; i++ {
						body := fmt.Appendf(nil, "single-%d-%d-%0*d", g, i, 50+i%500, 0)
						e := record(t, "S", int32(g), body)
						r, err := l.Append(ctx, e)
						if err != nil {
							t.Errorf("single: %v", err)
							return
						}
						mu.Lock()
						all = append(all, appended{res: r, topic: "S", queue: int32(g), body: body})
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			seg := opts.SegmentSize
			rolled := 0
			for bi, res := range batches {
				for i := 1; i < len(res); i++ {
					prev, cur := res[i-1], res[i]
					if cur.QueueOffset != prev.QueueOffset+1 {
						t.Fatalf("batch %d: queue offsets %d then %d", bi, prev.QueueOffset, cur.QueueOffset)
					}
					if cur.PhysicalOffset == prev.End() {
						continue
					}
					// Only a roll may separate them: a blank from prev's end
					// to the next segment.
					if cur.PhysicalOffset%seg != 0 || cur.PhysicalOffset-prev.End() >= seg || cur.PhysicalOffset < prev.End() {
						t.Fatalf("batch %d: record %d at %d does not follow record %d ending at %d", bi, i, cur.PhysicalOffset, i-1, prev.End())
					}
					if h := headerAt(t, l, prev.End()); !h.IsBlank() || int64(h.TotalSize) != cur.PhysicalOffset-prev.End() {
						t.Fatalf("batch %d: gap at %d is not a blank: %+v", bi, prev.End(), h)
					}
					rolled++
				}
			}
			if rolled == 0 {
				t.Fatal("no batch crossed a segment roll; make the test bigger")
			}
			sortByOffset(all)
			if end := checkContiguous(t, l, all, 0); end != l.MaxOffset() {
				t.Fatalf("records end at %d, log at %d", end, l.MaxOffset())
			}
			checkRecords(t, l, all)
			checkScan(t, l, 0, all)
		})
	}
}

// TestAppendBatchRejectsWholeBatch: a batch holding one record too large for
// a segment (or too short to be a record) writes none of its records.
func TestAppendBatchRejectsWholeBatch(t *testing.T) {
	opts := testOptions(t.TempDir(), FlushSync, WriteAuto)
	l := openTestLog(t, opts, 0)
	ctx := context.Background()
	appendOne(t, l, record(t, "T", 0, []byte("first")))
	before, qoff, segs := l.MaxOffset(), l.QueueOffset("T", 0), len(l.Segments())
	for name, bad := range map[string]*Entry{
		"too-large": sizedRecord(t, "T", 0, opts.MaxRecordSize()+1, 'x'),
		"too-short": {Record: make([]byte, message.BlankSize-1), Topic: "T"},
	} {
		entries := []*Entry{record(t, "T", 0, []byte("a")), bad, record(t, "T", 0, []byte("b"))}
		res, err := l.AppendBatch(ctx, entries, nil)
		if err == nil || len(res) != 0 {
			t.Fatalf("%s: batch returned %d results, err %v", name, len(res), err)
		}
		if name == "too-large" && !errors.Is(err, ErrRecordTooLarge) {
			t.Fatalf("%s: %v, want ErrRecordTooLarge", name, err)
		}
		if l.MaxOffset() != before || l.QueueOffset("T", 0) != qoff || len(l.Segments()) != segs {
			t.Fatalf("%s: the failed batch changed the log: max %d->%d queue offset %d->%d", name, before, l.MaxOffset(), qoff, l.QueueOffset("T", 0))
		}
	}
}

// TestAppendNoWaitThenWaitFlushed: a pipelining caller appends without
// waiting, then waits for durability itself.
func TestAppendNoWaitThenWaitFlushed(t *testing.T) {
	for _, write := range []WriteMode{WriteMmap, WritePwrite} {
		t.Run(write.String(), func(t *testing.T) {
			opts := testOptions(t.TempDir(), FlushSync, write)
			l := openTestLog(t, opts, 0)
			var last Result
			for i := 0; i < 50; i++ {
				res, err := l.AppendNoWait([]*Entry{record(t, "T", 0, make([]byte, 500))}, nil)
				if err != nil {
					t.Fatal(err)
				}
				last = res[0]
			}
			if err := l.WaitFlushed(context.Background(), last.End()); err != nil {
				t.Fatal(err)
			}
			if l.FlushedOffset() < last.End() || l.Readable() < last.End() {
				t.Fatalf("after WaitFlushed(%d): flushed %d readable %d", last.End(), l.FlushedOffset(), l.Readable())
			}
		})
	}
}

// TestFlushedOffsetMonotonicUnderConcurrentFlush: Flush may be called by
// several goroutines at once (the async flusher, the store, admin tools);
// the flushed offset, and with it Readable in sync mode, must never move
// backwards.
func TestFlushedOffsetMonotonicUnderConcurrentFlush(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			opts := testOptions(t.TempDir(), m.flush, m.write)
			opts.FlushInterval = time.Millisecond
			opts.FlushLeastPages = 0
			l := openTestLog(t, opts, 0)
			ctx := context.Background()
			stop := make(chan struct{})
			var bg sync.WaitGroup
			for g := 0; g < 4; g++ {
				bg.Add(1)
				go func() {
					defer bg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := l.Flush(); err != nil {
							t.Errorf("flush: %v", err)
							return
						}
					}
				}()
			}
			var backwards atomic.Value
			bg.Add(1)
			go func() {
				defer bg.Done()
				var lastF, lastR int64
				for {
					select {
					case <-stop:
						return
					default:
					}
					f := l.FlushedOffset()
					if f < lastF {
						backwards.Store(fmt.Sprintf("FlushedOffset read %d, then %d", lastF, f))
						return
					}
					r := l.Readable()
					if r < lastR {
						backwards.Store(fmt.Sprintf("Readable read %d, then %d", lastR, r))
						return
					}
					lastF, lastR = f, r
				}
			}()
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 200; i++ {
						if _, err := l.Append(ctx, record(t, "T", int32(w), make([]byte, 300))); err != nil {
							t.Errorf("append: %v", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			bg.Wait()
			if v := backwards.Load(); v != nil {
				t.Fatalf("offset moved backwards under concurrent Flush calls: %s", v)
			}
		})
	}
}

// TestFlushConcurrentWithClose: Flush called while Close runs must either
// finish or return ErrClosed; it must never sync a segment Close has
// already unmapped and closed (a data race on the mapping, an msync of an
// unmapped range or an fdatasync of a closed descriptor). The window is
// narrow, so every mode goes through many open/close rounds.
func TestFlushConcurrentWithClose(t *testing.T) {
	const rounds = 25
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			opts := testOptions(t.TempDir(), m.flush, m.write)
			ctx := context.Background()
			for round := 0; round < rounds && !t.Failed(); round++ {
				l, err := Open(opts, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				var flushes atomic.Int64
				for g := 0; g < 3; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							err := l.Flush()
							if errors.Is(err, ErrClosed) {
								return
							}
							if err != nil {
								t.Errorf("Flush racing Close: %v", err)
								return
							}
							flushes.Add(1)
						}
					}()
				}
				for g := 0; g < 2; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							if _, err := l.Append(ctx, record(t, "T", int32(g), make([]byte, 200))); err != nil {
								if !errors.Is(err, ErrClosed) {
									t.Errorf("append: %v", err)
								}
								return
							}
						}
					}()
				}
				testutil.Eventually(t, 10*time.Second, "flushes to run", func() bool { return flushes.Load() >= 10 })
				cerr := l.Close()
				wg.Wait()
				if cerr != nil {
					t.Fatalf("round %d: Close: %v", round, cerr)
				}
				if err := l.Err(); err != nil {
					t.Fatalf("round %d: sticky error after Close raced Flush: %v", round, err)
				}
			}
		})
	}
}
