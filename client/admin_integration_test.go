package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// TestAdminTopicConfig: TopicConfig gives back, per broker group, what
// CreateTopic and UpdateTopic set, the order flag included.
func TestAdminTopicConfig(t *testing.T) {
	e := startEnv(t, 1, 2)
	ctx := context.Background()
	a := e.admin
	if err := a.CreateTopic(ctx, TopicSpec{Name: "cfg-ordered", Queues: 3, Order: true}); err != nil {
		t.Fatal(err)
	}
	cfgs, err := a.TopicConfig(ctx, "cfg-ordered")
	if err != nil {
		t.Fatal(err)
	}
	if got := brokerNamesOf(cfgs); !slices.Equal(got, []string{"broker-a", "broker-b"}) {
		t.Fatalf("configurations on %v, want broker-a and broker-b: %+v", got, cfgs)
	}
	for _, c := range cfgs {
		if c.Name != "cfg-ordered" || c.ReadQueues != 3 || c.WriteQueues != 3 || c.Perm != PermReadWrite || !c.Order {
			t.Fatalf("configuration after create: %+v", c)
		}
	}

	if err := a.UpdateTopic(ctx, TopicSpec{Name: "cfg-ordered", Queues: 5, Perm: PermRead}); err != nil {
		t.Fatal(err)
	}
	cfgs, err = a.TopicConfig(ctx, "cfg-ordered")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfgs {
		if c.ReadQueues != 5 || c.WriteQueues != 5 || c.Perm != PermRead || c.Order {
			t.Fatalf("configuration after update: %+v", c)
		}
	}

	if err := a.CreateTopic(ctx, TopicSpec{Name: "cfg-only-b", Queues: 1, BrokerNames: []string{"broker-b"}}); err != nil {
		t.Fatal(err)
	}
	cfgs, err = a.TopicConfig(ctx, "cfg-only-b")
	if err != nil || len(cfgs) != 1 || cfgs[0].BrokerName != "broker-b" || cfgs[0].ReadQueues != 1 || cfgs[0].Order {
		t.Fatalf("configuration of a topic on broker-b only: %+v, %v", cfgs, err)
	}

	if _, err := a.TopicConfig(ctx, "cfg-missing"); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("configuration of a missing topic: %v", err)
	}
	if _, err := a.TopicConfig(ctx, "bad topic"); !errors.Is(err, ErrIllegalTopic) {
		t.Fatalf("configuration of an illegal name: %v", err)
	}
}

func brokerNamesOf(cfgs []TopicConfig) []string {
	var out []string
	for _, c := range cfgs {
		out = append(out, c.BrokerName)
	}
	return out
}

// TestAdminViewMessageAt: the message at a queue offset is the one sent
// there, on whichever broker group holds it; an offset past the queue's end
// is a coded not-found error naming the queue's offsets.
func TestAdminViewMessageAt(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	ctx := context.Background()
	a := e.admin
	p := e.producer()
	results := e.sendN(p, topic, 12, func(i int) *Message {
		return &Message{Topic: topic, Tag: fmt.Sprint("tag", i%3), Keys: []string{fmt.Sprint("key", i)},
			Body: []byte(fmt.Sprint("body ", i)), Properties: map[string]string{"n": fmt.Sprint(i)}}
	})
	brokers := map[string]bool{}
	for i, r := range results {
		mq := r.Queue(topic)
		brokers[mq.BrokerName] = true
		var m *MessageExt
		// Queues are built asynchronously from the CommitLog: poll.
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("message %d at %s offset %d", i, mq, r.QueueOffset), func() error {
			var err error
			m, err = a.ViewMessageAt(ctx, mq, r.QueueOffset)
			return err
		})
		if m.OffsetMsgID != r.OffsetMsgID || m.MsgID != r.MsgID || m.Queue() != mq || m.QueueOffset != r.QueueOffset ||
			m.CommitLogOffset != r.CommitLogOffset {
			t.Fatalf("message %d: got %s (%s) at %s offset %d, want %s (%s) at %s offset %d", i, m.OffsetMsgID, m.MsgID, m.Queue(),
				m.QueueOffset, r.OffsetMsgID, r.MsgID, mq, r.QueueOffset)
		}
		if string(m.Body) != fmt.Sprint("body ", i) || m.Tag != fmt.Sprint("tag", i%3) || !slices.Equal(m.Keys, []string{fmt.Sprint("key", i)}) ||
			m.Properties["n"] != fmt.Sprint(i) || m.StoreTimestamp.IsZero() || m.StoreHost == "" {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	if len(brokers) != 2 {
		t.Fatalf("messages went to %v only; the test wants both broker groups", slices.Collect(maps.Keys(brokers)))
	}

	// Past the end of a queue: a coded error that says what the queue has.
	qs, err := a.QueueStatus(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		_, err := a.ViewMessageAt(ctx, q.Queue, q.MaxOffset)
		if !errors.Is(err, ErrQueryNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("has no message at offset %d", q.MaxOffset)) {
			t.Fatalf("%s at its max offset %d: %v", q.Queue, q.MaxOffset, err)
		}
		if q.MaxOffset > 0 && !strings.Contains(err.Error(), fmt.Sprintf("its offsets are %d..%d", q.MinOffset, q.MaxOffset-1)) {
			t.Fatalf("%s at its max offset %d: %v", q.Queue, q.MaxOffset, err)
		}
		if _, err := a.ViewMessageAt(ctx, q.Queue, q.MaxOffset+100); !errors.Is(err, ErrQueryNotFound) {
			t.Fatalf("%s far past its end: %v", q.Queue, err)
		}
	}

	mq := results[0].Queue(topic)
	for _, c := range []struct {
		mq     MessageQueue
		offset int64
		want   error
	}{
		{mq, -1, ErrInvalidParameter},
		{MessageQueue{Topic: topic, BrokerName: "broker-z", QueueID: 0}, 0, ErrBrokerNotExist},
		{MessageQueue{Topic: topic, BrokerName: mq.BrokerName, QueueID: 7}, 0, ErrInvalidParameter},
		{MessageQueue{Topic: "no-such-topic", BrokerName: mq.BrokerName}, 0, ErrTopicNotExist},
		{MessageQueue{Topic: "bad topic", BrokerName: mq.BrokerName}, 0, ErrIllegalTopic},
	} {
		if _, err := a.ViewMessageAt(ctx, c.mq, c.offset); !errors.Is(err, c.want) {
			t.Fatalf("%s at %d: %v, want %v", c.mq, c.offset, err, c.want)
		}
	}
}

// fastReplication shortens the replication timings for in-process tests.
func fastReplication(o *broker.Options) {
	o.Replication.HeartbeatInterval = 100 * time.Millisecond
	o.Replication.Timeout = time.Second
	o.Replication.MetadataSyncInterval = 100 * time.Millisecond
}

// TestAdminReplicationStatusAndPromote: ReplicationStatus shows a master
// with its in-sync slave and the slave replicating it; Promote refuses a
// master and a wrong group, and once the master is gone makes
// the slave the master with the next epoch, holding what was replicated.
func TestAdminReplicationStatusAndPromote(t *testing.T) {
	e := startEnvWith(t, cluster.Options{Broker: fastReplication})
	topic := e.topic(2)
	master := e.c.Broker(0).Addr()
	slave := e.c.StartSlave(0, 1).Broker().Addr()
	ctx := context.Background()
	a := e.admin
	results := e.sendN(e.producer(), topic, 10, nil)

	var ms, ss *ReplicationStatus
	testutil.WaitFor(t, 30*time.Second, "the slave in sync", func() error {
		var err error
		if ms, err = a.ReplicationStatus(ctx, master); err != nil {
			return err
		}
		if ms.Role != "MASTER" || ms.InSyncSlaves != 1 || len(ms.Slaves) != 1 || !ms.Slaves[0].InSync || ms.Slaves[0].BrokerID != 1 ||
			!ms.Slaves[0].Connected || ms.Slaves[0].AckOffset != ms.CommitLogMaxOffset || ms.CommitLogMaxOffset == 0 {
			return fmt.Errorf("master %+v", ms)
		}
		if ss, err = a.ReplicationStatus(ctx, slave); err != nil {
			return err
		}
		if ss.Role != "SLAVE" || ss.MasterAddr != master || ss.State != "REPLICATING" || ss.LagBytes != 0 ||
			ss.CommitLogMaxOffset != ms.CommitLogMaxOffset || ss.LastMetadataSync.IsZero() {
			return fmt.Errorf("slave %+v", ss)
		}
		return nil
	})
	if ms.Addr != master || ms.Mode != broker.ReplicationAsync || ms.HAAddr == "" || ss.Epoch != ms.Epoch || ss.MasterHAAddr != ms.HAAddr ||
		ms.Slaves[0].LastHeard.IsZero() || ms.Slaves[0].ConnectedAt.IsZero() {
		t.Fatalf("master %+v, slave %+v", ms, ss)
	}

	// Refused, and nothing changes: a master, a wrong group.
	for _, c := range []struct {
		addr, name string
		epoch      int64
		want       string
	}{
		{master, "", 0, "already the master"},
		{slave, "broker-z", 0, `belongs to "broker-a", not "broker-z"`},
	} {
		_, err := a.Promote(ctx, c.addr, c.name, c.epoch)
		if !errors.Is(err, ErrInvalidParameter) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("promote %s (group %q, epoch %d): %v, want %q", c.addr, c.name, c.epoch, err, c.want)
		}
	}
	if _, err := a.Promote(ctx, slave, "", -1); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("promote with a negative epoch: %v", err)
	}
	if st, err := a.ReplicationStatus(ctx, slave); err != nil || st.Role != "SLAVE" || st.Epoch != ss.Epoch {
		t.Fatalf("slave after refused promotions: %+v, %v", st, err)
	}

	e.c.StopBroker(0)
	pr, err := a.Promote(ctx, slave, "broker-a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Epoch != ss.Epoch+1 || pr.PreviousBrokerID != 1 || pr.CommitLogMaxOffset != ss.CommitLogMaxOffset || !pr.Registered {
		t.Fatalf("promote: %+v (slave before: %+v)", pr, ss)
	}
	st, err := a.ReplicationStatus(ctx, slave)
	if err != nil || st.Role != "MASTER" || st.Epoch != pr.Epoch || st.MasterAddr != "" {
		t.Fatalf("status after the promotion: %+v, %v", st, err)
	}
	if _, err := a.Promote(ctx, slave, "", 0); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("second promotion: %v", err)
	}
	// The NameServers route the group to the new master, which has every
	// message the old one stored.
	testutil.WaitFor(t, 30*time.Second, "route to the new master", func() error {
		r, err := a.Route(ctx, topic)
		if err != nil {
			return err
		}
		if len(r.Brokers) != 1 || r.Brokers[0].MasterAddr() != slave {
			return fmt.Errorf("route %+v", r.Brokers)
		}
		return nil
	})
	for i, r := range results {
		m, err := a.ViewMessageAt(ctx, r.Queue(topic), r.QueueOffset)
		if err != nil || m.MsgID != r.MsgID || string(m.Body) != fmt.Sprint("m", i) || m.StoreHost == "" {
			t.Fatalf("message %d on the new master: %+v, %v", i, m, err)
		}
	}
}
