package delay

import (
	"net/netip"
	"testing"

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
			PhysicalOffset: 123456, StoreHost: host, BornHost: host})
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
		c.want.Location, c.want.Size = 123456, int32(len(c.rec))
		if u != c.want || marker != c.marker || u.DeliverMS != d.TimerOutMS || u.Location != d.PhysicalOffset || u.Size != d.Size {
			t.Fatalf("%s: scanned %+v marker %v, want %+v marker %v (dispatch %+v)", c.name, u, marker, c.want, c.marker, d)
		}
	}
	if _, _, err := scanTimerRecord(cases[0].rec[:50]); err == nil {
		t.Fatal("a torn record scanned")
	}
}
