package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/cluster"
)

func TestBrokerRuntimeAndTopicStats(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(4)
	p := e.producer()
	results := e.sendN(p, topic, 20, nil)
	perBroker := map[string]int64{}
	for _, r := range results {
		perBroker[r.BrokerName]++
	}
	ctx := context.Background()

	// Consume them all: every broker counts its deliveries.
	col := newCollector()
	e.push("rt-group", topic, "*", col.listener("c1"), WithConsumeFrom(ConsumeFromFirst))
	col.waitAll(e, 20*time.Second, results)

	ci, err := e.admin.ClusterInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var putSum, getSum int64
	for _, name := range []string{"broker-a", "broker-b"} {
		addr := ci.Brokers[name].MasterAddr()
		rt, err := e.admin.BrokerRuntime(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		if rt.BrokerName != name || rt.Addr != addr || rt.Role != "MASTER" || !rt.Writable || rt.Permission != PermReadWrite {
			t.Errorf("%s: identity %+v", name, rt)
		}
		if rt.PutMessagesTotal != perBroker[name] {
			t.Errorf("%s: put total %d, want %d (the messages sent to it)", name, rt.PutMessagesTotal, perBroker[name])
		}
		if rt.PutMessagesTotal > 0 && (rt.PutTPS <= 0 || rt.PutBytesTotal < 2*rt.PutMessagesTotal) {
			t.Errorf("%s: put tps %v, bytes %d for %d messages", name, rt.PutTPS, rt.PutBytesTotal, rt.PutMessagesTotal)
		}
		if rt.GetMessagesTotal < perBroker[name] || (rt.GetMessagesTotal > 0 && (rt.GetTPS <= 0 || rt.GetBytesTotal <= 0)) {
			t.Errorf("%s: get total %d (bytes %d, tps %v), want %d", name, rt.GetMessagesTotal, rt.GetBytesTotal, rt.GetTPS, perBroker[name])
		}
		putSum += rt.PutMessagesTotal
		getSum += rt.GetMessagesTotal
		if rt.DiskTotalBytes <= 0 || rt.DiskFreeBytes <= 0 || rt.DiskFreeBytes > rt.DiskTotalBytes {
			t.Errorf("%s: disk total %d free %d", name, rt.DiskTotalBytes, rt.DiskFreeBytes)
		}
		if rt.Topics < 1 || rt.Queues < 4 || rt.HeapBytes <= 0 || rt.RSSBytes <= 0 || rt.Goroutines <= 0 {
			t.Errorf("%s: counts topics %d queues %d heap %d rss %d goroutines %d", name, rt.Topics, rt.Queues,
				rt.HeapBytes, rt.RSSBytes, rt.Goroutines)
		}
		// (The Go producer keeps no session with the brokers: only
		// transaction producers, which are checked back, do.)
		if rt.ConsumerConnections != 1 || rt.ProducerConnections != 0 || rt.Groups < 1 {
			t.Errorf("%s: producers %d consumers %d groups %d", name, rt.ProducerConnections, rt.ConsumerConnections, rt.Groups)
		}
		if rt.Extra["flushMode"] == "" || rt.Extra["replicationMode"] == "" || rt.StartTime.IsZero() {
			t.Errorf("%s: extra %v start %v", name, rt.Extra, rt.StartTime)
		}
	}
	if putSum != 20 || getSum < 20 {
		t.Errorf("put %d get %d over both brokers, want 20 stored and at least 20 delivered", putSum, getSum)
	}

	stats, err := e.admin.TopicStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var maxSum int64
	brokers := map[string]bool{}
	system := false
	for _, s := range stats {
		if strings.HasPrefix(s.Topic, "%RETRY%") || strings.HasPrefix(s.Topic, "RMQ_SYS_") || s.Topic == "SCHEDULE_TOPIC_XXXX" {
			system = true
		}
		if s.Topic != topic {
			continue
		}
		brokers[s.BrokerName] = true
		maxSum += s.MaxOffsetSum - s.MinOffsetSum
		if s.ReadQueues != 4 || s.WriteQueues != 4 || s.Perm != PermReadWrite || s.MessageType == "" {
			t.Errorf("stat %+v", s)
		}
		if perBroker[s.BrokerName] > 0 && s.LastStoreTime.IsZero() {
			t.Errorf("%s: no last store time", s.BrokerName)
		}
	}
	if maxSum != 20 || len(brokers) != 2 || !system {
		t.Errorf("topic stats: %d messages on %v (system topics listed: %v), want 20 on both; %+v", maxSum, brokers, system, stats)
	}
}

func TestBrokerWritePermission(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	ctx := context.Background()
	p := e.producer()
	before := e.sendN(p, topic, 10, nil)

	changed, err := e.admin.SetBrokerWritable(ctx, "broker-a", false)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := e.admin.ClusterInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addrA := ci.Brokers["broker-a"].MasterAddr()
	if !slices.Equal(changed, []string{addrA}) {
		t.Fatalf("changed %v, want [%s]", changed, addrA)
	}
	// The NameServers route broker-a's queues read-only at once.
	e.waitFor(10*time.Second, "broker-a read-only in the route", func() error {
		r, err := e.admin.Route(ctx, topic)
		if err != nil {
			return err
		}
		for _, q := range r.Queues {
			if q.BrokerName == "broker-a" && q.Perm != PermRead {
				return fmt.Errorf("broker-a perm %d", q.Perm)
			}
		}
		return nil
	})
	// A new producer sends to broker-b only.
	p2 := e.producer()
	for _, r := range e.sendN(p2, topic, 10, nil) {
		if r.BrokerName != "broker-a" {
			continue
		}
		t.Fatalf("sent to %s while its write permission is taken away", r.BrokerName)
	}
	// A send that still reaches broker-a is refused, saying why.
	_, err = p2.Send(ctx, &Message{Topic: topic, Body: []byte("x")}, WithQueue(MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0}))
	if !errors.Is(err, ErrNoPermission) || !strings.Contains(err.Error(), "broker-a is not writable") {
		t.Fatalf("send to broker-a: %v, want NO_PERMISSION saying broker-a is not writable", err)
	}
	rt, err := e.admin.BrokerRuntime(ctx, addrA)
	if err != nil || rt.Writable || rt.Permission != PermRead {
		t.Fatalf("runtime of broker-a: %+v, %v", rt, err)
	}
	// Consumption goes on: what broker-a holds is still read.
	var fromA []*SendResult
	for _, r := range before {
		if r.BrokerName == "broker-a" {
			fromA = append(fromA, r)
		}
	}
	if len(fromA) == 0 {
		t.Fatal("no message went to broker-a before its write permission was taken away")
	}
	col := newCollector()
	e.push("wp-group", topic, "*", col.listener("c1"), WithConsumeFrom(ConsumeFromFirst))
	col.waitAll(e, 20*time.Second, fromA)

	// Again: nothing to change.
	if changed, err := e.admin.SetBrokerWritable(ctx, "broker-a", false); err != nil || len(changed) != 0 {
		t.Fatalf("second wipe: %v, %v", changed, err)
	}
	if _, err := e.admin.SetBrokerWritable(ctx, "nosuch", false); !errors.Is(err, ErrBrokerNotExist) {
		t.Fatalf("unknown broker: %v", err)
	}
	// Given back: writable in the route again, and sends are taken.
	if changed, err := e.admin.SetBrokerWritable(ctx, "broker-a", true); err != nil || !slices.Equal(changed, []string{addrA}) {
		t.Fatalf("add write perm: %v, %v", changed, err)
	}
	e.waitFor(10*time.Second, "broker-a writable in the route", func() error {
		r, err := e.admin.Route(ctx, topic)
		if err != nil {
			return err
		}
		for _, q := range r.Queues {
			if q.BrokerName == "broker-a" && q.Perm != PermReadWrite {
				return fmt.Errorf("broker-a perm %d", q.Perm)
			}
		}
		return nil
	})
	if _, err := p2.Send(ctx, &Message{Topic: topic, Body: []byte("x")}, WithQueue(MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0})); err != nil {
		t.Fatalf("send to broker-a after write permission came back: %v", err)
	}
}

func TestUpdateBrokerConfig(t *testing.T) {
	e := startEnvWith(t, cluster.Options{})
	ctx := context.Background()
	addr := e.c.Broker(0).Addr()
	entries, err := e.admin.BrokerConfig(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]BrokerConfigEntry{}
	for _, en := range entries {
		byKey[en.Key] = en
	}
	for key, runtime := range map[string]bool{"brokerName": false, "storePathRootDir": false, "listenPort": false,
		"flushDiskType": false, "brokerPermission": true, "maxMessageSize": true, "fileReservedTime": true,
		"deleteWhen": true, "diskMaxUsedSpaceRatio": true, "maxReconsumeTimes": true} {
		en, ok := byKey[key]
		if !ok || en.Runtime != runtime || en.Description == "" || en.Default == "" {
			t.Errorf("%s: %+v (listed %v), want runtime %v with a default and a description", key, en, ok, runtime)
		}
	}
	if byKey["brokerName"].Value != "broker-a" || byKey["brokerPermission"].Value != "6" {
		t.Errorf("values: %+v %+v", byKey["brokerName"], byKey["brokerPermission"])
	}

	// Refused as a whole: a key that is not allowed, a bad value.
	_, err = e.admin.UpdateBrokerConfig(ctx, addr, map[string]string{"storePathRootDir": "/tmp/x", "maxMessageSize": "2048"})
	if !errors.Is(err, ErrInvalidParameter) || !strings.Contains(err.Error(), "storePathRootDir") || !strings.Contains(err.Error(), "brokerPermission") {
		t.Fatalf("path key: %v, want INVALID_PARAMETER naming it and the allowed keys", err)
	}
	_, err = e.admin.UpdateBrokerConfig(ctx, addr, map[string]string{"maxMessageSize": "2048", "deleteWhen": "25"})
	if !errors.Is(err, ErrInvalidParameter) || !strings.Contains(err.Error(), "deleteWhen") {
		t.Fatalf("bad value: %v", err)
	}
	p := e.producer()
	topic := e.topic(1)
	big := &Message{Topic: topic, Body: make([]byte, 3000)}
	if _, err := p.Send(ctx, big); err != nil {
		t.Fatalf("a 3000-byte body before any change: %v", err)
	}

	// Applied: a smaller body limit refuses the same message at once.
	changed, err := e.admin.UpdateBrokerConfig(ctx, addr, map[string]string{"maxMessageSize": "2048", "fileReservedTime": "12"})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 2 || changed[0].Key != "fileReservedTime" || changed[0].Value != "12" || changed[1].Value != "2048" {
		t.Fatalf("changed: %+v", changed)
	}
	if _, err := p.Send(ctx, big); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("a 3000-byte body with maxMessageSize 2048: %v, want MESSAGE_TOO_LARGE", err)
	}

	// Persisted: a restart keeps the changes over the flags.
	e.c.StopBroker(0)
	e.c.StartBroker(0)
	e.waitFor(10*time.Second, "configuration after restart", func() error {
		entries, err := e.admin.BrokerConfig(ctx, addr)
		if err != nil {
			return err
		}
		for _, en := range entries {
			if en.Key == "maxMessageSize" && en.Value != "2048" || en.Key == "fileReservedTime" && en.Value != "12" {
				return fmt.Errorf("%s = %s", en.Key, en.Value)
			}
		}
		return nil
	})
	if _, err := p.Send(ctx, big); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("after restart: %v, want MESSAGE_TOO_LARGE", err)
	}
}
