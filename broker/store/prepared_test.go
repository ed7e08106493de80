package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// TestPutPreparedRestoresParkedMessages: messages parked in the timer topic
// are read back as records, restored without decoding and stored with
// PutPrepared; their queue, index, ids and checksums are those of a
// PutBatch of the restored messages, and they survive a reopen (the
// recovery verifies every record).
func TestPutPreparedRestoresParkedMessages(t *testing.T) {
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		t.Run(flush.String(), func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(testOptions(dir, flush), nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			const n = 50
			var parked []*message.Ext
			for i := range n {
				m := newMsg("real", int32(i%3), i)
				m.SetProperty(message.PropertyUniqueKey, fmt.Sprintf("UNIQ%04d", i))
				m.SetProperty(message.PropertyTimerDelaySec, "1")
				message.Reroute(m, message.TimerTopic, 0)
				parked = append(parked, m)
			}
			res, err := s.PutBatch(ctx, parked, nil)
			if err != nil {
				t.Fatal(err)
			}
			locs := make([]int64, n)
			for i, r := range res {
				locs[i] = r.PhysicalOffset
			}
			drop := []string{message.PropertyTimerDelaySec}
			recs := make([]Prepared, n)
			var buf []byte
			seen := 0
			s.ReadRecords(locs, func(i int, rec []byte, err error) {
				if err != nil {
					t.Fatal(err)
				}
				seen++
				start := len(buf)
				var r message.Restored
				buf, r, err = message.RestoreRecord(buf, rec, s.StoreHost(), drop, message.PropertyTimerOutMS, "42")
				if err != nil {
					t.Fatal(err)
				}
				recs[i] = Prepared{Record: buf[start:len(buf):len(buf)], Topic: r.Topic, QueueID: r.QueueID,
					SysFlag: r.SysFlag, Keys: r.Keys, UniqueKey: r.UniqueKey}
			})
			if seen != n {
				t.Fatalf("read %d records", seen)
			}
			out, err := s.PutPrepared(ctx, recs, nil)
			if err != nil || len(out) != n {
				t.Fatalf("put prepared: %d results, %v", len(out), err)
			}
			if err := s.WaitDispatched(ctx, out[n-1].End()); err != nil {
				t.Fatal(err)
			}
			check := func() {
				t.Helper()
				for q := int32(0); q < 3; q++ {
					got, err := s.GetMessages("real", q, 0, 100, 1<<20, nil)
					if err != nil || got.Status != Found {
						t.Fatalf("queue %d: %v %v", q, got.Status, err)
					}
					for k, rec := range got.Records {
						if err := message.Verify(rec); err != nil {
							t.Fatalf("queue %d offset %d: %v", q, k, err)
						}
						m, _ := message.Decode(rec)
						i := int(q) + 3*k
						if string(m.Body) != fmt.Sprintf("body-%d", i) || m.QueueOffset != int64(k) || m.QueueID != q ||
							m.Properties[message.PropertyRealTopic] != "" || m.Properties[message.PropertyTimerDelaySec] != "" ||
							m.Properties[message.PropertyTimerOutMS] != "42" || m.StoreHost != s.StoreHost() {
							t.Fatalf("queue %d offset %d: %+v", q, k, m)
						}
					}
				}
				got, err := s.QueryByKey("real", "UNIQ0042", 0, time.Now().UnixMilli()+1000, 4)
				if err != nil || len(got) != 1 || string(got[0].Body) != "body-42" {
					t.Fatalf("by unique key: %v %v", got, err)
				}
				got, err = s.QueryByKey("real", "key-7", 0, time.Now().UnixMilli()+1000, 4)
				if err != nil || len(got) != 1 || string(got[0].Body) != "body-7" {
					t.Fatalf("by key: %v %v", got, err)
				}
				m, err := s.LookupByMsgID(out[5].MsgID)
				if err != nil || string(m.Body) != "body-5" {
					t.Fatalf("by id: %v %v", m, err)
				}
			}
			check()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(testOptions(dir, flush), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			check()
		})
	}
}

func TestPutPreparedRefusesBadRecords(t *testing.T) {
	s, err := Open(testOptions(t.TempDir(), commitlog.FlushAsync), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec, err := message.EncodeUnsealed(nil, &message.Ext{Message: message.Message{Topic: "T", Body: []byte("x")}, StoreHost: s.StoreHost()})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Prepared{
		"torn":        {Record: rec[:len(rec)-1], Topic: "T"},
		"bad topic":   {Record: rec, Topic: "a/b"},
		"bad queue":   {Record: rec, Topic: "T", QueueID: -1},
		"not records": {Record: bytes.Repeat([]byte{1}, 40), Topic: "T"},
	} {
		if _, err := s.PutPrepared(context.Background(), []Prepared{p}, nil); !errors.Is(err, ErrMessageIllegal) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if s.CommitLog().MaxOffset() != 0 {
		t.Fatalf("refused records were appended: log at %d", s.CommitLog().MaxOffset())
	}
}
