package delay

import (
	"context"
	"net/netip"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/message"
)

// scanTimerRecord reads from the bytes what decoding the record tells.
func TestScanTimerRecordMatchesDecoding(t *testing.T) {
	host := netip.MustParseAddrPort("10.0.0.1:10911")
	mk := func(body string, props map[string]string) []byte {
		p := map[string]string{message.PropertyRealTopic: "rt", message.PropertyRealQueueID: "0", "a": "b"}
		for k, v := range props {
			p[k] = v
		}
		rec, err := message.Encode(nil, &message.Ext{Message: message.Message{Topic: message.TimerTopic, Body: []byte(body), Properties: p},
			PhysicalOffset: 123456, QueueOffset: 42, StoreHost: host, BornHost: host})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	cases := []struct {
		name   string
		rec    []byte
		want   Unit
		marker bool
	}{
		{"timer", mk("x", map[string]string{message.PropertyTimerOutMS: "1700000000123"}),
			Unit{DeliverMS: 1700000000123}, false},
		{"rolled copy", mk("x", map[string]string{message.PropertyTimerOutMS: "5", message.PropertyTimerOrigin: "77"}),
			Unit{DeliverMS: 5, Origin: 77, HasOrigin: true}, false},
		{"bad origin", mk("x", map[string]string{message.PropertyTimerOutMS: "5", message.PropertyTimerOrigin: "-3"}),
			Unit{DeliverMS: 5}, false},
		{"bad due time", mk("x", map[string]string{message.PropertyTimerOutMS: "5x"}), Unit{}, false},
		{"cancel marker", mk("", map[string]string{message.PropertyTimerOutMS: "9", PropertyTimerCancel: "1:2"}),
			Unit{DeliverMS: 9}, true},
		{"the marker's key in a body", mk("\x02"+PropertyTimerCancel+"\x011:2\x02", map[string]string{message.PropertyTimerOutMS: "9"}),
			Unit{DeliverMS: 9}, false},
	}
	for _, c := range cases {
		u, marker, err := scanTimerRecord(c.rec)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		d, err := message.DecodeDispatch(c.rec)
		if err != nil {
			t.Fatal(err)
		}
		c.want.Location, c.want.QueueOffset, c.want.Size = 123456, 42, int32(len(c.rec))
		if u != c.want || marker != c.marker || u.DeliverMS != d.TimerOutMS || u.Location != d.PhysicalOffset || u.Size != d.Size {
			t.Fatalf("%s: scanned %+v marker %v, want %+v marker %v (dispatch %+v)", c.name, u, marker, c.want, c.marker, d)
		}
	}
	if _, _, err := scanTimerRecord(cases[0].rec[:50]); err == nil {
		t.Fatal("a torn record scanned")
	}
}

// ReadTimerQueue over a real store: every unit of the timer queue once, in
// queue order, read max at a time, with its location, size and due time;
// cancel markers parsed, a bad marker skipped.
func TestReadTimerQueueOverStore(t *testing.T) {
	ts := startTestService(t, t.TempDir(), nil)
	st := ts.host.st
	type sent struct {
		loc, qoff int64
		size      int32
		marker    bool
	}
	var want []sent
	put := func(m *message.Ext) store.PutResult {
		res, err := st.PutBatch(context.Background(), []*message.Ext{m}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	for i := range 40 {
		switch {
		case i%13 == 5: // a cancel marker
			r := put(&message.Ext{Message: message.Message{Topic: message.TimerTopic, Properties: map[string]string{
				PropertyTimerCancel: "1:2", message.PropertyTimerOutMS: "99"}}})
			want = append(want, sent{r.PhysicalOffset, r.QueueOffset, r.Size, true})
		case i == 20: // a marker that does not parse: skipped
			put(&message.Ext{Message: message.Message{Topic: message.TimerTopic, Properties: map[string]string{
				PropertyTimerCancel: "x", message.PropertyTimerOutMS: "99"}}})
		default:
			r := ts.send(t, &message.Ext{Message: message.Message{Topic: "rt", Body: []byte(strconv.Itoa(i)),
				Properties: map[string]string{message.PropertyTimerDelayMS: "3600000"}}})
			want = append(want, sent{r.PhysicalOffset, r.QueueOffset, r.Size, false})
		}
	}
	if err := st.WaitDispatched(context.Background(), st.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	q := timerQueue{host: ts.host, log: zaptest.NewLogger(t)}
	_, end := st.QueueOffsets(message.TimerTopic, 0)
	if end != 40 {
		t.Fatalf("timer queue ends at %d", end)
	}
	var got []Unit
	for from := int64(0); from < end; {
		units, next, err := q.ReadTimerQueue(from, 7)
		if err != nil {
			t.Fatal(err)
		}
		if next <= from {
			t.Fatalf("read from %d: next %d", from, next)
		}
		if len(units) > 7 {
			t.Fatalf("read %d units, asked for 7", len(units))
		}
		got = append(got, units...)
		from = next
	}
	if len(got) != len(want) {
		t.Fatalf("read %d units, want %d", len(got), len(want))
	}
	for i, u := range got {
		w := want[i]
		if u.Location != w.loc || u.QueueOffset != w.qoff || u.Size != w.size || (u.Cancel != nil) != w.marker {
			t.Fatalf("unit %d: %+v, want %+v", i, u, w)
		}
		if w.marker {
			if u.Cancel.Origin != 1 || u.Cancel.Location != 2 || u.Cancel.DeliverMS != 99 {
				t.Fatalf("unit %d: marker %+v", i, *u.Cancel)
			}
		} else if u.DeliverMS < time.Now().Add(59*time.Minute).UnixMilli() {
			t.Fatalf("unit %d: due %d", i, u.DeliverMS)
		}
	}
	if units, next, err := q.ReadTimerQueue(end, 7); err != nil || len(units) != 0 || next != end {
		t.Fatalf("at the end: %d units, next %d, %v", len(units), next, err)
	}
	// An idle engine reads the empty end twice a second: no batch of 1 024
	// units (about 56 KiB) is made for it.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, _, err := q.ReadTimerQueue(end, 1024); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if b := after.TotalAlloc - before.TotalAlloc; b > 1<<20 {
		t.Errorf("100 reads of the empty end allocated %d bytes", b)
	}
}
