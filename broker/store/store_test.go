package store

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/afterreply"
	"github.com/bolide-mq/bolide/internal/mmap"
	"github.com/bolide-mq/bolide/message"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testOptions(dir string, flush commitlog.FlushMode) Options {
	o := DefaultOptions(dir)
	o.CommitLog.SegmentSize = 256 << 10
	o.CommitLog.FlushMode = flush
	o.CommitLog.FlushInterval = 10 * time.Millisecond
	o.ConsumeQueue.UnitsPerFile = 100
	o.Index.SlotCount = 101
	o.Index.MaxEntries = 500
	o.MaxMessageSize = 64 << 10
	o.CheckpointInterval = 20 * time.Millisecond
	o.RecoverWindow = 16 << 10
	return o
}

func newMsg(topic string, queue int32, i int) *message.Ext {
	m := &message.Ext{Message: message.Message{Topic: topic, Body: []byte(fmt.Sprintf("body-%d", i))}, QueueID: queue}
	m.SetProperty(message.PropertyKeys, fmt.Sprintf("key-%d shared", i))
	m.SetProperty(message.PropertyTags, fmt.Sprintf("tag%d", i%2))
	return m
}

func TestPutGetQueryReopen(t *testing.T) {
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		t.Run(flush.String(), func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(testOptions(dir, flush), nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var last PutResult
			for i := 0; i < 600; i++ {
				if last, err = s.Put(ctx, newMsg("T", int32(i%2), i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.WaitDispatched(ctx, last.End()); err != nil {
				t.Fatal(err)
			}
			res, err := s.GetMessages("T", 0, 0, 10, 1<<20, func(tc int64) bool { return tc == message.TagsHash("tag0") })
			if err != nil || res.Status != Found || len(res.Records) != 10 || res.NextOffset != 10 {
				t.Fatalf("get: %+v %v", res.Status, err)
			}
			m, _ := message.Decode(res.Records[3])
			if string(m.Body) != "body-6" || m.QueueOffset != 3 {
				t.Fatalf("got %q at %d", m.Body, m.QueueOffset)
			}
			got, err := s.QueryByKey("T", "key-42", 0, time.Now().UnixMilli()+1000, 5)
			if err != nil || len(got) != 1 || string(got[0].Body) != "body-42" {
				t.Fatalf("query: %v %v", got, err)
			}
			byID, err := s.LookupByMsgID(last.MsgID)
			if err != nil || string(byID.Body) != "body-599" {
				t.Fatalf("by id: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(testOptions(dir, flush), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !s.Recovery().CleanShutdown || s.Recovery().Redispatched != 0 {
				t.Fatalf("recovery %+v", s.Recovery())
			}
			if _, max := s.QueueOffsets("T", 1); max != 300 {
				t.Fatalf("queue 1 max %d", max)
			}
			r, err := s.Put(ctx, newMsg("T", 1, 600))
			if err != nil || r.QueueOffset != 300 {
				t.Fatalf("put after reopen: %+v %v", r, err)
			}
			if err := s.WaitDispatched(ctx, r.End()); err != nil {
				t.Fatal(err)
			}
			got, _ = s.QueryByKey("T", "shared", 0, time.Now().UnixMilli()+1000, 1000)
			if len(got) != 601 {
				t.Fatalf("shared key: %d results", len(got))
			}
		})
	}
}

// TestReleaseLoopDropsResidentPages: the store drops mapped CommitLog pages
// it has read from the resident set, and the messages still read back.
func TestReleaseLoopDropsResidentPages(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir, commitlog.FlushAsync)
	o.CommitLog.SegmentSize = 4 << 20
	o.ResidentTail = 0
	o.ReleaseInterval = 20 * time.Millisecond
	s, err := Open(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	body := bytes.Repeat([]byte("r"), 2000)
	for i := 0; i < 1500; i++ { // about 3 MiB
		m := newMsg("RS", 0, i)
		m.Body = body
		if _, err := s.Put(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitDispatched(ctx, s.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	read := func() {
		for off := int64(0); off < 1500; {
			res, err := s.GetMessages("RS", 0, off, 32, 1<<20, nil)
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
	read()
	clogDir := filepath.Join(dir, "commitlog")
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := mmap.ResidentUnder(clogDir)
		if err != nil {
			t.Skip(err)
		}
		// What the writer made writable ahead of itself stays (mmap
		// write mode); everything below the written end goes.
		ahead := int64(0)
		if s.CommitLog().WriteMode() == commitlog.WriteMmap {
			ahead = commitlog.PopulateAhead
		}
		if n < 256<<10+ahead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of the CommitLog still resident", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	read()
}

// TestDispatchAfterPutLeavesRecordsUnplanned: while a Put is in flight the
// dispatcher leaves the planning of new records to it; a record that no Put
// plans (its Put failed after appending, or it was appended some other
// way) is planned and dispatched by the dispatcher once the last Put
// returns.
func TestDispatchAfterPutLeavesRecordsUnplanned(t *testing.T) {
	eachFlushMode(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.Put(ctx, newMsg("T", 0, 0)); err != nil {
			t.Fatal(err)
		}
		s.putting.Add(1) // a Put in flight
		m := newMsg("T", 0, 1)
		m.StoreHost, m.BornHost, m.BornTimestamp = s.opts.StoreHost, s.opts.StoreHost, time.Now().UnixMilli()
		rec, err := message.EncodeUnsealed(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.CommitLog().Append(ctx, &commitlog.Entry{Record: rec, Topic: m.Topic, QueueID: m.QueueID})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the dispatcher waits for the Put to plan it
		if d := s.DispatchedOffset(); d >= r.End() {
			t.Fatalf("dispatched to %d while a Put was to plan the record at %d", d, r.PhysicalOffset)
		}
		s.putDone(false) // which returns without planning it
		if err := waitDispatched(s, r.End(), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, maxOff := s.QueueOffsets("T", 0); maxOff != 2 {
			t.Fatalf("queue holds %d messages, want 2", maxOff)
		}
	})
}

// eachFlushMode runs fn as a subtest under each flush mode, with a store
// of testOptions in a directory of its own.
func eachFlushMode(t *testing.T, fn func(t *testing.T, s *Store)) {
	t.Helper()
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		t.Run(flush.String(), func(t *testing.T) {
			s, err := Open(testOptions(t.TempDir(), flush), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			fn(t, s)
		})
	}
}

// A put served where work can wait for after the answer (afterreply)
// leaves its dispatch there: the records reach their queue when the
// server runs the queued work.
func TestPutDefersDispatchAfterReply(t *testing.T) {
	s, err := Open(testOptions(t.TempDir(), commitlog.FlushAsync), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var q afterreply.Queue
	ctx := afterreply.NewContext(context.Background(), &q)
	var last PutResult
	for i := range 3 {
		if last, err = s.Put(ctx, newMsg("T", 0, i)); err != nil {
			t.Fatal(err)
		}
	}
	q.Run()
	if err := waitDispatched(s, last.End(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, maxOff := s.QueueOffsets("T", 0); maxOff != 3 {
		t.Fatalf("queue holds %d messages, want 3", maxOff)
	}
}

// TestPutBatchMsgIDs: the ids of a batch's records, cut from one string,
// are each record's own offset id, for IPv4 and IPv6 store hosts.
func TestPutBatchMsgIDs(t *testing.T) {
	for _, host := range []string{"10.1.2.3:10911", "[2001:db8::7]:10911"} {
		t.Run(host, func(t *testing.T) {
			o := testOptions(t.TempDir(), commitlog.FlushAsync)
			o.StoreHost = netip.MustParseAddrPort(host)
			s, err := Open(o, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			msgs := make([]*message.Ext, 5)
			for i := range msgs {
				msgs[i] = newMsg("T", 0, i)
			}
			res, err := s.PutBatch(context.Background(), msgs, nil)
			if err != nil || len(res) != len(msgs) {
				t.Fatalf("put: %d results, %v", len(res), err)
			}
			for i, r := range res {
				if want := message.OffsetMsgID(o.StoreHost, r.PhysicalOffset); r.MsgID != want {
					t.Errorf("record %d at %d: id %q, want %q", i, r.PhysicalOffset, r.MsgID, want)
				}
				if got, off, err := message.ParseOffsetMsgID(r.MsgID); err != nil || got != o.StoreHost || off != r.PhysicalOffset {
					t.Errorf("record %d: id %q parses to %v %d %v", i, r.MsgID, got, off, err)
				}
			}
		})
	}
}
