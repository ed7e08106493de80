package broker

import (
	"fmt"
	"net/netip"
	"testing"

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
	if !sc.plain("orders") {
		t.Fatal("a batch of plain messages is not plain")
	}
	for _, host := range []string{"10.0.0.1:10911", "[fd00::1]:10911"} {
		if err := sc.encode("orders", 3, netip.MustParseAddrPort(host), 1_800_000_000_000); err != nil {
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
	// A delay, a delivery time or a half message is not plain: Send's path
	// rewrites it.
	for _, name := range []string{message.PropertyDelayLevel, message.PropertyTimerDelayMS, message.PropertyTimerDelaySec,
		message.PropertyTimerDeliverMS, message.PropertyTransactionPrepared} {
		extra, err := message.AppendPacked(nil, &message.Ext{Message: message.Message{Body: []byte("x"), Properties: map[string]string{name: "1"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.parse(append(batch[:len(batch):len(batch)], extra...), 1000); err != nil {
			t.Fatal(err)
		}
		if sc.plain("orders") {
			t.Errorf("a batch with %s is plain", name)
		}
	}
	if err := sc.parse(batch, 1000); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{message.RetryTopic("g"), message.DLQTopic("g"), message.ScheduleTopic} {
		if sc.plain(topic) {
			t.Errorf("a batch to %s is plain", topic)
		}
	}
}
