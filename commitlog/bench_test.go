package commitlog

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// benchRecordSize is the size of every benchmark record, headers included.
const benchRecordSize = 1024

func benchOptions(b *testing.B, flush FlushMode, write WriteMode) Options {
	o := DefaultOptions(b.TempDir())
	o.SegmentSize = 64 << 20
	o.FlushMode = flush
	o.WriteMode = write
	return o
}

func benchOpen(b *testing.B, opts Options) *Log {
	b.Helper()
	l, err := Open(opts, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkAppendAsync: one writer, 1 KiB records, async flush; segments of
// 64 MiB, so long runs roll.
func BenchmarkAppendAsync(b *testing.B) {
	for _, write := range []WriteMode{WriteMmap, WritePwrite} {
		b.Run(write.String(), func(b *testing.B) {
			l := benchOpen(b, benchOptions(b, FlushAsync, write))
			e := sizedRecord(b, "BenchTopic", 0, benchRecordSize, 'x')
			ctx := context.Background()
			b.SetBytes(benchRecordSize)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Append(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkAppendSync64: 64 writers (a fixed pool pulling from a counter),
// 1 KiB records, sync flush (group commit). Reports records/s, the 99th
// percentile of the time an append waits for its acknowledgement, and the
// disk's part: the mean time of a flush's fdatasync (or msync) and
// the records it carried. 64 writers waiting one flush each cannot exceed
// 64 ÷ flush-µs, whatever the code around the flush does.
func BenchmarkAppendSync64(b *testing.B) {
	const writers = 64
	for _, write := range []WriteMode{WriteMmap, WritePwrite} {
		b.Run(write.String(), func(b *testing.B) {
			opts := benchOptions(b, FlushSync, write)
			// The disk's own part: how long each flush took, and how
			// many records it carried.
			var flushes, flushNanos, flushBytes atomic.Int64
			opts.OnFlush = func(took time.Duration, n int64) {
				flushes.Add(1)
				flushNanos.Add(took.Nanoseconds())
				flushBytes.Add(n)
			}
			l := benchOpen(b, opts)
			records := make([]*Entry, writers)
			for i := range records {
				records[i] = sizedRecord(b, "BenchTopic", int32(i%8), benchRecordSize, 'x')
			}
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			ctx := context.Background()
			b.SetBytes(benchRecordSize)
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					e := records[w]
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						start := time.Now()
						if _, err := l.Append(ctx, e); err != nil {
							b.Error(err)
							return
						}
						lat[i] = time.Since(start)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			slices.Sort(lat)
			p99 := lat[min(len(lat)-1, len(lat)*99/100)]
			b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
			if n := flushes.Load(); n > 0 {
				b.ReportMetric(float64(flushNanos.Load())/float64(n)/1e3, "flush-µs")
				b.ReportMetric(float64(flushBytes.Load())/float64(n)/benchRecordSize, "records/flush")
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkDiskFlush64K is the disk's own limit for group commit, without
// the log: one goroutine writes 64 KiB (what a flush for 64 writers of
// 1 KiB carries) with pwrite into fresh preallocated space, as the log
// does, and fdatasyncs it, over and over. disk-records/s is 64 records
// per such cycle: what BenchmarkAppendSync64 could reach if gathering and
// waking writers took no time. Run the two side by side; the disk's latency
// drifts by minutes.
func BenchmarkDiskFlush64K(b *testing.B) {
	const size = 64 << 10
	f := flushFile(b, int64(b.N)*size)
	buf := make([]byte, size)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.WriteAt(buf, int64(i)*size); err != nil {
			b.Fatal(err)
		}
		if err := fsutil.Fdatasync(f); err != nil {
			b.Fatal(err)
		}
	}
	perFlush := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(perFlush*1e6, "µs/flush")
	b.ReportMetric(64/perFlush, "disk-records/s")
}

// BenchmarkDiskFlushConcurrent asks whether the disk serves flushes of one
// file side by side: each of par goroutines writes 16 KiB into fresh
// preallocated space of the same file and fdatasyncs it, over and over.
// flushes/s against par=1 is what overlapping flushes could gain;
// µs/flush is each one's latency. (The log runs one flush at a time:
// docs/BENCHMARKS.md has what two at a time did to a broker.)
func BenchmarkDiskFlushConcurrent(b *testing.B) {
	const size = 16 << 10
	for _, par := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("par=%d", par), func(b *testing.B) {
			f := flushFile(b, int64(b.N+par)*size)
			buf := make([]byte, size)
			var next, busy atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range par {
				wg.Go(func() {
					for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
						start := time.Now()
						if _, err := f.WriteAt(buf, i*size); err != nil {
							b.Error(err)
							return
						}
						if err := fsutil.Fdatasync(f); err != nil {
							b.Error(err)
							return
						}
						busy.Add(int64(time.Since(start)))
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "flushes/s")
			b.ReportMetric(float64(busy.Load())/float64(b.N)/1e3, "µs/flush")
		})
	}
}

// flushFile returns a file of n preallocated bytes in a temporary
// directory, closed when b ends: fresh space for the disk benchmarks.
func flushFile(b *testing.B, n int64) *os.File {
	b.Helper()
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "flush.dat"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	if err := fsutil.Preallocate(f, n); err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkReadRecord reads 1 KiB records at random offsets among 100 000.
func BenchmarkReadRecord(b *testing.B) {
	const n = 100_000
	l := benchOpen(b, benchOptions(b, FlushAsync, WriteMmap))
	defer l.Close()
	e := sizedRecord(b, "BenchTopic", 0, benchRecordSize, 'x')
	offs := make([]int64, n)
	ctx := context.Background()
	for i := range offs {
		r, err := l.Append(ctx, e)
		if err != nil {
			b.Fatal(err)
		}
		offs[i] = r.PhysicalOffset
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 0, benchRecordSize)
	b.SetBytes(benchRecordSize)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = l.ReadRecord(offs[rng.IntN(n)], buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAppendAsyncBatch: one writer appending 1 KiB records 32 at a
// time with AppendBatch (what a broker does with a batched send), async
// flush, across segment rolls. records/s counts appends; durable-records/s
// also waits for the final flush (what the disk sustains).
func BenchmarkAppendAsyncBatch(b *testing.B) {
	const batch = 32
	for _, write := range []WriteMode{WriteMmap, WritePwrite} {
		b.Run(write.String(), func(b *testing.B) {
			l := benchOpen(b, benchOptions(b, FlushAsync, write))
			entries := make([]*Entry, batch)
			for i := range entries {
				entries[i] = sizedRecord(b, "BenchTopic", 0, benchRecordSize, 'x')
			}
			res := make([]Result, 0, batch)
			ctx := context.Background()
			b.SetBytes(benchRecordSize)
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				if _, err := l.AppendBatch(ctx, entries[:n], res[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			// Sustained: until everything appended is on the disk.
			if err := l.Flush(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "durable-records/s")
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkAppendAsync16: 16 concurrent writers of single 1 KiB records,
// async flush: appenders that arrive together share one pwrite.
func BenchmarkAppendAsync16(b *testing.B) {
	const writers = 16
	for _, write := range []WriteMode{WriteMmap, WritePwrite} {
		b.Run(write.String(), func(b *testing.B) {
			l := benchOpen(b, benchOptions(b, FlushAsync, write))
			var next atomic.Int64
			ctx := context.Background()
			b.SetBytes(benchRecordSize)
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					e := sizedRecord(b, "BenchTopic", int32(w%8), benchRecordSize, 'x')
					for next.Add(1) <= int64(b.N) {
						if _, err := l.Append(ctx, e); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkAppendAsyncPaced: one writer appending 1 KiB records through
// the mapping at a steady 60 000 a second (about what a broker stores
// under 16 synchronous producers), with the pages made writable ahead
// zeroed first (zeros) or not (ZeroAhead 0: populated alone). The rate is
// fixed, so the figure is cpu-ns/op: the process's CPU time per record,
// its background goroutines included (populating ahead, flushing,
// dropping pages behind the window). Run it long enough to pass the page
// cache window and with the variants alternated, e.g.
// -benchtime 600000x -count 3.
func BenchmarkAppendAsyncPaced(b *testing.B) {
	const rate = 60000
	for _, zeros := range []bool{true, false} {
		b.Run(fmt.Sprintf("zeros=%v", zeros), func(b *testing.B) {
			o := benchOptions(b, FlushAsync, WriteMmap)
			o.SegmentSize = 256 << 20
			if !zeros {
				o.ZeroAhead = 0
			}
			l := benchOpen(b, o)
			e := sizedRecord(b, "BenchTopic", 0, benchRecordSize, 'x')
			ctx := context.Background()
			const step = 16 // records between two looks at the clock
			next := time.Now()
			cpu0 := testutil.ProcessCPU(b)
			b.ResetTimer()
			for i := 1; i <= b.N; i++ {
				if _, err := l.Append(ctx, e); err != nil {
					b.Fatal(err)
				}
				if i%step == 0 {
					next = next.Add(step * time.Second / rate)
					time.Sleep(time.Until(next))
				}
			}
			b.ReportMetric(float64(testutil.ProcessCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkPageWrite: what putting one 4 KiB page of a preallocated
// CommitLog file into the page cache costs the process, by way of making
// the pages ahead of a writer: populated through the mapping alone
// (MADV_POPULATE_WRITE), written with zeros first and then populated (the
// log's mmap mode), written with zeros only (the stores then fault them
// in), or not mapped at all: the data itself written with pwrite in 64 KiB
// steps. The other ways then store 1 KiB records into the mapping, and
// every 64 MiB the written pages are unmapped and synced and pages more
// than 512 MiB behind are dropped, as the log does. cpu-ns/op is the
// process's CPU time per page. Run it with -benchtime 600000x (2.3 GiB a
// way).
func BenchmarkPageWrite(b *testing.B) {
	const (
		chunk   = 4 << 20
		flushAt = 64 << 20
		window  = 512 << 20
		step    = 64 << 10
	)
	for _, way := range []string{"populate", "zeros+populate", "zeros", "pwrite"} {
		b.Run(way, func(b *testing.B) {
			size := (int64(b.N)*pageSize + chunk - 1) / chunk * chunk
			f, err := os.Create(filepath.Join(b.TempDir(), "segment"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			fd := int(f.Fd())
			if err := unix.Fallocate(fd, 0, 0, size); err != nil {
				b.Skipf("fallocate: %v", err)
			}
			m, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = unix.Munmap(m) }()
			_ = unix.Madvise(m, unix.MADV_RANDOM)
			rec := bytes.Repeat([]byte{'r'}, 1024)
			data := bytes.Repeat([]byte{'d'}, step)
			pwrite := func(p []byte, off int64) {
				for o := off; o < off+chunk; o += step {
					if _, err := unix.Pwrite(fd, p[:step], o); err != nil {
						b.Fatal(err)
					}
				}
			}
			var flushed, dropped int64
			cpu0 := testutil.ProcessCPU(b)
			b.ResetTimer()
			for off := int64(0); off < size; off += chunk {
				switch way {
				case "populate":
					err = unix.Madvise(m[off:off+chunk], unix.MADV_POPULATE_WRITE)
				case "zeros+populate":
					pwrite(zeroBuf[:], off)
					err = unix.Madvise(m[off:off+chunk], unix.MADV_POPULATE_WRITE)
				case "zeros":
					pwrite(zeroBuf[:], off)
				case "pwrite":
					pwrite(data, off)
				}
				if err != nil {
					b.Skipf("MADV_POPULATE_WRITE: %v", err)
				}
				if way != "pwrite" {
					for o := off; o < off+chunk; o += int64(len(rec)) {
						copy(m[o:], rec)
					}
				}
				if end := off + chunk; end-flushed >= flushAt || end == size {
					_ = unix.Madvise(m[flushed:end], unix.MADV_DONTNEED)
					if err := unix.Msync(m[flushed:end], unix.MS_SYNC); err != nil {
						b.Fatal(err)
					}
					flushed = end
					if behind := flushed - window; behind > dropped {
						_ = unix.Fadvise(fd, dropped, behind-dropped, unix.FADV_DONTNEED)
						dropped = behind
					}
				}
			}
			b.ReportMetric(float64(testutil.ProcessCPU(b)-cpu0)/float64(size/pageSize), "cpu-ns/op")
		})
	}
}
