package store

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// minOffsetOptions: small CommitLog segments that retention deletes at
// once, and queue files much larger than what a segment holds of a queue,
// so that the units of deleted messages share a file with live ones (with
// a few units per file, deleting whole files would hide the bug).
func minOffsetOptions(dir string) Options {
	o := testOptions(dir, commitlog.FlushAsync)
	o.ConsumeQueue.UnitsPerFile = 1000
	o.Retention.MaxAge = time.Nanosecond
	o.Retention.DeleteHours = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}
	o.Retention.MaxPerRun = 3
	o.RetentionInterval = time.Hour
	return o
}

type putAt struct {
	queueOffset, phyOffset int64
	body                   string
}

// TestMinOffsetAfterRetention: once retention deletes CommitLog segments,
// every queue's min offset is its first message still in the log — in the
// middle of its queue file — before and after a restart; a pull below it
// is moved there and then finds that message.
func TestMinOffsetAfterRetention(t *testing.T) {
	dir := t.TempDir()
	o := minOffsetOptions(dir)
	s, err := Open(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	puts := map[int32][]putAt{}
	put := func(q int32, i int) {
		t.Helper()
		m := &message.Ext{Message: message.Message{Topic: "M", Body: bytes.Repeat([]byte{'x'}, 1000)}, QueueID: q}
		m.Body = append(m.Body, fmt.Sprintf("-%d-%d", q, i)...)
		r, err := s.Put(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		puts[q] = append(puts[q], putAt{r.QueueOffset, r.PhysicalOffset, string(m.Body[1000:])})
	}
	// Queues 0-2 take messages all along; queue 3 only at first (all of
	// them will be gone), queue 4 only at the end (none will be).
	for i := 0; i < 60; i++ {
		put(3, i)
	}
	for i := 0; i < 1200; i++ {
		put(int32(i%3), i)
	}
	for i := 0; i < 10; i++ {
		put(4, i)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDispatched(ctx, s.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RunRetention(time.Now()); err != nil || n != 3 {
		t.Fatalf("retention deleted %d segments, %v; want 3", n, err)
	}
	logMin := s.CommitLog().MinOffset()
	// wantMin is the first queue offset whose message is still in the log.
	wantMin := func(q int32) (int64, putAt) {
		for _, p := range puts[q] {
			if p.phyOffset >= logMin {
				return p.queueOffset, p
			}
		}
		return int64(len(puts[q])), putAt{}
	}
	check := func(when string) {
		t.Helper()
		for q := int32(0); q < 5; q++ {
			want, first := wantMin(q)
			minOff, maxOff := s.QueueOffsets("M", q)
			if minOff != want || maxOff != int64(len(puts[q])) {
				t.Fatalf("%s: queue %d holds [%d, %d), want [%d, %d)", when, q, minOff, maxOff, want, len(puts[q]))
			}
			res, err := s.GetMessages("M", q, 0, 4, 1<<20, nil)
			if err != nil {
				t.Fatalf("%s: pull queue %d from 0: %v", when, q, err)
			}
			switch {
			case want == 0:
				if res.Status != Found || len(res.Records) == 0 {
					t.Fatalf("%s: pull queue %d from 0: %v", when, q, res.Status)
				}
			case res.Status != OffsetTooSmall || res.NextOffset != want || res.MinOffset != want:
				t.Fatalf("%s: pull queue %d from 0: %v, next %d, min %d; want OFFSET_TOO_SMALL to %d",
					when, q, res.Status, res.NextOffset, res.MinOffset, want)
			}
			if want == maxOff {
				if res, err := s.GetMessages("M", q, want, 4, 1<<20, nil); err != nil || res.Status != NoMessageInQueue {
					t.Fatalf("%s: pull aged-out queue %d at %d: %v, %v", when, q, want, res.Status, err)
				}
				continue
			}
			res, err = s.GetMessages("M", q, want, 4, 1<<20, nil)
			if err != nil || res.Status != Found || res.QueueOffsets[0] != want {
				t.Fatalf("%s: pull queue %d from its min %d: %v, %v", when, q, want, res.Status, err)
			}
			m, err := message.Decode(res.Records[0])
			if err != nil || m.QueueOffset != want || string(m.Body[1000:]) != first.body {
				t.Fatalf("%s: queue %d first message: %v at %d, want %q at %d", when, q, err, m.QueueOffset, first.body, want)
			}
		}
		for _, qi := range s.Queues() {
			if want, _ := wantMin(qi.QueueID); qi.MinOffset != want {
				t.Fatalf("%s: Queues() says queue %d starts at %d, want %d", when, qi.QueueID, qi.MinOffset, want)
			}
		}
	}
	// The bug's shape: no queue file was deleted, yet queues 0-2 start in
	// the middle of theirs, and queue 3 is empty at its end.
	for q := int32(0); q < 3; q++ {
		if want, _ := wantMin(q); want == 0 || want >= int64(o.ConsumeQueue.UnitsPerFile) {
			t.Fatalf("queue %d: first live message at %d, want one inside the first queue file", q, want)
		}
	}
	if want, _ := wantMin(3); want != 60 {
		t.Fatalf("queue 3: first live message at %d, want none", want)
	}
	if want, _ := wantMin(4); want != 0 {
		t.Fatalf("queue 4: first live message at %d, want 0", want)
	}
	check("after retention")

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(o, nil); err != nil {
		t.Fatal(err)
	}
	check("after a restart")

	// The emptied queue goes on where it was.
	put(3, 60)
	if err := s.WaitDispatched(ctx, s.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	res, err := s.GetMessages("M", 3, 0, 4, 1<<20, nil)
	if err != nil || res.Status != OffsetTooSmall || res.NextOffset != 60 {
		t.Fatalf("pull queue 3 from 0 after a new message: %v, next %d, %v", res.Status, res.NextOffset, err)
	}
	res, err = s.GetMessages("M", 3, 60, 4, 1<<20, nil)
	if err != nil || res.Status != Found || len(res.Records) != 1 || res.QueueOffsets[0] != 60 {
		t.Fatalf("pull queue 3 from 60: %v, %d records, %v", res.Status, len(res.Records), err)
	}

	// A second round moves the min offsets again.
	if n, err := s.RunRetention(time.Now()); err != nil || n == 0 {
		t.Fatalf("second retention deleted %d segments, %v", n, err)
	}
	logMin = s.CommitLog().MinOffset()
	for q := int32(0); q < 5; q++ {
		want, _ := wantMin(q)
		if minOff, _ := s.QueueOffsets("M", q); minOff != want {
			t.Fatalf("after a second retention: queue %d starts at %d, want %d", q, minOff, want)
		}
	}
}
