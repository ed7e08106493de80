package broker_test

import (
	"testing"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/internal/errcode"
)

func TestSubscriptionGroupsPersistAndDelete(t *testing.T) {
	dir := t.TempDir()
	b, err := newBroker(testOptions(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	c := subgroup.Default("SG1")
	c.RetryMaxTimes = 5
	if err := b.UpdateSubscriptionGroup(c); err != nil {
		t.Fatal(err)
	}
	if err := b.UpdateSubscriptionGroup(subgroup.Default("SG2")); err != nil {
		t.Fatal(err)
	}
	if err := b.UpdateSubscriptionGroup(subgroup.Default("bad group!")); errcode.Of(err) != errcode.IllegalGroup {
		t.Fatalf("illegal group name: %v", err)
	}
	if err := b.PutTopic(broker.TopicConfig{Name: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	if err := b.CommitOffsets("SG2", []broker.QueueOffset{{Queue: broker.Queue{Topic: "T"}, Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteSubscriptionGroup("SG2", true); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteSubscriptionGroup("never-declared", false); err != nil {
		t.Fatalf("deleting an undeclared group: %v", err)
	}
	if off, _ := b.QueryOffset("SG2", "T", 0); off != -1 {
		t.Fatalf("SG2's offset survived a delete with cleanOffset: %d", off)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b, err = newBroker(testOptions(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	groups, v := b.SubscriptionGroups()
	if len(groups) != 1 || groups[0].GroupName != "SG1" || groups[0].RetryMaxTimes != 5 {
		t.Fatalf("after restart: %+v", groups)
	}
	if v.Counter != 3 {
		t.Fatalf("data version %+v: two puts and a delete make counter 3", v)
	}
}

func TestProducerClients(t *testing.T) {
	b, _ := testBroker(t)
	s1, err := b.Connect(broker.Heartbeat{ClientID: "c2", ProducerGroups: []string{"PG"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := b.Connect(broker.Heartbeat{ClientID: "c1", ProducerGroups: []string{"PG", "OTHER"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.ProducerClients("PG"); len(got) != 2 || got[0] != "c1" || got[1] != "c2" {
		t.Fatalf("producers of PG: %v", got)
	}
	s2.Close()
	if got := b.ProducerClients("OTHER"); len(got) != 0 {
		t.Fatalf("producers of OTHER after its client left: %v", got)
	}
}
