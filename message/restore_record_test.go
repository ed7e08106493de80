package message

import (
	"bytes"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// timerDrop is what the delay service drops when it delivers.
var timerDrop = []string{PropertyDelayLevel, PropertyTimerDeliverMS, PropertyTimerDelayMS, PropertyTimerDelaySec, PropertyTimerOrigin}

// restoreByDecoding is the reference RestoreRecord must equal: decode,
// Restore, set, EncodeUnsealed with the store host.
func restoreByDecoding(t testing.TB, rec []byte, storeHost netip.AddrPort, drop []string, setName, setValue string) ([]byte, error) {
	t.Helper()
	m, err := Decode(rec)
	if err != nil {
		return nil, err
	}
	r, err := Restore(m, drop...)
	if err != nil {
		return nil, err
	}
	if setName != "" {
		r.Properties[setName] = setValue
	}
	r.StoreHost = storeHost
	return EncodeUnsealed(nil, r)
}

// rerouted encodes e parked in a system topic, as the broker stores it.
func rerouted(t testing.TB, e *Ext, topic string) []byte {
	t.Helper()
	c := *e
	c.Properties = make(map[string]string, len(e.Properties)+2)
	for k, v := range e.Properties {
		c.Properties[k] = v
	}
	Reroute(&c, topic, 0)
	c.QueueOffset, c.PhysicalOffset, c.StoreTimestamp = 77, 123456, 1700000000123
	rec, err := Encode(nil, &c)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestRestoreRecordEqualsEncodedRestore(t *testing.T) {
	for _, tc := range roundTripCases() {
		if len(tc.ext.Topic) > 1000 || tc.ext.QueueID < 0 {
			continue
		}
		for _, host := range []netip.AddrPort{hostB, hostB6} {
			for _, set := range [][2]string{{"", ""}, {PropertyTimerOutMS, "1700000001000"}, {"a", "first"}, {"zzz", "last"}} {
				e := *tc.ext
				e.Properties = map[string]string{}
				for k, v := range tc.ext.Properties {
					e.Properties[k] = v
				}
				if propertiesLen(e.Properties) < 30000 { // the largest case has no room for more
					e.Properties[PropertyTimerOutMS] = "1700000000999"
					e.Properties[PropertyTimerDelaySec] = "5"
					e.Properties[PropertyUniqueKey] = "ABCDEF"
					e.Properties[PropertyKeys] = "k1 k2"
				}
				if propertiesLen(e.Properties) > 30000 {
					continue // no room for REAL_TOPIC and REAL_QID
				}
				rec := rerouted(t, &e, TimerTopic)
				want, werr := restoreByDecoding(t, rec, host, timerDrop, set[0], set[1])
				got, r, err := RestoreRecord([]byte("prefix"), rec, host, timerDrop, set[0], set[1])
				if (err == nil) != (werr == nil) {
					t.Fatalf("%s: RestoreRecord error %v, decoding path %v", tc.name, err, werr)
				}
				if err != nil {
					if string(got) != "prefix" {
						t.Fatalf("%s: dst changed on error", tc.name)
					}
					continue
				}
				if !bytes.Equal(got[len("prefix"):], want) {
					t.Fatalf("%s, host %v, set %v: restored record differs from the encoded one\n got %q\nwant %q", tc.name, host, set, got[6:], want)
				}
				if r.Topic != tc.ext.Topic || r.QueueID != tc.ext.QueueID {
					t.Fatalf("%s: restored to %s/%d", tc.name, r.Topic, r.QueueID)
				}
				d, err := DecodeDispatch(want)
				if err != nil {
					t.Fatal(err)
				}
				if r.Keys != d.Keys || r.UniqueKey != d.UniqueKey || r.SysFlag != d.SysFlag {
					t.Fatalf("%s: dispatch fields %+v, record says %+v", tc.name, r, d)
				}
				// Stamped, the record verifies and decodes to the restored message.
				Stamp(got[6:], 5, 6, 7)
				if err := Verify(got[6:]); err != nil {
					t.Fatalf("%s: stamped restored record: %v", tc.name, err)
				}
			}
		}
	}
}

func TestRestoreRecordErrors(t *testing.T) {
	base := &Ext{Message: Message{Topic: "real", Body: []byte("b"), Properties: map[string]string{"a": "b"}}, QueueID: 3}
	cases := []struct {
		name   string
		mutate func(m *Ext)
	}{
		{"no real topic", func(m *Ext) { delete(m.Properties, PropertyRealTopic) }},
		{"empty real topic", func(m *Ext) { m.Properties[PropertyRealTopic] = "" }},
		{"no real queue", func(m *Ext) { delete(m.Properties, PropertyRealQueueID) }},
		{"negative real queue", func(m *Ext) { m.Properties[PropertyRealQueueID] = "-1" }},
		{"real queue not a number", func(m *Ext) { m.Properties[PropertyRealQueueID] = "1x" }},
		{"real queue too large", func(m *Ext) { m.Properties[PropertyRealQueueID] = "2147483648" }},
	}
	for _, tc := range cases {
		c := *base
		c.Properties = map[string]string{"a": "b", PropertyRealTopic: "real", PropertyRealQueueID: "3"}
		c.Topic = TimerTopic
		tc.mutate(&c)
		rec, err := Encode(nil, &c)
		if err != nil {
			t.Fatal(err)
		}
		_, werr := restoreByDecoding(t, rec, hostB, nil, "", "")
		out, _, err := RestoreRecord(nil, rec, hostB, nil, "", "")
		if err == nil || werr == nil {
			t.Fatalf("%s: RestoreRecord error %v, decoding path %v; want both to fail", tc.name, err, werr)
		}
		if out != nil {
			t.Fatalf("%s: dst changed on error", tc.name)
		}
	}
	// Accepted the way strconv.ParseInt accepts them.
	for _, q := range []string{"+3", "-0", "0003", "2147483647"} {
		c := *base
		c.Topic = TimerTopic
		c.Properties = map[string]string{PropertyRealTopic: "real", PropertyRealQueueID: q}
		rec, err := Encode(nil, &c)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := strconv.ParseInt(q, 10, 32)
		_, r, err := RestoreRecord(nil, rec, hostB, nil, "", "")
		if err != nil || int64(r.QueueID) != want {
			t.Fatalf("REAL_QID %q: queue %d, %v", q, r.QueueID, err)
		}
	}
	// Properties grown past the limit by the value set.
	c := *base
	c.Topic = TimerTopic
	c.Properties = map[string]string{PropertyRealTopic: "real", PropertyRealQueueID: "0", "k": strings.Repeat("v", MaxPropertiesSize-100)}
	rec, err := Encode(nil, &c)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := RestoreRecord(nil, rec, hostB, nil, "x", strings.Repeat("y", 200)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized properties: %v", err)
	}
	if _, _, err := RestoreRecord(nil, rec, hostB, nil, "x", "a\x02b"); !errors.Is(err, ErrBadProperty) {
		t.Fatalf("separator in the value set: %v", err)
	}
	if _, _, err := RestoreRecord(nil, rec[:len(rec)-1], hostB, nil, "", ""); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("torn record: %v", err)
	}
}

func TestSetRecordQueueID(t *testing.T) {
	rec := rerouted(t, baseExt(), TimerTopic)
	out, _, err := RestoreRecord(nil, rec, hostB, timerDrop, "", "")
	if err != nil {
		t.Fatal(err)
	}
	SetRecordQueueID(out, 9)
	Seal(out)
	m, err := Decode(out)
	if err != nil || m.QueueID != 9 {
		t.Fatalf("queue %v, %v", m, err)
	}
}

// FuzzRestoreRecord checks RestoreRecord against the decoding path on any
// record Decode accepts, put in Encode's form first (RestoreRecord's
// equality holds for the records Bolide writes), and that it never panics
// on the raw bytes.
func FuzzRestoreRecord(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s, "TIMER_OUT_MS", "123")
	}
	for _, tc := range roundTripCases() {
		if len(tc.ext.Topic) < 1000 && tc.ext.QueueID >= 0 && len(tc.ext.Properties["k"]) < 1000 {
			f.Add(rerouted(f, tc.ext, TimerTopic), "", "")
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, setName, setValue string) {
		_, _, _ = RestoreRecord(nil, data, hostB, timerDrop, setName, setValue)
		m, err := Decode(data)
		if err != nil {
			return
		}
		canon, err := Encode(nil, m)
		if err != nil {
			return
		}
		want, werr := restoreByDecoding(t, canon, hostB6, timerDrop, setName, setValue)
		got, _, err := RestoreRecord(nil, canon, hostB6, timerDrop, setName, setValue)
		if err != nil {
			if werr == nil && !errors.Is(err, ErrBadProperty) {
				t.Fatalf("RestoreRecord failed (%v) where decoding did not", err)
			}
			return
		}
		if werr != nil {
			t.Fatalf("RestoreRecord succeeded where decoding failed (%v)", werr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("restored record differs\n got %q\nwant %q", got, want)
		}
	})
}

// propertiesLen returns the encoded length of props without the checksum
// trailer.
func propertiesLen(props map[string]string) int {
	n := 0
	for k, v := range props {
		n += len(k) + len(v) + 2
	}
	return n
}
