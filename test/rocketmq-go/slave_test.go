package rocketmqgo_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestSlaveReadsMasterDown: messages stored while a push consumer is
// suspended are read from the slave once the master is down (the Go client
// falls back to another address of the broker group when the NameServer's
// route no longer lists the master), and the consumer goes on with the
// master once it is back; nothing is lost or repeated.
func TestSlaveReadsMasterDown(t *testing.T) {
	t.Parallel()
	c := privateCluster(t, layout{Name: "master-slave", Brokers: []string{"broker-a"}, Slaves: true, FastEviction: true})
	topic := c.NewTopic(t, "slave", 2)
	time.Sleep(4 * time.Second) // the slave fetches topics every 3 s

	col := &collector{}
	cStart := time.Now()
	pc := startPushConsumer(t, c, uniq("slaveg"), topic, "*", col.listener("push"))
	p := newProducer(t, c, producer.WithQueueSelector(producer.NewManualQueueSelector()))
	var all []sent
	perQueue := func(tag string) {
		var msgs []*primitive.Message
		for q := range 2 {
			m := testMessage(topic, len(all)+q, tag)
			m.Queue = &primitive.MessageQueue{Topic: topic, BrokerName: "broker-a", QueueId: q}
			msgs = append(msgs, m)
		}
		all = append(all, sendAllRetry(t, c, p, msgs)...)
	}
	// The consumer pulls both queues; suspended, it stops once its held
	// pulls have returned (with one message each).
	perQueue("probe")
	col.waitDistinct(t, len(all), 30*time.Second)
	pc.Suspend()
	perQueue("drain")
	col.waitDistinct(t, len(all), 30*time.Second)
	time.Sleep(1500 * time.Millisecond)
	before := len(all)
	for range 10 {
		perQueue("while-suspended")
	}
	time.Sleep(2 * time.Second) // replicated to the slave
	if n := col.distinct(); n != before {
		t.Fatalf("the suspended consumer got %d messages, want %d", n, before)
	}

	c.Brokers[0].Proc.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !waitFor(20*time.Second, func() bool {
		r, err := c.Admin.Route(ctx, topic)
		if err != nil || len(r.Brokers) != 1 {
			return false
		}
		_, master := r.Brokers[0].Addrs[0]
		return !master
	}) {
		t.Fatalf("the NameServer still routes the dead master")
	}
	resumed := time.Now()
	pc.Resume()
	// The client refreshes its routes every 30 s.
	col.waitDistinct(t, len(all), 60*time.Second)
	t.Logf("the %d messages stored while suspended read from the slave %v after the resume", len(all)-before,
		time.Since(resumed).Round(100*time.Millisecond))

	c.RestartBroker(t, 0, false)
	waitPastRebalance(cStart) // the Go client's first rebalance after a restart: TestConsumerKeepsQueuesAcrossBrokerRestart
	for range 5 {
		perQueue("after")
	}
	col.waitDistinct(t, len(all), 60*time.Second)
	time.Sleep(time.Second)
	checkOnce(t, c, "consumer", col, all)
}
