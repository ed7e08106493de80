package cluster

import (
	"context"
	"fmt"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestDedupAcrossPromotion: a producer's retry of a send the old master
// stored, arriving at the slave promoted in its place, is answered with
// the stored copy and not stored again: the new master looks up the ids of
// the last minutes in the index it built from the replicated log.
func TestDedupAcrossPromotion(t *testing.T) {
	c := Start(t, Options{Broker: fastHA(broker.ReplicationAsync)})
	old := c.Broker(0)
	c.CreateTopic("dp", 1)
	slave := c.StartSlave(0, 1).Broker()
	oc, sc := brokerClient(t, old.Addr()), brokerClient(t, slave.Addr())
	send := func(bc pb.BrokerClient, id string) *pb.SendResult {
		t.Helper()
		resp, err := bc.Send(context.Background(), &pb.SendRequest{Messages: []*pb.Message{{Topic: "dp", Body: []byte(id),
			Properties: map[string]string{message.PropertyUniqueKey: id}}}})
		if err != nil || wire.FromStatus(resp.Status) != nil {
			t.Fatalf("send %s: %v %v", id, err, resp.GetStatus())
		}
		return resp.Results[0]
	}
	var firsts []*pb.SendResult
	for i := range 30 {
		firsts = append(firsts, send(oc, fmt.Sprint("ID-", i)))
	}
	caughtUp(t, old, slave)
	waitTopic(t, sc, "dp")
	c.StopBroker(0)
	conn := dialT(t, slave.Addr())
	resp, err := pb.NewBrokerHAClient(conn).Promote(context.Background(), &pb.PromoteRequest{BrokerName: "broker-a"})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("promote: %v %v", err, resp.GetStatus())
	}
	for i, first := range firsts {
		again := send(sc, fmt.Sprint("ID-", i))
		if again.CommitLogOffset != first.CommitLogOffset || again.QueueOffset != first.QueueOffset || again.MsgId != first.MsgId {
			t.Fatalf("retry of ID-%d on the new master: %+v, want the old master's %+v", i, again, first)
		}
	}
	fresh := send(sc, "ID-new")
	if fresh.QueueOffset != 30 {
		t.Fatalf("a new message on the new master went to offset %d, want 30 (something was stored twice)", fresh.QueueOffset)
	}
	if st := slave.DedupStats(); st.Hits != 30 {
		t.Fatalf("new master's window: %+v; want 30 hits", st)
	}
}
