package broker_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/nameserver"
)

func startNameServer(t *testing.T) *nameserver.Server {
	t.Helper()
	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = nameserver.GossipOff
	ns, err := nameserver.New(no, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	return ns
}

// routed reports nil when the NameServer routes topic to broker-a with
// queues queues (0: not at all).
func routed(ns *nameserver.Server, topic string, queues int32) error {
	rt, err := ns.Routes().Route(topic)
	if queues == 0 {
		if err == nil {
			return fmt.Errorf("%s still routed", topic)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if len(rt.Queues) != 1 || rt.Queues[0].BrokerName != "broker-a" || rt.Queues[0].WriteQueues != queues {
		return fmt.Errorf("route of %s: %+v", topic, rt.Queues)
	}
	return nil
}

// TestTopicDeltaRegistration: once a NameServer holds the broker's table,
// topic changes reach it as deltas (new topics, updates, deletions), and
// the NameServer's view matches the broker's table; when the NameServer
// has lost the broker (as after its restart) the next delta is stale and
// the whole table is registered again; a topic whose routes were deleted
// on the NameServer comes back with the broker's next change of its table.
func TestTopicDeltaRegistration(t *testing.T) {
	ns := startNameServer(t)
	b := startBroker(t, func(o *broker.Options) {
		o.BrokerName = "broker-a"
		o.NameServers = []string{ns.Addr()}
		o.RegisterInterval = 50 * time.Millisecond
	})
	create := func(name string, queues int32, update bool) {
		t.Helper()
		if err := b.CreateTopic(broker.TopicConfig{Name: name, ReadQueueNums: queues, WriteQueueNums: queues}, update); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(what string, cond func() error) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, what, cond)
	}
	// The first registration (whole) is done; a heartbeat follows as a delta.
	wait("a delta heartbeat", func() error {
		if d, _ := b.RegistrationCounts(); d == 0 {
			return errors.New("no delta sent yet")
		}
		return nil
	})
	for i := range 20 {
		create(fmt.Sprintf("delta-%02d", i), 4, false)
	}
	create("delta-03", 2, true)
	if err := b.DeleteTopic("delta-07"); err != nil {
		t.Fatal(err)
	}
	_, wholesBefore := b.RegistrationCounts()
	wait("the changes routed", func() error {
		for i := range 20 {
			name := fmt.Sprintf("delta-%02d", i)
			q := int32(4)
			switch i {
			case 3:
				q = 2
			case 7:
				q = 0
			}
			if err := routed(ns, name, q); err != nil {
				return err
			}
		}
		return nil
	})
	matches := func() error {
		lb, ok := ns.Routes().Live(b.Addr())
		if !ok {
			return errors.New("broker not registered")
		}
		v := b.TopicDataVersion()
		if lb.DataVersion.Counter != v.Counter || lb.DataVersion.Timestamp != v.Timestamp {
			return fmt.Errorf("name server holds version %+v, broker has %+v", lb.DataVersion, v)
		}
		if n := len(b.TopicConfigs()); lb.TopicCount != n {
			return fmt.Errorf("name server counts %d topics, broker has %d", lb.TopicCount, n)
		}
		return nil
	}
	wait("the name server's view", matches)
	if _, wholes := b.RegistrationCounts(); wholes != wholesBefore {
		t.Fatalf("the changes took %d whole registrations", wholes-wholesBefore)
	}

	// The NameServer loses the broker: the next delta is stale, the whole
	// table brings every route back.
	if ok, err := ns.Routes().Unregister("DefaultCluster", "broker-a", b.Addr(), 0); err != nil || !ok {
		t.Fatalf("unregister: %v %v", ok, err)
	}
	wait("the routes back", func() error {
		if err := routed(ns, "delta-00", 4); err != nil {
			return err
		}
		return routed(ns, "delta-03", 2)
	})
	if _, wholes := b.RegistrationCounts(); wholes == wholesBefore {
		t.Fatal("no whole registration after the name server lost the broker")
	}
	wait("the name server's view", matches)

	// Routes deleted on the NameServer stay deleted through heartbeats and
	// come back with the broker's next change.
	if err := ns.Routes().DeleteTopic("delta-00", ""); err != nil {
		t.Fatal(err)
	}
	d0, _ := b.RegistrationCounts()
	wait("two more heartbeats", func() error {
		if d, _ := b.RegistrationCounts(); d < d0+2 {
			return errors.New("waiting")
		}
		return nil
	})
	if err := routed(ns, "delta-00", 0); err != nil {
		t.Fatal(err)
	}
	create("delta-new", 4, false)
	wait("the deleted route back with the next change", func() error {
		if err := routed(ns, "delta-new", 4); err != nil {
			return err
		}
		return routed(ns, "delta-00", 4)
	})
}
