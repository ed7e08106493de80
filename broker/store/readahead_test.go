package store

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// TestGetMessagesReadsAhead: a pull from a backlog whose CommitLog pages
// are not in memory has the kernel read the CommitLog ahead of it, so the
// next pulls find their records in the page cache; the messages read back
// whole.
func TestGetMessagesReadsAhead(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir, commitlog.FlushAsync)
	o.CommitLog.SegmentSize = 16 << 20
	o.CommitLog.ReadAhead = 12 << 20
	s, err := Open(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := bytes.Repeat([]byte("b"), 8000)
	const n = 1750 // about 14 MiB
	for i := range n {
		m := newMsg("RA", int32(i%2), i)
		m.Body = body
		if _, err := s.Put(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitDispatched(ctx, s.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seg := s.CommitLog().Segments()[0].Path
	testutil.DropPageCache(t, seg)
	if r := testutil.ResidentBytes(t, seg, 0, 12<<20); r > 1<<20 {
		t.Skipf("%d bytes of %s still resident after POSIX_FADV_DONTNEED", r, seg)
	}
	res, err := s.GetMessages("RA", 0, 0, 2, 1<<20, nil)
	if err != nil || res.Status != Found || len(res.Records) != 2 {
		t.Fatalf("get: %v %v", res.Status, err)
	}
	// The units the pull looked at span about 32 KB of the log; the
	// read-ahead asks for 12 MiB past them. A page fault reads some MiB
	// around the faulting page by itself (the device's read_ahead_kb:
	// 8 MiB on the reference machine), so look at 8-12 MiB.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := testutil.ResidentBytes(t, seg, 8<<20, 4<<20)
		if r >= 4<<20*9/10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of the CommitLog's 8-12 MiB resident after a pull at its start", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for off := int64(0); off < n/2; {
		res, err := s.GetMessages("RA", 0, off, 32, 1<<20, nil)
		if err != nil || res.Status != Found {
			t.Fatalf("read at %d: %v %v", off, res.Status, err)
		}
		for _, r := range res.Records {
			m, err := message.Decode(r)
			if err != nil || !bytes.Equal(m.Body, body) || m.QueueOffset != off {
				t.Fatalf("message at %d: %v", off, err)
			}
			off++
		}
	}
}
