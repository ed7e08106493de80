package broker

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// TestPackedDispatchMatchesRecord: what a packed send hands the dispatch
// for each record (store.Prepared, complete: the dispatcher takes it
// instead of decoding the record) is what decoding the record gives.
func TestPackedDispatchMatchesRecord(t *testing.T) {
	var batch []byte
	for i := range 50 {
		e := &message.Ext{Message: message.Message{Body: []byte(fmt.Sprint("body ", i)), Properties: map[string]string{}}}
		if i%2 == 0 {
			e.Properties[message.PropertyTags] = fmt.Sprint("tag-", i%7)
		}
		if i%3 == 0 {
			e.Properties[message.PropertyKeys] = fmt.Sprintf("k%d k%d", i, i+1)
		}
		if i%5 != 0 {
			e.Properties[message.PropertyUniqueKey] = fmt.Sprintf("%032X", i)
		}
		if i%4 == 0 {
			e.Properties[message.PropertyTimerOutMS] = fmt.Sprint(1_800_000_000_000 + i)
		}
		if i%6 == 0 {
			e.Properties["zz-after-the-rest"] = "v"
			e.Properties["AA-before-the-rest"] = "v"
		}
		var err error
		if batch, err = message.AppendPacked(batch, e); err != nil {
			t.Fatal(err)
		}
	}
	sc := new(packedScratch)
	if err := sc.parse(batch, 1000); err != nil {
		t.Fatal(err)
	}
	if !sc.scan("orders") {
		t.Fatal("a batch of plain messages is not stored from its entries")
	}
	for _, host := range []string{"10.0.0.1:10911", "[fd00::1]:10911"} {
		// (No delay options: a batch without a delayed message places none.)
		if err := sc.encode("orders", 3, netip.MustParseAddrPort(host), 1_800_000_000_000, nil, "broker-a"); err != nil {
			t.Fatal(err)
		}
		if len(sc.prepared) != 50 {
			t.Fatalf("%d records of 50", len(sc.prepared))
		}
		for i, p := range sc.prepared {
			d, err := message.DecodeDispatch(p.Record)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Complete || p.Topic != d.Topic || p.QueueID != d.QueueID || p.SysFlag != d.SysFlag || p.TagsHash != d.TagsHash ||
				p.Keys != d.Keys || p.UniqueKey != d.UniqueKey || p.DelayLevel != d.DelayLevel || p.TimerOutMS != d.TimerOutMS {
				t.Fatalf("store host %s, message %d: prepared %+v, record says %+v", host, i, p, d)
			}
		}
	}
	// A half message is rewritten into the half topic by Send's path, and
	// so are the messages of the retry, dead-letter and system topics.
	extra, err := message.AppendPacked(nil, &message.Ext{Message: message.Message{Body: []byte("x"),
		Properties: map[string]string{message.PropertyTransactionPrepared: "true"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.parse(append(batch[:len(batch):len(batch)], extra...), 1000); err != nil {
		t.Fatal(err)
	}
	if sc.scan("orders") {
		t.Error("a batch with a half message is stored from its entries")
	}
	if err := sc.parse(batch, 1000); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{message.RetryTopic("g"), message.DLQTopic("g"), message.ScheduleTopic} {
		if sc.scan(topic) {
			t.Errorf("a batch to %s is stored from its entries", topic)
		}
	}
}

// TestPackedDelayedMatchesSend: a delayed message sent packed is stored as
// Send stores it: the record written from its entry, with its properties
// edited, is byte for byte the record encoded from the message Send's
// rewrite (delay.BrokerOptions.Schedule) made of it, in the same topic and
// queue, and what the dispatch is handed is what decoding it gives. Every
// form of delay is covered: levels (capped, zero, negative), each delivery
// time property, one already due, empty values, a level beside a delivery
// time, and plain messages among them.
func TestPackedDelayedMatchesSend(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000).Add(300 * time.Microsecond)
	opts := delay.DefaultBrokerOptions()
	opts.Clock = delay.NewVirtualClock(now)
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []map[string]string{
		{message.PropertyDelayLevel: "3"},
		{message.PropertyDelayLevel: "99"}, // capped to the last level
		{message.PropertyDelayLevel: "0"},
		{message.PropertyDelayLevel: "-2", message.PropertyTimerDelayMS: "500"},
		{message.PropertyDelayLevel: "1", message.PropertyTimerDelaySec: "7", message.PropertyTimerOutMS: "5"},
		{message.PropertyTimerDelayMS: "1500"},
		{message.PropertyTimerDelaySec: "9"},
		{message.PropertyTimerDeliverMS: "1800000060000"},
		{message.PropertyTimerDeliverMS: "1700000000000"}, // due already: stored in its topic
		{message.PropertyTimerDelayMS: "0"},
		{message.PropertyTimerDelayMS: ""}, // no delivery time
		{message.PropertyTimerDelayMS: "250", message.PropertyTimerDeliverMS: "1800000000900"},
		{},
		{message.PropertyTimerOutMS: "1800000000123"},
	}
	var batch []byte
	var want []*message.Ext
	storeHost := netip.MustParseAddrPort("10.0.0.1:10911")
	for i, props := range cases {
		props[message.PropertyTags] = fmt.Sprint("tag-", i%3)
		props[message.PropertyUniqueKey] = fmt.Sprintf("%032X", i)
		props[message.PropertyKeys] = fmt.Sprint("k", i)
		props["zz-last"] = "z"
		e := &message.Ext{Message: message.Message{Topic: "orders", Body: []byte(fmt.Sprint("body ", i)), Properties: maps.Clone(props)},
			QueueID: 5, BornTimestamp: 1_790_000_000_000 + int64(i), StoreHost: storeHost, BornHost: storeHost}
		var err error
		if batch, err = message.AppendPacked(batch, e); err != nil {
			t.Fatal(err)
		}
		if err := opts.Schedule(e, "broker-a"); err != nil {
			t.Fatalf("case %d (%v): %v", i, props, err)
		}
		want = append(want, e)
	}
	sc := new(packedScratch)
	if err := sc.parse(batch, 1000); err != nil {
		t.Fatal(err)
	}
	if !sc.scan("orders") {
		t.Fatal("a batch of delayed messages is not stored from its entries")
	}
	if err := sc.encode("orders", 5, storeHost, 1_800_000_000_000, &opts, "broker-a"); err != nil {
		t.Fatal(err)
	}
	if len(sc.answers) != len(cases) {
		t.Fatalf("%d queues kept for %d messages", len(sc.answers), len(cases))
	}
	for i, p := range sc.prepared {
		m := want[i]
		rec, err := message.EncodeUnsealed(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p.Record, rec) {
			got, _ := message.Decode(p.Record)
			t.Fatalf("case %d (%v): packed record differs from Send's:\n got %v %d %v\nwant %v %d %v",
				i, cases[i], got.Topic, got.QueueID, got.Properties, m.Topic, m.QueueID, m.Properties)
		}
		if p.Topic != m.Topic || p.QueueID != m.QueueID || sc.answers[i] != m.QueueID {
			t.Fatalf("case %d: prepared for %s/%d (answered queue %d), Send stores in %s/%d", i, p.Topic, p.QueueID, sc.answers[i], m.Topic, m.QueueID)
		}
		d, err := message.DecodeDispatch(p.Record)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Complete || p.SysFlag != d.SysFlag || p.TagsHash != d.TagsHash || p.Keys != d.Keys || p.UniqueKey != d.UniqueKey ||
			p.DelayLevel != d.DelayLevel || p.TimerOutMS != d.TimerOutMS {
			t.Fatalf("case %d: prepared %+v, record says %+v", i, p, d)
		}
	}
	// The stored forms that matter: a level waits in its schedule queue, a
	// delivery time in the timer topic, one already due in its topic.
	for i, topic := range map[int]string{0: message.ScheduleTopic, 1: message.ScheduleTopic, 2: "orders", 5: message.TimerTopic,
		8: "orders", 10: "orders"} {
		if want[i].Topic != topic {
			t.Errorf("case %d stored in %s, want %s", i, want[i].Topic, topic)
		}
	}

	// What Send refuses, a packed send refuses with the same code.
	for _, props := range []map[string]string{
		{message.PropertyDelayLevel: "soon"},
		{message.PropertyTimerDelayMS: "-5"},
		{message.PropertyTimerDelaySec: "100000000000"},
	} {
		e := &message.Ext{Message: message.Message{Topic: "orders", Body: []byte("x"), Properties: props}}
		wantErr := opts.Schedule(e, "broker-a")
		b, err := message.AppendPacked(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.parse(b, 10); err != nil || !sc.scan("orders") {
			t.Fatalf("%v: parse %v", props, err)
		}
		err = sc.encode("orders", 0, storeHost, 1, &opts, "broker-a")
		if wantErr == nil || errcode.Of(err) != errcode.Of(wantErr) {
			t.Errorf("%v: packed %v, Send %v", props, err, wantErr)
		}
	}
}
