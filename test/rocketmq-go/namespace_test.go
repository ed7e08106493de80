package rocketmqgo_test

import (
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestNamespace: clients with WithNamespace(ns) name topics and groups
// "ns%name" on the wire; the brokers take such names as any other.
func TestNamespace(t *testing.T) {
	forLayouts(t, func(t *testing.T, c *cluster) {
		ns := uniq("ns")
		topic := "orders"
		c.CreateTopic(t, ns+"%"+topic, 2)
		p := newProducer(t, c, producer.WithNamespace(ns))
		var msgs []*primitive.Message
		for i := range 6 {
			msgs = append(msgs, testMessage(topic, i, "nsd"))
		}
		ss := sendAll(t, c, p, msgs)
		for _, s := range ss {
			if s.res.MessageQueue.Topic != topic && s.res.MessageQueue.Topic != ns+"%"+topic {
				t.Errorf("sent to %q", s.res.MessageQueue.Topic)
			}
		}
		if n := storedCount(t, c, ns+"%"+topic); n < len(ss) {
			waitFor(5*time.Second, func() bool { return storedCount(t, c, ns+"%"+topic) >= len(ss) })
		}
		if n := storedCount(t, c, ns+"%"+topic); n != len(ss) {
			t.Errorf("%s%%%s holds %d messages, want %d", ns, topic, n, len(ss))
		}
		col := &collector{}
		group := uniq("nsg")
		startPushConsumer(t, c, group, topic, "*", col.listener("push"), consumer.WithNamespace(ns))
		col.waitDistinct(t, len(ss), 30*time.Second)
		got := col.byMsgID()
		for _, s := range ss {
			d := got[s.res.MsgID]
			if len(d) != 1 {
				t.Errorf("%s consumed %d times", s.res.MsgID, len(d))
				continue
			}
			// The Go client does not take the namespace off consumed
			// messages (the Java client does).
			if d[0].msg.Topic != ns+"%"+topic || string(d[0].msg.Body) != string(s.msg.Body) {
				t.Errorf("%s: consumed as topic %q body %q", s.res.MsgID, d[0].msg.Topic, d[0].msg.Body)
			}
		}
		if m := groupMembers(c, ns+"%"+group); len(m) != 1 {
			t.Errorf("group %s%%%s has members %v, want one", ns, group, m)
		}
	})
}
