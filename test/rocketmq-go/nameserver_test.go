package rocketmqgo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestNameServerRestart: the NameServer is killed (-9) and started again.
// Running clients go on with the routes they have; once the brokers have
// registered again, new clients find the topic as before.
func TestNameServerRestart(t *testing.T) {
	t.Parallel()
	c := privateCluster(t, twoGroups)
	topic := c.NewTopic(t, "nsrestart", 2)
	col := &collector{}
	startPushConsumer(t, c, uniq("nsrg"), topic, "*", col.listener("old"))
	p := newProducer(t, c)
	round := 0
	send := func(p rocketmq.Producer) []sent {
		round++
		var msgs []*primitive.Message
		for i := range 10 {
			msgs = append(msgs, testMessage(topic, round*100+i, fmt.Sprintf("r%d", round)))
		}
		return sendAll(t, c, p, msgs)
	}
	all := send(p)
	col.waitDistinct(t, len(all), 30*time.Second)

	c.RestartNameServer(t)
	all = append(all, send(p)...)
	col.waitDistinct(t, len(all), 30*time.Second)

	// The brokers register their topics again.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !waitFor(20*time.Second, func() bool {
		r, err := c.Admin.Route(ctx, topic)
		return err == nil && len(r.Queues) == len(c.Brokers)
	}) {
		t.Fatalf("%s not routed 20 s after the NameServer's restart", topic)
	}
	p2 := newProducer(t, c)
	all = append(all, send(p2)...)
	col2 := &collector{}
	startPushConsumer(t, c, uniq("nsrg2"), topic, "*", col2.listener("new"))
	col.waitDistinct(t, len(all), 30*time.Second)
	col2.waitDistinct(t, len(all), 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	checkOnce(t, c, "the consumer from before", col, all)
	checkOnce(t, c, "a consumer from after", col2, all)
}
