package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// idMsg is a message with a unique id, as producers send it.
func idMsg(topic string, q int32, id, body string) *pb.Message {
	return &pb.Message{Topic: topic, QueueId: q, Body: []byte(body),
		Properties: map[string]string{message.PropertyUniqueKey: id}}
}

func sendOK(t *testing.T, c pb.BrokerClient, msgs ...*pb.Message) []*pb.SendResult {
	t.Helper()
	resp, err := c.Send(context.Background(), &pb.SendRequest{Messages: msgs})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("send: %v %v", err, resp.GetStatus())
	}
	return resp.Results
}

// queueSize is a queue's max offset once dispatch has caught up with the
// log.
func queueSize(t *testing.T, c pb.BrokerClient, topic string, q int32) int64 {
	t.Helper()
	r, err := c.GetQueueOffsets(context.Background(), &pb.GetQueueOffsetsRequest{Topic: topic, QueueId: q})
	if err != nil {
		t.Fatal(err)
	}
	return r.MaxOffset
}

func sameResult(t *testing.T, what string, got, want *pb.SendResult) {
	t.Helper()
	if got.MsgId != want.MsgId || got.QueueId != want.QueueId || got.QueueOffset != want.QueueOffset ||
		got.CommitLogOffset != want.CommitLogOffset || got.UniqueId != want.UniqueId {
		t.Fatalf("%s: result %+v, want the first copy's %+v", what, got, want)
	}
}

// TestDedupRetryAnsweredWithFirstCopy: a send repeating a unique id within
// the window is answered with the first copy's result, to whichever queue
// it was aimed, and nothing more is stored; another topic, or an id-less
// message, is not affected.
func TestDedupRetryAnsweredWithFirstCopy(t *testing.T) {
	b, c := testBroker(t)
	createTopic(t, c, "orders", 2)
	createTopic(t, c, "audit", 1)
	first := sendOK(t, c, idMsg("orders", 0, "ID-1", "one"))[0]
	again := sendOK(t, c, idMsg("orders", 1, "ID-1", "one, retried to another queue"))[0]
	sameResult(t, "retry", again, first)
	// The same id on another topic is another message.
	if r := sendOK(t, c, idMsg("audit", 0, "ID-1", "audit")); r[0].CommitLogOffset == first.CommitLogOffset {
		t.Fatal("a message of another topic was answered as a duplicate")
	}
	// Messages without ids are never deduplicated.
	plain := msg("orders", 0, "plain", "", "")
	a, z := sendOK(t, c, plain)[0], sendOK(t, c, plain)[0]
	if a.CommitLogOffset == z.CommitLogOffset {
		t.Fatal("two id-less sends were taken for one")
	}
	// A batch repeating an id stores it once; a batch of known ids stores
	// nothing.
	batch := sendOK(t, c, idMsg("orders", 1, "ID-2", "two"), idMsg("orders", 1, "ID-2", "two"), idMsg("orders", 1, "ID-3", "three"))
	sameResult(t, "repeat inside a batch", batch[1], batch[0])
	known := sendOK(t, c, idMsg("orders", 0, "ID-3", "three"), idMsg("orders", 0, "ID-1", "one"))
	sameResult(t, "known id in a batch", known[0], batch[2])
	sameResult(t, "known id in a batch", known[1], first)

	waitQueue(t, c, "orders", 0, 3) // ID-1 and the two plain ones
	waitQueue(t, c, "orders", 1, 2) // ID-2, ID-3
	for q, want := range map[int32]int64{0: 3, 1: 2} {
		if n := queueSize(t, c, "orders", q); n != want {
			t.Errorf("queue %d holds %d messages, want %d", q, n, want)
		}
	}
	if st := b.DedupStats(); st.Hits != 4 || st.Entries != 4 {
		t.Errorf("window stats %+v: want 4 hits, 4 ids", st)
	}
}

// TestDedupTopicWindowOff: a topic whose dedup.window.minutes is 0 stores
// every send.
func TestDedupTopicWindowOff(t *testing.T) {
	_, c := testBroker(t)
	resp, err := c.CreateTopic(context.Background(), &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: "raw",
		ReadQueueNums: 1, WriteQueueNums: 1, Attributes: map[string]string{broker.AttrDedupWindow: "0"}}})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("create topic: %v %v", err, resp.GetStatus())
	}
	a := sendOK(t, c, idMsg("raw", 0, "ID", "x"))[0]
	z := sendOK(t, c, idMsg("raw", 0, "ID", "x"))[0]
	if a.CommitLogOffset == z.CommitLogOffset {
		t.Fatal("a topic with its window off deduplicated a send")
	}
}

// TestDedupSurvivesRestart: after a restart the window is empty, and the
// broker finds the ids of the last minutes in its index instead: a retry
// of a message stored before the restart is not stored again. (A kill -9
// in the middle of a producer's retries: internal/cluster's
// TestDedupAcrossKill.)
func TestDedupSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	start, _ := restartable(t, dir, func(*broker.Options) {})
	_, c, _ := start()
	createTopic(t, c, "orders", 1)
	var firsts []*pb.SendResult
	for i := range 20 {
		firsts = append(firsts, sendOK(t, c, idMsg("orders", 0, fmt.Sprint("ID-", i), fmt.Sprint("body ", i)))[0])
	}
	waitQueue(t, c, "orders", 0, 20)
	b, c, _ := start()
	if st := b.DedupStats(); st.Complete || st.Entries != 0 {
		t.Fatalf("a restarted broker's window: %+v; want empty and not complete", st)
	}
	for i, first := range firsts {
		again := sendOK(t, c, idMsg("orders", 0, fmt.Sprint("ID-", i), fmt.Sprint("body ", i)))[0]
		sameResult(t, fmt.Sprint("retry of ID-", i, " after the restart"), again, first)
	}
	fresh := sendOK(t, c, idMsg("orders", 0, "ID-new", "new"))[0]
	waitQueue(t, c, "orders", 0, 21)
	if n := queueSize(t, c, "orders", 0); n != 21 || fresh.QueueOffset != 20 {
		t.Fatalf("queue holds %d messages (new one at %d); want 21 (at 20)", n, fresh.QueueOffset)
	}
	if st := b.DedupStats(); st.Hits != 20 {
		t.Fatalf("window stats %+v: want 20 hits found through the index", st)
	}
}

// TestDedupConcurrentOverlappingBatches: batches sent at once that share
// ids (in different orders, mixed with id-less messages) store each id
// once, and every send of an id is answered with that one copy.
func TestDedupConcurrentOverlappingBatches(t *testing.T) {
	_, c := testBroker(t)
	createTopic(t, c, "orders", 1)
	const senders, ids = 8, 40
	results := make([][]*pb.SendResult, senders)
	errs := make(chan error, senders)
	for s := range senders {
		go func() {
			var batch []*pb.Message
			for n := range ids {
				id := (n*7 + s*3) % ids // each sender its own order
				batch = append(batch, idMsg("orders", 0, fmt.Sprintf("ID-%d", id), fmt.Sprintf("m%d", id)))
				if n%10 == 0 {
					batch = append(batch, msg("orders", 0, "plain", "", ""))
				}
			}
			resp, err := c.Send(context.Background(), &pb.SendRequest{Messages: batch})
			if err == nil {
				err = wire.FromStatus(resp.Status)
			}
			if err == nil {
				results[s] = resp.Results
			}
			errs <- err
		}()
	}
	for range senders {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	byID := map[string]*pb.SendResult{}
	plain := map[int64]bool{}
	for _, rs := range results {
		for _, r := range rs {
			if !strings.HasPrefix(r.UniqueId, "ID-") {
				if plain[r.CommitLogOffset] {
					t.Fatalf("two id-less messages answered with one copy at %d", r.CommitLogOffset)
				}
				plain[r.CommitLogOffset] = true
				continue
			}
			if first, ok := byID[r.UniqueId]; ok {
				sameResult(t, r.UniqueId, r, first)
			} else {
				byID[r.UniqueId] = r
			}
		}
	}
	if len(byID) != ids {
		t.Fatalf("%d distinct ids answered, want %d", len(byID), ids)
	}
	want := int64(ids + len(plain))
	waitQueue(t, c, "orders", 0, want)
	if n := queueSize(t, c, "orders", 0); n != want {
		t.Fatalf("%d messages stored, want %d (each id once and %d id-less)", n, want, len(plain))
	}
}
