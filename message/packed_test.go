package message

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// packedCase is a message as a producer sends it, for the packed tests.
func packedCase(r *rand.Rand) *Ext {
	e := &Ext{Message: Message{Topic: "t", Flag: r.Int32(), Body: make([]byte, r.IntN(300))}}
	for i := range e.Body {
		e.Body[i] = byte(r.Uint32())
	}
	switch r.IntN(4) {
	case 0: // no born host: the broker's
	case 1:
		e.BornHost = netip.MustParseAddrPort("10.1.2.3:4567")
	case 2:
		e.BornHost = netip.MustParseAddrPort("[2001:db8::7]:9876")
	case 3:
		e.BornHost = netip.MustParseAddrPort("[::ffff:192.168.0.9]:1")
	}
	if r.IntN(3) > 0 {
		e.BornTimestamp = r.Int64N(1 << 42)
	}
	e.SysFlag = int32(r.IntN(2)) * SysFlagCompressed
	e.ReconsumeTimes = r.Int32N(20)
	n := r.IntN(20)
	if n > 0 {
		e.Properties = map[string]string{}
	}
	for range n {
		k := fmt.Sprintf("%c%d", 'A'+r.IntN(26), r.IntN(100))
		e.Properties[k] = strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(12))
	}
	return e
}

// TestEncodePackedMatchesEncode holds the record EncodePacked writes for a
// packed entry to the one EncodeUnsealed writes for the message it came
// from, as the store fills it in (store host, and born host and time when
// the producer gave none), over many messages and both kinds of store host.
func TestEncodePackedMatchesEncode(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, store := range []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:10911"), netip.MustParseAddrPort("[fd00::1]:10911")} {
		var batch []byte
		var want []*Ext
		for range 500 {
			e := packedCase(r)
			var err error
			if batch, err = AppendPacked(batch, e); err != nil {
				t.Fatal(err)
			}
			want = append(want, e)
		}
		for _, topic := range []string{"orders", strings.Repeat("x", 200)} {
			rest := batch
			for i, e := range want {
				p, next, err := NextPacked(rest)
				if err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
				rest = next
				ref := *e
				ref.Topic, ref.QueueID, ref.StoreHost = topic, 5, store
				if !ref.BornHost.IsValid() {
					ref.BornHost = store
				}
				exp, err := EncodeUnsealed(nil, &ref)
				if err != nil {
					t.Fatal(err)
				}
				got, err := EncodePacked([]byte("prefix"), &p, topic, 5, store)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got[6:], exp) {
					t.Fatalf("entry %d to %s stored by %s:\n got %x\nwant %x", i, topic, store, got[6:], exp)
				}
				if n := packedRecordLen(&p, topic, store); n != len(exp) {
					t.Fatalf("packedRecordLen %d, record %d bytes", n, len(exp))
				}
				back, err := p.Ext(topic, 5)
				if err != nil {
					t.Fatal(err)
				}
				if back.Flag != e.Flag || back.SysFlag != e.SysFlag || back.BornTimestamp != e.BornTimestamp ||
					back.ReconsumeTimes != e.ReconsumeTimes || !bytes.Equal(back.Body, e.Body) ||
					len(back.Properties) != len(e.Properties) || canonHost(back.BornHost) != canonHost(e.BornHost) && e.BornHost.IsValid() {
					t.Fatalf("entry %d decoded as %+v, sent %+v", i, back, e)
				}
				for k, v := range e.Properties {
					if back.Properties[k] != v {
						t.Fatalf("entry %d: property %s = %q, sent %q", i, k, back.Properties[k], v)
					}
				}
			}
			if len(rest) != 0 {
				t.Fatalf("%d bytes left after the last entry", len(rest))
			}
		}
	}
}

// TestAppendPackedRefuses checks that the properties a broker refuses are
// not packed, and that dst is then unchanged.
func TestAppendPackedRefuses(t *testing.T) {
	for name, props := range map[string]map[string]string{
		"empty name":                {"": "v"},
		"checksum name":             {PropertyCRC32: "1"},
		"separator in name":         {"a\x01b": "v"},
		"separator in value":        {"k": "a\x02b"},
		"name separator in a value": {"k": "a\x01b"},
		"too large":                 {"k": strings.Repeat("v", MaxPropertiesSize)},
	} {
		e := &Ext{Message: Message{Topic: "t", Body: []byte("x"), Properties: props}}
		dst := []byte("keep")
		out, err := AppendPacked(dst, e)
		if err == nil || string(out) != "keep" {
			t.Errorf("%s: got %q, %v", name, out, err)
		}
	}
}

// TestNextPackedRefuses runs NextPacked over broken entries: each is refused
// with ErrCorrupt, ErrBadProperty or ErrTooLarge, never read past its end.
func TestNextPackedRefuses(t *testing.T) {
	good, err := AppendPacked(nil, &Ext{Message: Message{Topic: "t", Body: []byte("body"),
		Properties: map[string]string{"A": "1", "B": "2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := NextPacked(good); err != nil {
		t.Fatal(err)
	}
	props := func(s string) []byte { // good with its properties replaced
		b := append([]byte(nil), good[:len(good)-len("A\x011\x02B\x012\x02")-2]...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
		binary.BigEndian.PutUint32(b, uint32(len(b)))
		return b
	}
	patch := func(at int, v uint32) []byte {
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint32(b[at:], v)
		return b
	}
	for name, b := range map[string][]byte{
		"short":                good[:MinPackedSize-1],
		"size past the end":    patch(0, uint32(len(good)+1)),
		"size below the least": patch(0, MinPackedSize-1),
		"size cuts the body":   patch(0, uint32(len(good)-12)),
		"body past the entry":  patch(32, 1000),
		"ipv6 host, short":     patch(8, uint32(SysFlagBornHostV6)),
		"unsorted":             props("B\x012\x02A\x011\x02"),
		"repeated name":        props("A\x011\x02A\x012\x02"),
		"no final separator":   props("A\x011\x02B\x012"),
		"empty pair":           props("A\x011\x02\x02"),
		"no value separator":   props("A1\x02"),
		"empty name":           props("\x011\x02"),
		"separator in a value": props("A\x011\x012\x02"),
		"checksum name":        props(PropertyCRC32 + "\x010\x02"),
		"properties too large": props(strings.Repeat("k", MaxPropertiesSize) + "\x01v\x02"),
	} {
		_, _, err := NextPacked(b)
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrBadProperty) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzNextPacked feeds NextPacked arbitrary bytes: it never panics, every
// entry it accepts encodes to a record that verifies once sealed and
// decodes back to the entry's message.
func FuzzNextPacked(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b, err := AppendPacked(nil, packedCase(r))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	store := netip.MustParseAddrPort("127.0.0.1:10911")
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			p, rest, err := NextPacked(b)
			if err != nil {
				return
			}
			if len(rest) >= len(b) {
				t.Fatalf("no progress: %d bytes left of %d", len(rest), len(b))
			}
			b = rest
			rec, err := EncodePacked(nil, &p, "topic", 1, store)
			if err != nil {
				t.Fatal(err)
			}
			Seal(rec)
			if err := Verify(rec); err != nil {
				t.Fatalf("encoded record does not verify: %v", err)
			}
			e, err := Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(e.Body, p.Body) || e.Flag != p.Flag || e.ReconsumeTimes != p.ReconsumeTimes {
				t.Fatalf("decoded %+v from %+v", e, p)
			}
			if err := ValidateProperties(e.Properties); err != nil {
				t.Fatalf("accepted properties a broker refuses: %v", err)
			}
			if got := EncodeProperties(e.Properties); !bytes.Equal(got, p.Properties) {
				t.Fatalf("properties %q decode and encode to %q", p.Properties, got)
			}
		}
	})
}
