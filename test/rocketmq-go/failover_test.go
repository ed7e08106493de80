package rocketmqgo_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestBrokerGroupDown: with two broker groups, one killed (-9), producers go
// on through the other and the consumer keeps consuming it; when the group
// is back, it serves again, and nothing is lost or consumed twice.
func TestBrokerGroupDown(t *testing.T) {
	t.Parallel()
	c := privateCluster(t, twoGroups)
	topic := c.NewTopic(t, "down", 4)
	col := &collector{}
	cStart := time.Now()
	startPushConsumer(t, c, uniq("downg"), topic, "*", col.listener("push"))
	p := newProducer(t, c)
	var all []sent
	round := 0
	send := func(n int) []sent {
		round++
		var msgs []*primitive.Message
		for i := range n {
			msgs = append(msgs, testMessage(topic, round*100+i, fmt.Sprintf("r%d", round)))
		}
		ss := sendAllRetry(t, c, p, msgs)
		all = append(all, ss...)
		return ss
	}
	perBroker := func(ss []sent) map[string]int {
		m := map[string]int{}
		for _, s := range ss {
			m[s.res.MessageQueue.BrokerName]++
		}
		return m
	}

	r1 := send(40)
	col.waitDistinct(t, len(all), 30*time.Second)
	t.Logf("both up: %v", perBroker(r1))

	c.Brokers[1].Proc.Kill()
	r2 := send(40)
	if n := perBroker(r2)["broker-b"]; n != 0 {
		t.Errorf("%d sends stored on the dead broker-b", n)
	}
	col.waitDistinct(t, len(all), 30*time.Second)
	t.Logf("broker-b down: %v", perBroker(r2))

	c.RestartBroker(t, 1, false)
	waitPastRebalance(cStart) // the Go client's first rebalance after a restart: TestConsumerKeepsQueuesAcrossBrokerRestart
	// The producer avoids broker-b for a while after its failures; send
	// until broker-b takes messages again.
	var r3 []sent
	if !waitFor(60*time.Second, func() bool {
		r3 = append(r3, send(10)...)
		return perBroker(r3)["broker-b"] > 0
	}) {
		t.Errorf("no send reached broker-b within 60 s of its restart: %v", perBroker(r3))
	}
	col.waitDistinct(t, len(all), 60*time.Second)
	t.Logf("broker-b back: %v", perBroker(r3))
	time.Sleep(time.Second)
	checkOnce(t, c, "consumer", col, all)
}
