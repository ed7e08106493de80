package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/message"
)

// TestTopicStatsSystemTopics: with no names, TopicStats reports the
// system topics that only the store holds (a delay level's queue after a
// delayed send), next to the table's topics; named, only those.
func TestTopicStatsSystemTopics(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "orders", 2)
	sendN(t, b, "orders", 2, "m", 4, "")
	before := time.Now().UnixMilli()
	for range 2 {
		m := &message.Ext{Message: message.Message{Topic: "orders", Body: []byte("later"),
			Properties: map[string]string{message.PropertyDelayLevel: "3"}}, BornTimestamp: time.Now().UnixMilli()}
		if _, err := b.Send(ctx, []*message.Ext{m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Store().WaitDispatched(ctx, b.Store().CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	byName := map[string]broker.TopicStat{}
	prev := ""
	for _, st := range b.TopicStats(nil) {
		if st.Topic <= prev {
			t.Fatalf("topic stats not sorted by name: %q after %q", st.Topic, prev)
		}
		prev = st.Topic
		byName[st.Topic] = st
	}
	if st := byName["orders"]; st.ReadQueues != 2 || st.MaxOffsetSum != 4 || st.Perm != broker.PermReadWrite {
		t.Fatalf("orders: %+v", st)
	}
	// Delay level 3 is queue 2 of SCHEDULE_TOPIC_XXXX: queues 0..2, two
	// messages, stored now.
	st, ok := byName[message.ScheduleTopic]
	if !ok {
		t.Fatalf("%s missing from %v", message.ScheduleTopic, byName)
	}
	if st.ReadQueues != 3 || st.WriteQueues != 3 || st.MaxOffsetSum != 2 || st.MinOffsetSum != 0 || st.Perm != 0 ||
		st.MessageType != "" || st.LastStoreTimeMS < before {
		t.Fatalf("%s: %+v", message.ScheduleTopic, st)
	}
	named := b.TopicStats([]string{message.ScheduleTopic, "nope"})
	if len(named) != 1 || named[0] != st {
		t.Fatalf("named %s: %+v", message.ScheduleTopic, named)
	}
	if named := b.TopicStats([]string{"orders"}); len(named) != 1 || named[0].Topic != "orders" {
		t.Fatalf("named orders: %+v", named)
	}
}
