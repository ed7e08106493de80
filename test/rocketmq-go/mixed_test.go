package rocketmqgo_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/bolide-mq/bolide/client"
)

// The mixed consumer group of issue 16's "Done when": one Bolide SDK
// consumer and one RocketMQ client consumer in one group on one topic of
// several queues, 20 000 messages (sent by both kinds of producer), one
// member — in a child process — killed with SIGKILL and started again
// during the run. Every message must be consumed; a message may be
// consumed twice only where the crash makes it unavoidable:
//
//   - crash: the killed member consumed it within its commit interval (plus
//     a margin) before the kill, and another member consumed it again;
//   - handover: the surviving member consumed it within its commit interval
//     before, or while, the restarted member took its queues back (in
//     either order: nothing stops a RocketMQ consumer from starting on a
//     queue its previous owner is still consuming).
//
// Anything else — a duplicate while the membership is stable (the two
// kinds disagreeing about the allocation), one member consuming a message
// twice, a loss — fails.

// mixedMessages is the number of messages of a mixed run (RMQGO_MIXED_N
// overrides it, for a quick run by hand).
func mixedMessages() int {
	if n, err := strconv.Atoi(os.Getenv("RMQGO_MIXED_N")); err == nil && n > 0 {
		return n
	}
	return 20000
}

func TestMixedGroupCrash(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name      string
		l         layout
		childKind string // the member killed; the other kind runs in this process
	}{
		{"kill-rocketmq-member", twoGroups, "rmq"},
		{"kill-sdk-member", oneGroup, "sdk"},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			mixedRun(t, v.l, v.childKind)
		})
	}
}

func mixedRun(t *testing.T, l layout, childKind string) {
	n := mixedMessages()
	c := privateCluster(t, l)
	topic := c.NewTopic(t, "mixed", 8/len(c.Brokers)) // 8 queues in all
	group := uniq("mixedg")

	// The member in this process.
	parent := &memberRecords{}
	parentCommit := sdkCommitInterval
	childCommit := rmqCommitInterval
	if childKind == "rmq" {
		startSDKConsumer(t, c, group, topic, func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				parent.add(sdkRecord(m, "parent"))
			}
			return client.ConsumeSuccess
		}, client.WithCommitInterval(sdkCommitInterval))
	} else {
		parentCommit, childCommit = rmqCommitInterval, sdkCommitInterval
		startPushConsumer(t, c, group, topic, "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				parent.add(rmqRecord(m, "parent"))
			}
			return consumer.ConsumeSuccess, nil
		})
	}
	ch := newChild(t, c, "child", childKind, topic, group, "")
	ch.start(t)
	var cids []string
	if !waitFor(30*time.Second, func() bool { cids = groupMembers(c, group); return len(cids) == 2 }) {
		t.Errorf("the brokers list members %v of group %s, want one SDK and one RocketMQ consumer", cids, group)
	}
	// Both kinds allocate as RocketMQ does: the queues sorted by broker and
	// id, in contiguous blocks, by the position of the client id among the
	// sorted ids (AllocateByAveragely). The child's id is ip@pid.
	childFirst := false
	if len(cids) == 2 {
		sort.Strings(cids)
		childFirst = strings.HasSuffix(cids[0], "@"+strconv.Itoa(ch.pid))
		if !childFirst && !strings.HasSuffix(cids[1], "@"+strconv.Itoa(ch.pid)) {
			t.Errorf("neither member id %v is the child's (pid %d)", cids, ch.pid)
		}
	}
	time.Sleep(2 * time.Second) // both have rebalanced

	// Producers of both kinds, four senders at 1 000 messages/s in all.
	sdkP := newSDKProducer(t, c)
	rmqP := newProducer(t, c)
	const senders, rate = 4, 1000
	var (
		sentN   atomic.Int64
		sendErr atomic.Value
		wg      sync.WaitGroup
	)
	sendStart := time.Now()
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := g; seq < n; seq += senders {
				if d := time.Until(sendStart.Add(time.Duration(seq) * time.Second / rate)); d > 0 {
					time.Sleep(d)
				}
				body := []byte(strconv.Itoa(seq))
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if g%2 == 0 {
						_, err = sdkP.Send(context.Background(), &client.Message{Topic: topic, Body: body, Keys: []string{"m" + string(body)}})
					} else {
						m := primitive.NewMessage(topic, body)
						m.WithKeys([]string{"m" + string(body)})
						_, err = rmqP.SendSync(context.Background(), m)
					}
					if err == nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil {
					sendErr.Store(fmt.Errorf("send %d: %w", seq, err))
					return
				}
				sentN.Add(1)
			}
		}()
	}

	// Kill the child once it has run long enough to have committed (the
	// RocketMQ client commits first 10 s after start) and consumed some.
	if !waitFor(60*time.Second, func() bool {
		return time.Since(ch.started) >= 13*time.Second && len(ch.records()) >= 300
	}) {
		t.Fatalf("the child consumed %d messages in 60 s", len(ch.records()))
	}
	killAt := time.Now()
	ch.kill()
	time.Sleep(2 * time.Second)
	ch.start(t)
	restartAt := time.Now()

	wg.Wait()
	if err, _ := sendErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	sendEnd := time.Now()
	all := func() []record { return append(parent.all(), ch.records()...) }
	distinct := func() int {
		seen := map[string]bool{}
		for _, r := range all() {
			seen[r.body] = true
		}
		return len(seen)
	}
	if !waitFor(120*time.Second, func() bool { return distinct() >= n }) {
		t.Errorf("%d of %d messages consumed 120 s after the last send", distinct(), n)
	}
	time.Sleep(3 * time.Second) // late duplicates show by now
	ch.stop()
	recs := all()

	// Loss.
	bySeq := map[string][]record{}
	for _, r := range recs {
		bySeq[r.body] = append(bySeq[r.body], r)
	}
	missing := 0
	for seq := range n {
		if len(bySeq[strconv.Itoa(seq)]) == 0 {
			if missing < 10 {
				t.Errorf("message %d never consumed", seq)
			}
			missing++
		}
	}

	// Duplicates, classified by the delivery before each extra one.
	wKill := childCommit + 2*time.Second
	wHand := parentCommit + 2*time.Second
	var crash, handover, other int
	for seq, rs := range bySeq {
		sort.Slice(rs, func(i, j int) bool { return rs[i].at.Before(rs[j].at) })
		for i := 1; i < len(rs); i++ {
			prev, next := rs[i-1], rs[i]
			switch {
			case prev.by == next.by:
				other++
				t.Errorf("message %s consumed twice by %s (%v and %v, offsets %d, %d)", seq, prev.by, prev.at.Format("15:04:05.000"), next.at.Format("15:04:05.000"), prev.offset, next.offset)
			case prev.by == "child#1" && !prev.at.Before(killAt.Add(-wKill)) && !next.at.Before(killAt):
				crash++
			case handoverPair(prev.by, next.by) && !prev.at.Before(restartAt.Add(-wHand)) && prev.at.Before(restartAt.Add(20*time.Second)):
				// The survivor's uncommitted messages, or the restarted
				// member starting on a queue the survivor has not yet let
				// go (clustering consumers of RocketMQ hold no lock).
				handover++
			default:
				other++
				if other <= 10 {
					t.Errorf("message %s on %s@%d consumed by %s at %s and again by %s at %s (kill %s, restart %s): not explained by the crash",
						seq, prev.queue, prev.offset, prev.by, prev.at.Format("15:04:05.000"), next.by, next.at.Format("15:04:05.000"),
						killAt.Format("15:04:05.000"), restartAt.Format("15:04:05.000"))
				}
			}
		}
	}

	// While the membership was stable, no queue had two consumers, and
	// both members had queues.
	owners := map[string]map[string]bool{}
	for _, r := range recs {
		if r.at.After(sendStart.Add(3*time.Second)) && r.at.Before(killAt.Add(-time.Second)) {
			if owners[r.queue] == nil {
				owners[r.queue] = map[string]bool{}
			}
			owners[r.queue][r.by] = true
		}
	}
	members := map[string]int{}
	for q, o := range owners {
		if len(o) > 1 {
			t.Errorf("queue %s consumed by %v at once while the group was stable", q, keys(o))
		}
		for m := range o {
			members[m]++
		}
	}
	if members["parent"] == 0 || members["child#1"] == 0 {
		t.Errorf("queues per member while stable: %v (want both members)", members)
	}
	var queues []string // sorted as the allocation sorts them
	for _, b := range c.Brokers {
		for q := range 8 / len(c.Brokers) {
			queues = append(queues, fmt.Sprintf("%s/%d", b.Name, q))
		}
	}
	first, second := "parent", "child#1"
	if childFirst {
		first, second = second, first
	}
	for i, q := range queues {
		want := first
		if i >= len(queues)/2 {
			want = second
		}
		if o := keys(owners[q]); len(o) != 1 || o[0] != want {
			t.Errorf("queue %s consumed by %v while stable, want %s (ids %v, child pid %d)", q, o, want, cids, ch.pid)
		}
	}

	perMember := map[string]int{}
	for _, r := range recs {
		perMember[r.by]++
	}
	t.Logf("mixed group (%s in the child, killed): %d messages sent in %v, %d deliveries %v; queues while stable %v",
		childKind, sentN.Load(), sendEnd.Sub(sendStart).Round(time.Millisecond), len(recs), perMember, members)
	t.Logf("mixed group: %d lost, %d duplicates: %d after the crash (the killed member's last %v), %d at the handover back (the survivor's last %v), %d unexplained",
		missing, len(recs)-len(bySeq), crash, wKill, handover, wHand, other)
}

// handoverPair reports whether two deliveries are by the survivor and the
// restarted member.
func handoverPair(a, b string) bool {
	return (a == "parent" && b == "child#2") || (a == "child#2" && b == "parent")
}
