package delay

import (
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// TestDeliveredRecordsAreTheRealMessages: timer and delay-level messages
// are delivered as copies of their stored records, patched: what a
// consumer reads is RealMessage of the stored message (same body, flag,
// born fields, reconsume times and properties but the delay ones,
// TIMER_OUT_MS the due time), in the real topic's queue, remapped when the
// topic has fewer write queues now, with the broker's store host; the
// records verify and are indexed by key and unique id.
func TestDeliveredRecordsAreTheRealMessages(t *testing.T) {
	ts := startTestService(t, t.TempDir(), nil)
	ts.host.queueNums.Store(4)
	mk := func(topic string, qid int32, body string, props map[string]string) *message.Ext {
		p := map[string]string{message.PropertyKeys: "k-" + body, message.PropertyUniqueKey: "U-" + body,
			message.PropertyTags: "tag", "zz": "last", "a": "first"}
		maps.Copy(p, props)
		return &message.Ext{Message: message.Message{Topic: topic, Flag: 7, Body: []byte(body), Properties: p},
			QueueID: qid, ReconsumeTimes: 2, BornTimestamp: 1700000000000}
	}
	timerRes := ts.send(t, mk("rt", 6, "timer", map[string]string{message.PropertyTimerDelayMS: "200"}))
	levelRes := ts.send(t, mk("rl", 1, "level", map[string]string{message.PropertyDelayLevel: "1"}))

	want := func(loc int64, due int64, qid int32) *message.Ext {
		stored, err := ts.host.st.ReadMessage(loc)
		if err != nil {
			t.Fatal(err)
		}
		if due < 0 {
			due, _ = strconv.ParseInt(stored.Properties[message.PropertyTimerOutMS], 10, 64)
		}
		m, err := RealMessage(stored, due)
		if err != nil {
			t.Fatal(err)
		}
		m.QueueID = qid
		return m
	}
	cases := []struct {
		topic string
		qid   int32
		want  *message.Ext
	}{
		{"rt", 2, want(timerRes.PhysicalOffset, -1, 2)},
		{"rl", 1, want(levelRes.PhysicalOffset, 0, 1)},
	}
	for _, c := range cases {
		var got []*message.Ext
		testutil.WaitFor(t, 15*time.Second, "delivery to "+c.topic, func() error {
			got = ts.pullAll(t, c.topic, c.qid, 0)
			if len(got) == 0 {
				return fmt.Errorf("nothing in %s/%d", c.topic, c.qid)
			}
			return nil
		})
		if len(got) != 1 {
			t.Fatalf("%s: %d deliveries", c.topic, len(got))
		}
		g, w := got[0], c.want
		if g.Topic != w.Topic || g.QueueID != w.QueueID || string(g.Body) != string(w.Body) || g.Flag != w.Flag ||
			g.BornTimestamp != w.BornTimestamp || g.BornHost != w.BornHost || g.SysFlag != w.SysFlag ||
			g.ReconsumeTimes != w.ReconsumeTimes || g.StoreHost != ts.host.StoreHost() || !maps.Equal(g.Properties, w.Properties) {
			t.Fatalf("%s: delivered\n%+v\nwant\n%+v", c.topic, g, w)
		}
		rec, err := ts.host.st.ReadRecord(g.PhysicalOffset)
		if err != nil {
			t.Fatal(err)
		}
		if err := message.Verify(rec); err != nil {
			t.Fatalf("%s: delivered record: %v", c.topic, err)
		}
		// A record's index entries are written after its queue unit: a
		// pull may see it a moment before a query by key does.
		for _, key := range []string{"k-" + string(g.Body), "U-" + string(g.Body)} {
			testutil.WaitFor(t, 5*time.Second, c.topic+" by key "+key, func() error {
				found, err := ts.host.st.QueryByKey(c.topic, key, 0, time.Now().UnixMilli()+1000, 4)
				if err != nil || len(found) != 1 || found[0].PhysicalOffset != g.PhysicalOffset {
					return fmt.Errorf("found %v, %v", found, err)
				}
				return nil
			})
		}
	}
	if _, ok := cases[0].want.Properties[message.PropertyTimerOutMS]; !ok {
		t.Fatal("a delivered timer message tells its due time")
	}
	if _, ok := cases[1].want.Properties[message.PropertyDelayLevel]; ok {
		t.Fatal("a delivered level message keeps DELAY")
	}
}
