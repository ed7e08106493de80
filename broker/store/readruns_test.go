package store

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// TestGetMessagesReadsRuns: a queue whose records lie in runs one after
// another in the log (batches, here interleaved with another queue's) is
// read in runs with one pread each; every record returned is the one
// stored at its unit, byte for byte, capped so that appending to it
// cannot reach its neighbour, with and without a tag filter.
func TestGetMessagesReadsRuns(t *testing.T) {
	opts := testOptions(t.TempDir(), commitlog.FlushAsync)
	opts.CommitLog.SegmentSize = 4 << 20
	opts.ConsumeQueue.UnitsPerFile = 1000
	s, err := Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var last PutResult
	var offs []int64 // queue 0's CommitLog offsets, by queue offset
	for b := 0; b < 12; b++ {
		for _, q := range []int32{0, 1} {
			batch := make([]*message.Ext, 40)
			for i := range batch {
				batch[i] = newMsg("T", q, b*100+i)
				batch[i].Body = bytes.Repeat([]byte{byte('a' + i%26)}, 300+i) // 40 records ≈ 20 KiB a run
				batch[i].SetProperty(message.PropertyTags, []string{"even", "odd"}[(i/10)%2])
			}
			res, err := s.PutBatch(ctx, batch, nil)
			if err != nil {
				t.Fatal(err)
			}
			if q == 0 {
				for _, r := range res {
					offs = append(offs, r.PhysicalOffset)
				}
			}
			last = res[len(res)-1]
		}
	}
	if err := s.WaitDispatched(ctx, last.End()); err != nil {
		t.Fatal(err)
	}
	check := func(name string, filter func(int64) bool, want func(qo int) bool) {
		t.Helper()
		got := 0
		for next := int64(0); ; {
			res, err := s.GetMessages("T", 0, next, 64, 1<<20, filter)
			if err != nil {
				t.Fatalf("%s: get at %d: %v", name, next, err)
			}
			if res.Status != Found {
				break
			}
			for i, rec := range res.Records {
				qo := res.QueueOffsets[i]
				stored, err := s.ReadRecord(offs[qo])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rec, stored) {
					t.Fatalf("%s: the record at queue offset %d differs from the stored one", name, qo)
				}
				if cap(rec) != len(rec) {
					t.Fatalf("%s: record %d has capacity %d beyond its %d bytes", name, qo, cap(rec), len(rec))
				}
				if !want(int(qo)) {
					t.Fatalf("%s: queue offset %d should have been filtered out", name, qo)
				}
				got++
			}
			next = res.NextOffset
		}
		n := 0
		for qo := range offs {
			if want(qo) {
				n++
			}
		}
		if got != n {
			t.Fatalf("%s: read %d records, want %d", name, got, n)
		}
	}
	check("all", nil, func(int) bool { return true })
	even := message.TagsHash("even")
	check("even tags", func(tc int64) bool { return tc == even }, func(qo int) bool { return (qo%40/10)%2 == 0 })
}

// TestGetMessagesAsksFilterOncePerUnit: the filter is asked about each
// unit at most once and in queue order, as the delay levels' filter needs
// (it stops for good at the first message not yet due): a filter that
// refuses everything from the 30th unit on gets exactly the first 29
// records, and saw no unit twice.
func TestGetMessagesAsksFilterOncePerUnit(t *testing.T) {
	s, err := Open(testOptions(t.TempDir(), commitlog.FlushAsync), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	batch := make([]*message.Ext, 60)
	for i := range batch {
		batch[i] = newMsg("T", 0, i)
		batch[i].Body = bytes.Repeat([]byte{'x'}, 400) // one run of about 30 KiB
		batch[i].SetProperty(message.PropertyTags, "t"+strconv.Itoa(i))
	}
	res, err := s.PutBatch(ctx, batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDispatched(ctx, res[len(res)-1].End()); err != nil {
		t.Fatal(err)
	}
	order := map[int64]int{}
	for i := range batch {
		order[message.TagsHash("t"+strconv.Itoa(i))] = i
	}
	var seen []int
	stopped := false
	filter := func(tc int64) bool {
		i := order[tc]
		seen = append(seen, i)
		if stopped || i >= 29 {
			stopped = true
			return false
		}
		return true
	}
	got, err := s.GetMessages("T", 0, 0, 64, 1<<20, filter)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 29 {
		t.Fatalf("%d records, want the 29 before the stop", len(got.Records))
	}
	for k, i := range seen {
		if i != k {
			t.Fatalf("the filter saw units %v: not each once, in order", seen)
		}
	}
}
