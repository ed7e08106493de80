package commitlog

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bolide-mq/bolide/message"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testHost = netip.MustParseAddrPort("127.0.0.1:10911")

// record encodes a message for topic/queue with a body of n bytes.
func record(t testing.TB, topic string, queue int32, body []byte) *Entry {
	t.Helper()
	e := &message.Ext{
		Message:   message.Message{Topic: topic, Body: body, Properties: map[string]string{message.PropertyKeys: "k"}},
		QueueID:   queue,
		BornHost:  testHost,
		StoreHost: testHost,
	}
	rec, err := message.Encode(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	return &Entry{Record: rec, Topic: topic, QueueID: queue}
}

func testOptions(dir string, flush FlushMode, write WriteMode) Options {
	o := DefaultOptions(dir)
	o.SegmentSize = 256 << 10
	o.FlushMode = flush
	o.WriteMode = write
	o.FlushInterval = 10 * time.Millisecond
	return o
}

func modes() []struct {
	name  string
	flush FlushMode
	write WriteMode
} {
	return []struct {
		name  string
		flush FlushMode
		write WriteMode
	}{
		{"async-mmap", FlushAsync, WriteMmap},
		{"async-pwrite", FlushAsync, WritePwrite},
		{"sync-mmap", FlushSync, WriteMmap},
		{"sync-pwrite", FlushSync, WritePwrite},
	}
}

func TestAppendReadReopen(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, m.flush, m.write)
			l, err := Open(opts, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var results []Result
			var bodies [][]byte
			for i := 0; i < 2000; i++ {
				body := bytes.Repeat([]byte{byte(i)}, 100+i%900)
				r, err := l.Append(ctx, record(t, "T", int32(i%3), body))
				if err != nil {
					t.Fatal(err)
				}
				if want := int64(i / 3); r.QueueOffset != want {
					t.Fatalf("record %d: queue offset %d, want %d", i, r.QueueOffset, want)
				}
				results = append(results, r)
				bodies = append(bodies, body)
			}
			if len(l.Segments()) < 3 {
				t.Fatalf("want at least 3 segments, have %d", len(l.Segments()))
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			check := func(l *Log) {
				t.Helper()
				for i, r := range results {
					rec, err := l.ReadRecord(r.PhysicalOffset, nil)
					if err != nil {
						t.Fatalf("read %d at %d: %v", i, r.PhysicalOffset, err)
					}
					if err := message.Verify(rec); err != nil {
						t.Fatal(err)
					}
					m, err := message.Decode(rec)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(m.Body, bodies[i]) || m.PhysicalOffset != r.PhysicalOffset || m.QueueOffset != r.QueueOffset {
						t.Fatalf("record %d differs", i)
					}
				}
				n := 0
				next, err := l.Scan(l.MinOffset(), l.MaxOffset(), func(off int64, rec []byte) error {
					if off != results[n].PhysicalOffset {
						return fmt.Errorf("scan: record %d at %d, want %d", n, off, results[n].PhysicalOffset)
					}
					n++
					return nil
				})
				if err != nil || n != len(results) || next != l.MaxOffset() {
					t.Fatalf("scan: n=%d next=%d max=%d err=%v", n, next, l.MaxOffset(), err)
				}
			}
			check(l)
			end := l.MaxOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l, err = Open(opts, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.MaxOffset() != end || l.Recovery().Torn {
				t.Fatalf("reopen: end %d want %d, recovery %+v", l.MaxOffset(), end, l.Recovery())
			}
			check(l)
			for q := int32(0); q < 3; q++ {
				l.SetQueueOffset("T", q, results[len(results)-3+int(q)].QueueOffset+1)
			}
			r, err := l.Append(ctx, record(t, "T", 0, []byte("after")))
			if err != nil || r.PhysicalOffset != end {
				t.Fatalf("append after reopen at %d (want %d): %v", r.PhysicalOffset, end, err)
			}
		})
	}
}

func TestTornTailIsTruncated(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, FlushSync, WriteAuto)
	l, err := Open(opts, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var last Result
	for i := 0; i < 300; i++ {
		if last, err = l.Append(context.Background(), record(t, "T", 0, make([]byte, 1000))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Flip one byte in the topic of the last record: the body CRC still
	// matches, only the record checksum catches it.
	segs, _ := listSegments(dir)
	path := filepath.Join(dir, SegmentName(segs[len(segs)-1]))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	pos := last.PhysicalOffset - segs[len(segs)-1] + int64(last.Size) - 30
	b := make([]byte, 1)
	f.ReadAt(b, pos)
	b[0] ^= 0x40
	f.WriteAt(b, pos)
	f.Close()
	l, err = Open(opts, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Recovery().Torn || l.MaxOffset() != last.PhysicalOffset {
		t.Fatalf("recovery %+v, end %d, want torn at %d", l.Recovery(), l.MaxOffset(), last.PhysicalOffset)
	}
}
