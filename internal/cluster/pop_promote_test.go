package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestPopStateOnPromotedSlave: POP consumption on a master (most messages acknowledged, some left in flight), then the
// master stops and its slave is promoted: the new master hands out no
// acknowledged message again, takes the acks of the messages in flight
// with the old master's handles, and ends with every message acknowledged
// exactly once.
func TestPopStateOnPromotedSlave(t *testing.T) {
	const n, queues = 200, 4
	ctx := context.Background()
	c := Start(t, Options{Broker: fastHA(broker.ReplicationAsync)})
	master := c.Broker(0)
	c.CreateTopic("popha", queues)
	slave := c.StartSlave(0, 1).Broker()
	mc, sc := brokerClient(t, master.Addr()), brokerClient(t, slave.Addr())
	waitTopic(t, sc, "popha")
	caughtUp(t, master, slave)
	for i := range n {
		if _, err := sendOne(mc, "popha", int32(i%queues), fmt.Sprint("pop-", i)); err != nil {
			t.Fatal(err)
		}
	}
	acked := map[string]int{}
	var ackedHandles, leftHandles []string
	leftBody := map[string]string{}
	for handedOut := 0; handedOut < n; {
		got, err := master.Pop(ctx, broker.PopRequest{Group: "g", Topic: "popha", QueueID: -1, MaxMessages: 8,
			Invisible: time.Hour, PollTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("nothing to pop after %d of %d", handedOut, n)
		}
		for _, p := range got {
			handedOut++
			m, err := message.Decode(p.Record)
			if err != nil {
				t.Fatal(err)
			}
			if handedOut%10 == 0 {
				leftHandles = append(leftHandles, p.Handle)
				leftBody[p.Handle] = string(m.Body)
				continue
			}
			if err := master.PopAck(ctx, "g", "popha", p.Handle); err != nil {
				t.Fatal(err)
			}
			acked[string(m.Body)]++
			ackedHandles = append(ackedHandles, p.Handle)
		}
	}
	caughtUp(t, master, slave)
	c.StopBroker(0)
	resp, err := pb.NewBrokerHAClient(dialT(t, slave.Addr())).Promote(ctx, &pb.PromoteRequest{BrokerName: "broker-a"})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("promote: %v %v", err, resp.GetStatus())
	}
	// Nothing is handed out again: every message is acknowledged or in
	// flight.
	if got, err := slave.Pop(ctx, broker.PopRequest{Group: "g", Topic: "popha", QueueID: -1, MaxMessages: 32, Invisible: time.Hour}); err != nil || len(got) != 0 {
		t.Fatalf("the promoted slave handed out %d messages (%v)", len(got), err)
	}
	for _, h := range ackedHandles[:20] {
		var ce *errcode.Error
		if err := slave.PopAck(ctx, "g", "popha", h); !errors.As(err, &ce) || ce.Code != errcode.InvalidReceiptHandle {
			t.Fatalf("ack again of an acknowledged message: %v", err)
		}
	}
	for _, h := range leftHandles {
		if err := slave.PopAck(ctx, "g", "popha", h); err != nil {
			t.Fatalf("ack with the old master's handle: %v", err)
		}
		acked[leftBody[h]]++
	}
	if len(acked) != n {
		t.Fatalf("%d messages acknowledged, want %d", len(acked), n)
	}
	for b, k := range acked {
		if k != 1 {
			t.Fatalf("%s acknowledged %d times", b, k)
		}
	}
	for _, st := range slave.PopStats("g", "popha") {
		if st.InFlight != 0 || st.AckedOffset != n/queues {
			t.Fatalf("stats %+v", st)
		}
	}
}
