package message

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// refChecksum is RocketMQ's UtilAll.crc32, written independently of Checksum.
func refChecksum(b []byte) uint32 { return crc32.ChecksumIEEE(b) & 0x7fffffff }

// refProps encodes properties by hand: sorted k\x01v\x02 pairs.
func refProps(props map[string]string) []byte {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		b = append(b, k...)
		b = append(b, 1)
		b = append(b, props[k]...)
		b = append(b, 2)
	}
	return b
}

// reversedDigits is the ten-digit decimal form of crc, least significant
// digit first.
func reversedDigits(crc uint32) string {
	s := fmt.Sprintf("%010d", crc)
	r := []byte(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// canonHost is what a host looks like after a round trip: IPv4-mapped
// addresses are stored as IPv4, the zero AddrPort as 0.0.0.0 with its port.
func canonHost(ap netip.AddrPort) netip.AddrPort {
	if !ap.Addr().IsValid() {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{}), ap.Port())
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func hostIsV6(ap netip.AddrPort) bool {
	return ap.Addr().IsValid() && ap.Addr().Is6() && !ap.Addr().Is4In6()
}

// canonSysFlag is the sysflag Encode writes: the IPv6 bits follow the hosts.
func canonSysFlag(e *Ext) int32 {
	f := e.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
	if hostIsV6(e.BornHost) {
		f |= SysFlagBornHostV6
	}
	if hostIsV6(e.StoreHost) {
		f |= SysFlagStoreHostV6
	}
	return f
}

func propsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkDecoded compares a decoded Ext with the Ext that was encoded.
func checkDecoded(t testing.TB, want, got *Ext, size int) {
	t.Helper()
	if got.Topic != want.Topic {
		t.Errorf("Topic = %q, want %q", got.Topic, want.Topic)
	}
	if got.Flag != want.Flag {
		t.Errorf("Flag = %d, want %d", got.Flag, want.Flag)
	}
	if !bytes.Equal(got.Body, want.Body) {
		t.Errorf("Body = %q, want %q", got.Body, want.Body)
	}
	if !propsEqual(got.Properties, want.Properties) {
		t.Errorf("Properties = %q, want %q", got.Properties, want.Properties)
	}
	if got.QueueID != want.QueueID {
		t.Errorf("QueueID = %d, want %d", got.QueueID, want.QueueID)
	}
	if int(got.StoreSize) != size {
		t.Errorf("StoreSize = %d, want %d", got.StoreSize, size)
	}
	if wantCRC := refChecksum(want.Body); got.BodyCRC != wantCRC {
		t.Errorf("BodyCRC = %d, want %d", got.BodyCRC, wantCRC)
	}
	if got.QueueOffset != want.QueueOffset {
		t.Errorf("QueueOffset = %d, want %d", got.QueueOffset, want.QueueOffset)
	}
	if got.PhysicalOffset != want.PhysicalOffset {
		t.Errorf("PhysicalOffset = %d, want %d", got.PhysicalOffset, want.PhysicalOffset)
	}
	if wantFlag := canonSysFlag(want); got.SysFlag != wantFlag {
		t.Errorf("SysFlag = %#x, want %#x", got.SysFlag, wantFlag)
	}
	if got.BornTimestamp != want.BornTimestamp {
		t.Errorf("BornTimestamp = %d, want %d", got.BornTimestamp, want.BornTimestamp)
	}
	if h := canonHost(want.BornHost); got.BornHost != h {
		t.Errorf("BornHost = %v, want %v", got.BornHost, h)
	}
	if got.StoreTimestamp != want.StoreTimestamp {
		t.Errorf("StoreTimestamp = %d, want %d", got.StoreTimestamp, want.StoreTimestamp)
	}
	if h := canonHost(want.StoreHost); got.StoreHost != h {
		t.Errorf("StoreHost = %v, want %v", got.StoreHost, h)
	}
	if got.ReconsumeTimes != want.ReconsumeTimes {
		t.Errorf("ReconsumeTimes = %d, want %d", got.ReconsumeTimes, want.ReconsumeTimes)
	}
	if got.PreparedTransactionOffset != want.PreparedTransactionOffset {
		t.Errorf("PreparedTransactionOffset = %d, want %d", got.PreparedTransactionOffset, want.PreparedTransactionOffset)
	}
}

// checkLayout reads every field of rec by hand from the documented offsets.
func checkLayout(t *testing.T, rec []byte, e *Ext) {
	t.Helper()
	be := binary.BigEndian
	u32 := func(p int) uint32 { return be.Uint32(rec[p:]) }
	u64 := func(p int) uint64 { return be.Uint64(rec[p:]) }
	if got := int(u32(0)); got != len(rec) {
		t.Fatalf("TOTALSIZE at 0 = %d, record has %d bytes", got, len(rec))
	}
	wantMagic := uint32(0xDAA320A7)
	if len(e.Topic) > 127 {
		wantMagic = 0xDAA320AB
	}
	if got := u32(4); got != wantMagic {
		t.Errorf("MAGIC at 4 = %#x, want %#x", got, wantMagic)
	}
	if got, want := u32(8), crc32.ChecksumIEEE(e.Body)&0x7fffffff; got != want {
		t.Errorf("BODYCRC at 8 = %d, want %d", got, want)
	}
	if got := int32(u32(12)); got != e.QueueID {
		t.Errorf("QUEUEID at 12 = %d, want %d", got, e.QueueID)
	}
	if got := int32(u32(16)); got != e.Flag {
		t.Errorf("FLAG at 16 = %d, want %d", got, e.Flag)
	}
	if got := int64(u64(20)); got != e.QueueOffset {
		t.Errorf("QUEUEOFFSET at 20 = %d, want %d", got, e.QueueOffset)
	}
	if got := int64(u64(28)); got != e.PhysicalOffset {
		t.Errorf("PHYSICALOFFSET at 28 = %d, want %d", got, e.PhysicalOffset)
	}
	sysFlag := int32(u32(36))
	if want := canonSysFlag(e); sysFlag != want {
		t.Errorf("SYSFLAG at 36 = %#x, want %#x", sysFlag, want)
	}
	if got := int64(u64(40)); got != e.BornTimestamp {
		t.Errorf("BORNTIMESTAMP at 40 = %d, want %d", got, e.BornTimestamp)
	}
	p := 48
	host := func(name string, ap netip.AddrPort) {
		t.Helper()
		ap = canonHost(ap)
		if ap.Addr().Is4() {
			a := ap.Addr().As4()
			if !bytes.Equal(rec[p:p+4], a[:]) {
				t.Errorf("%s address at %d = % x, want % x", name, p, rec[p:p+4], a)
			}
			p += 4
		} else {
			a := ap.Addr().As16()
			if !bytes.Equal(rec[p:p+16], a[:]) {
				t.Errorf("%s address at %d = % x, want % x", name, p, rec[p:p+16], a)
			}
			p += 16
		}
		if got := u32(p); got != uint32(ap.Port()) {
			t.Errorf("%s port at %d = %d, want %d", name, p, got, ap.Port())
		}
		p += 4
	}
	host("BORNHOST", e.BornHost)
	if p != StoreTimestampPos(sysFlag) {
		t.Errorf("STORETIMESTAMP at %d, StoreTimestampPos says %d", p, StoreTimestampPos(sysFlag))
	}
	if got := int64(u64(p)); got != e.StoreTimestamp {
		t.Errorf("STORETIMESTAMP at %d = %d, want %d", p, got, e.StoreTimestamp)
	}
	p += 8
	host("STOREHOST", e.StoreHost)
	if got := int32(u32(p)); got != e.ReconsumeTimes {
		t.Errorf("RECONSUMETIMES at %d = %d, want %d", p, got, e.ReconsumeTimes)
	}
	p += 4
	if got := int64(u64(p)); got != e.PreparedTransactionOffset {
		t.Errorf("PREPAREDTRANSACTIONOFFSET at %d = %d, want %d", p, got, e.PreparedTransactionOffset)
	}
	p += 8
	if got := int(u32(p)); got != len(e.Body) {
		t.Fatalf("BODY length at %d = %d, want %d", p, got, len(e.Body))
	}
	p += 4
	if !bytes.Equal(rec[p:p+len(e.Body)], e.Body) {
		t.Errorf("BODY bytes differ")
	}
	p += len(e.Body)
	if len(e.Topic) > 127 {
		if got := int(be.Uint16(rec[p:])); got != len(e.Topic) {
			t.Fatalf("V2 TOPIC length at %d = %d, want %d", p, got, len(e.Topic))
		}
		p += 2
	} else {
		if got := int(rec[p]); got != len(e.Topic) {
			t.Fatalf("V1 TOPIC length at %d = %d, want %d", p, got, len(e.Topic))
		}
		p++
	}
	if got := string(rec[p : p+len(e.Topic)]); got != e.Topic {
		t.Errorf("TOPIC = %q, want %q", got, e.Topic)
	}
	p += len(e.Topic)
	props := refProps(e.Properties)
	if got := int(be.Uint16(rec[p:])); got != len(props)+20 {
		t.Fatalf("PROPERTIES length at %d = %d, want %d", p, got, len(props)+20)
	}
	p += 2
	if got := rec[p : p+len(props)]; !bytes.Equal(got, props) {
		t.Errorf("PROPERTIES = %q, want %q", got, props)
	}
	p += len(props)
	trailer := "__CRC32#\x01" + reversedDigits(refChecksum(rec[:len(rec)-20])) + "\x02"
	if got := string(rec[p:]); got != trailer {
		t.Errorf("checksum trailer = %q, want %q", got, trailer)
	}
	if p+20 != len(rec) {
		t.Errorf("record ends at %d, TOTALSIZE %d", p+20, len(rec))
	}
}

var (
	hostA  = netip.MustParseAddrPort("192.168.0.10:54321")
	hostB  = netip.MustParseAddrPort("10.0.0.1:10911")
	hostA6 = netip.MustParseAddrPort("[2001:db8::1]:54321")
	hostB6 = netip.MustParseAddrPort("[fe80::1234:5678:9abc:def0]:10911")
)

func baseExt() *Ext {
	return &Ext{
		Message: Message{
			Topic: "TopicTest",
			Flag:  -7,
			Body:  []byte("Hello RocketMQ"),
			Properties: map[string]string{
				PropertyTags:           "TagA",
				PropertyKeys:           "order-1 order-2",
				PropertyUniqueKey:      "C0A8000A12341A2B3C4D000000010001",
				PropertyWaitStoreMsgOK: "true",
				PropertyDelayLevel:     "3",
			},
		},
		QueueID:                   3,
		QueueOffset:               1<<40 + 17,
		PhysicalOffset:            1<<33 + 5,
		SysFlag:                   SysFlagMultiTags,
		BornTimestamp:             1700000000123,
		BornHost:                  hostA,
		StoreTimestamp:            1700000000456,
		StoreHost:                 hostB,
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 987654321,
	}
}

func with(f func(e *Ext)) *Ext {
	e := baseExt()
	f(e)
	return e
}

func roundTripCases() []struct {
	name string
	ext  *Ext
} {
	kib := make([]byte, 1024)
	for i := range kib {
		kib[i] = byte(i * 7)
	}
	return []struct {
		name string
		ext  *Ext
	}{
		{"ipv4", baseExt()},
		{"ipv6 born host", with(func(e *Ext) { e.BornHost = hostA6 })},
		{"ipv6 store host", with(func(e *Ext) { e.StoreHost = hostB6 })},
		{"ipv6 both hosts", with(func(e *Ext) { e.BornHost, e.StoreHost = hostA6, hostB6 })},
		{"ipv4-mapped hosts stored as ipv4", with(func(e *Ext) {
			e.BornHost = netip.MustParseAddrPort("[::ffff:1.2.3.4]:80")
			e.StoreHost = netip.MustParseAddrPort("[::ffff:5.6.7.8]:81")
		})},
		{"zero hosts", with(func(e *Ext) { e.BornHost, e.StoreHost = netip.AddrPort{}, netip.AddrPort{} })},
		{"stale ipv6 sysflag bits cleared", with(func(e *Ext) { e.SysFlag |= SysFlagBornHostV6 | SysFlagStoreHostV6 })},
		{"one-byte topic", with(func(e *Ext) { e.Topic = "T" })},
		{"127-byte topic is V1", with(func(e *Ext) { e.Topic = strings.Repeat("t", 127) })},
		{"128-byte topic is V2", with(func(e *Ext) { e.Topic = strings.Repeat("t", 128) })},
		{"200-byte topic is V2", with(func(e *Ext) { e.Topic = strings.Repeat("%RETRY%", 28) + "abcd" })},
		{"longest topic", with(func(e *Ext) { e.Topic = strings.Repeat("x", MaxTopicLen) })},
		{"empty body", with(func(e *Ext) { e.Body = nil })},
		{"empty non-nil body", with(func(e *Ext) { e.Body = []byte{} })},
		{"1 KiB body", with(func(e *Ext) { e.Body = kib })},
		{"no properties", with(func(e *Ext) { e.Properties = nil })},
		{"empty property map", with(func(e *Ext) { e.Properties = map[string]string{} })},
		{"many properties", with(func(e *Ext) {
			for i := range 40 {
				e.SetProperty(fmt.Sprintf("k%02d", 39-i), strings.Repeat("v", i))
			}
		})},
		{"empty values, empty name and \\x01 in a value", with(func(e *Ext) {
			e.Properties = map[string]string{"": "anon", "a": "", "b": "x\x01y"}
		})},
		{"largest properties", with(func(e *Ext) {
			e.Properties = map[string]string{"k": strings.Repeat("v", MaxPropertiesSize-20-3)}
		})},
		{"extreme integers", with(func(e *Ext) {
			e.QueueID, e.Flag, e.ReconsumeTimes = -1<<31, 1<<31-1, -1
			e.QueueOffset, e.PhysicalOffset, e.PreparedTransactionOffset = -1, 1<<63-1, -1<<63
			e.BornTimestamp, e.StoreTimestamp = -1, 1<<63-1
			e.SysFlag = -1 &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
		})},
		{"transaction and compression bits", with(func(e *Ext) {
			e.SysFlag = SysFlagTransPrepared | SysFlagCompressed | 3<<8 | SysFlagInnerBatch | SysFlagNeedUnwrap
		})},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range roundTripCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.ext
			n, err := EncodedLen(e)
			if err != nil {
				t.Fatalf("EncodedLen: %v", err)
			}
			rec, err := Encode(nil, e)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if len(rec) != n {
				t.Fatalf("Encode wrote %d bytes, EncodedLen said %d", len(rec), n)
			}
			checkLayout(t, rec, e)
			if err := Verify(rec); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			got, err := Decode(rec)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			checkDecoded(t, e, got, n)
			// The decoded message does not alias the record.
			scratch := append([]byte(nil), rec...)
			fromScratch, err := Decode(scratch)
			if err != nil {
				t.Fatal(err)
			}
			clear(scratch)
			checkDecoded(t, e, fromScratch, n)
			// DecodeShared decodes the same, its body a capped slice of
			// the record.
			scratch = append(scratch[:0], rec...)
			shared, err := DecodeShared(scratch)
			if err != nil {
				t.Fatalf("DecodeShared: %v", err)
			}
			checkDecoded(t, e, shared, n)
			switch {
			case len(e.Body) == 0 && shared.Body != nil:
				t.Errorf("DecodeShared: empty body %#v, want nil as Decode gives", shared.Body)
			case len(e.Body) > 0 && cap(shared.Body) != len(shared.Body):
				t.Errorf("DecodeShared: body capacity %d beyond its length %d", cap(shared.Body), len(shared.Body))
			case len(e.Body) > 0:
				clear(scratch)
				if !bytes.Equal(shared.Body, make([]byte, len(e.Body))) {
					t.Errorf("DecodeShared copied the body: clearing the record left it %q", shared.Body)
				}
			}
			// Encoding is deterministic, whatever the map order.
			for range 5 {
				again, err := Encode(nil, got)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again, rec) {
					t.Fatalf("re-encoding the decoded message gives different bytes")
				}
			}
		})
	}
}

func TestRecordSizeOverhead(t *testing.T) {
	for _, tc := range roundTripCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.ext
			rec, err := Encode(nil, e)
			if err != nil {
				t.Fatal(err)
			}
			want := 91 + len(e.Body) + len(e.Topic) + len(refProps(e.Properties)) + 20
			if len(e.Topic) > 127 {
				want++ // V2: two-byte topic length
			}
			if hostIsV6(e.BornHost) {
				want += 12
			}
			if hostIsV6(e.StoreHost) {
				want += 12
			}
			if len(rec) != want {
				t.Errorf("record is %d bytes, want %d", len(rec), want)
			}
		})
	}
}

func TestMinRecordSize(t *testing.T) {
	rec, err := Encode(nil, &Ext{Message: Message{Topic: "T"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != MinRecordSize || MinRecordSize != 112 {
		t.Errorf("smallest record is %d bytes, MinRecordSize = %d, want 112", len(rec), MinRecordSize)
	}
	if err := Verify(rec); err != nil {
		t.Error(err)
	}
}

func TestIPv6Flags(t *testing.T) {
	for _, tc := range []struct {
		born, store netip.AddrPort
		flags       int32
		storeTSPos  int
	}{
		{hostA, hostB, 0, 56},
		{hostA6, hostB, SysFlagBornHostV6, 68},
		{hostA, hostB6, SysFlagStoreHostV6, 56},
		{hostA6, hostB6, SysFlagBornHostV6 | SysFlagStoreHostV6, 68},
	} {
		e := with(func(e *Ext) { e.BornHost, e.StoreHost = tc.born, tc.store })
		rec, err := Encode(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		sf := int32(binary.BigEndian.Uint32(rec[36:]))
		if got := sf & (SysFlagBornHostV6 | SysFlagStoreHostV6); got != tc.flags {
			t.Errorf("%v/%v: v6 bits = %#x, want %#x", tc.born, tc.store, got, tc.flags)
		}
		if got := StoreTimestampPos(sf); got != tc.storeTSPos {
			t.Errorf("%v/%v: StoreTimestampPos = %d, want %d", tc.born, tc.store, got, tc.storeTSPos)
		}
		if got := int64(binary.BigEndian.Uint64(rec[tc.storeTSPos:])); got != e.StoreTimestamp {
			t.Errorf("%v/%v: store timestamp at %d = %d, want %d", tc.born, tc.store, tc.storeTSPos, got, e.StoreTimestamp)
		}
	}
	if StoreTimestampPos(SysFlagBornHostV6)-StoreTimestampPos(0) != 12 {
		t.Error("an IPv6 born host should move STORETIMESTAMP by 12")
	}
	if StoreTimestampPos(SysFlagStoreHostV6) != StoreTimestampPos(0) {
		t.Error("the store host flag should not move STORETIMESTAMP")
	}
}

func TestEncodeAppends(t *testing.T) {
	e1 := baseExt()
	e2 := with(func(e *Ext) { e.BornHost = hostA6; e.Body = []byte("second") })
	buf := []byte("prefix")
	buf, err := Encode(buf, e1)
	if err != nil {
		t.Fatal(err)
	}
	n1 := len(buf) - len("prefix")
	buf, err = Encode(buf, e2)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:6]) != "prefix" {
		t.Fatalf("prefix clobbered: %q", buf[:6])
	}
	r1, r2 := buf[6:6+n1], buf[6+n1:]
	for i, r := range [][]byte{r1, r2} {
		if err := Verify(r); err != nil {
			t.Errorf("record %d: %v", i, err)
		}
	}
	d2, err := Decode(r2)
	if err != nil {
		t.Fatal(err)
	}
	checkDecoded(t, e2, d2, len(r2))
}

// TestLayoutManyProperties holds the encoder's sorting of properties to
// refProps on both sides of its small-map path (none, a few, more than a
// dozen, more than its stack array holds), map order being random.
func TestLayoutManyProperties(t *testing.T) {
	for _, n := range []int{0, 1, 2, 12, 13, 16, 17, 100} {
		e := baseExt()
		e.Properties = map[string]string{}
		for i := range n {
			e.Properties[fmt.Sprintf("k%02d", (i*37)%101)] = strings.Repeat("v", i%5)
		}
		for range 5 {
			rec, err := Encode(nil, e)
			if err != nil {
				t.Fatalf("%d properties: %v", n, err)
			}
			checkLayout(t, rec, e)
		}
	}
}

func TestEncodedLenErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		ext  *Ext
		want error
	}{
		{"empty topic", with(func(e *Ext) { e.Topic = "" }), ErrTooLarge},
		{"topic too long", with(func(e *Ext) { e.Topic = strings.Repeat("x", MaxTopicLen+1) }), ErrTooLarge},
		{"properties one byte over", with(func(e *Ext) {
			e.Properties = map[string]string{"k": strings.Repeat("v", MaxPropertiesSize-20-3+1)}
		}), ErrTooLarge},
		{"properties far over", with(func(e *Ext) {
			for i := range 2000 {
				e.SetProperty(fmt.Sprintf("key%04d", i), "some value")
			}
		}), ErrTooLarge},
		{"name with \\x01", with(func(e *Ext) { e.SetProperty("a\x01b", "v") }), ErrBadProperty},
		{"name with \\x02", with(func(e *Ext) { e.SetProperty("a\x02b", "v") }), ErrBadProperty},
		{"value with \\x02", with(func(e *Ext) { e.SetProperty("a", "v\x02TAGS\x01evil") }), ErrBadProperty},
		{"reserved checksum name", with(func(e *Ext) { e.SetProperty(PropertyCRC32, "0000000000") }), ErrBadProperty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := EncodedLen(tc.ext); !errors.Is(err, tc.want) {
				t.Errorf("EncodedLen error = %v, want %v", err, tc.want)
			}
			dst := []byte("keep")
			out, err := Encode(dst, tc.ext)
			if !errors.Is(err, tc.want) {
				t.Errorf("Encode error = %v, want %v", err, tc.want)
			}
			if string(out) != "keep" {
				t.Errorf("Encode changed dst on error: %q", out)
			}
		})
	}
}

func TestStamp(t *testing.T) {
	for _, born := range []netip.AddrPort{hostA, hostA6} {
		for _, store := range []netip.AddrPort{hostB, hostB6} {
			e := with(func(e *Ext) { e.BornHost, e.StoreHost = born, store })
			rec, err := Encode(nil, e)
			if err != nil {
				t.Fatal(err)
			}
			before := append([]byte(nil), rec...)
			Stamp(rec, 42, 1<<35+9, 1712345678901)
			if err := Verify(rec); err != nil {
				t.Fatalf("%v/%v: Verify after Stamp: %v", born, store, err)
			}
			got, err := Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			want := *e
			want.QueueOffset, want.PhysicalOffset, want.StoreTimestamp = 42, 1<<35+9, 1712345678901
			checkDecoded(t, &want, got, len(rec))
			checkLayout(t, rec, &want)
			// Only the three fields and the trailer digits changed.
			tsPos := StoreTimestampPos(got.SysFlag)
			for i := range rec {
				stamped := i >= 20 && i < 36 || i >= tsPos && i < tsPos+8 || i >= len(rec)-11 && i < len(rec)-1
				if !stamped && rec[i] != before[i] {
					t.Errorf("%v/%v: Stamp changed byte %d", born, store, i)
				}
			}
			if bytes.Equal(rec[len(rec)-11:], before[len(before)-11:]) {
				t.Errorf("%v/%v: Stamp did not reseal the checksum", born, store)
			}
		}
	}
}

func smallRecord(t testing.TB) []byte {
	t.Helper()
	rec, err := Encode(nil, &Ext{
		Message:  Message{Topic: "T", Body: []byte("x"), Properties: map[string]string{"a": "b"}},
		BornHost: hostA, StoreHost: hostB, QueueOffset: 1, PhysicalOffset: 2, StoreTimestamp: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestVerifyDetectsEveryByteChange(t *testing.T) {
	for _, host := range []netip.AddrPort{hostA, hostA6} {
		rec := smallRecord(t)
		if host == hostA6 {
			e, _ := Decode(rec)
			e.BornHost, e.StoreHost = hostA6, hostB6
			rec, _ = Encode(nil, e)
		}
		if err := Verify(rec); err != nil {
			t.Fatal(err)
		}
		for i := range rec {
			for _, x := range []byte{0x01, 0x02, 0x10, 0x80, 0xFF} {
				bad := append([]byte(nil), rec...)
				bad[i] ^= x
				if err := Verify(bad); err == nil {
					t.Errorf("%v: Verify accepted byte %d ^ %#x", host, i, x)
				}
			}
		}
	}
}

func TestVerifyRejectsTruncation(t *testing.T) {
	rec := smallRecord(t)
	for n := range len(rec) {
		cut := rec[:n]
		if err := Verify(cut); err == nil {
			t.Errorf("Verify accepted %d of %d bytes", n, len(rec))
		}
		if _, err := Decode(cut); err == nil {
			t.Errorf("Decode accepted %d of %d bytes", n, len(rec))
		}
		if _, err := DecodeDispatch(cut); err == nil {
			t.Errorf("DecodeDispatch accepted %d of %d bytes", n, len(rec))
		}
		if n < 8 {
			continue
		}
		// A torn write whose size field matches what is left.
		fixed := append([]byte(nil), cut...)
		binary.BigEndian.PutUint32(fixed, uint32(n))
		if err := Verify(fixed); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Verify of %d bytes with a matching size = %v, want ErrCorrupt", n, err)
		}
		if _, err := Decode(fixed); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Decode of %d bytes with a matching size = %v, want ErrCorrupt", n, err)
		}
	}
	if err := Verify(append(append([]byte(nil), rec...), 0)); err == nil {
		t.Error("Verify accepted a trailing byte")
	}
}

func TestVerifyErrorKinds(t *testing.T) {
	rec := smallRecord(t)
	// From the end: trailer 20, "a\x01b\x02" 4, properties length 2, topic
	// "T" 1, topic length 1, then the one-byte body "x".
	bodyAt := len(rec) - 20 - 4 - 2 - 1 - 1 - 1
	if rec[bodyAt] != 'x' {
		t.Fatalf("body not at %d", bodyAt)
	}
	bad := append([]byte(nil), rec...)
	bad[bodyAt] = 'y'
	if err := Verify(bad); !errors.Is(err, ErrChecksum) {
		t.Errorf("body change: %v, want ErrChecksum", err)
	}
	bad = append([]byte(nil), rec...)
	bad[PosQueueID+3] ^= 1
	if err := Verify(bad); !errors.Is(err, ErrChecksum) {
		t.Errorf("queue id change: %v, want ErrChecksum", err)
	}
	bad = append([]byte(nil), rec...)
	bad[PosMagic] ^= 1
	if err := Verify(bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("magic change: %v, want ErrCorrupt", err)
	}
	bad = append([]byte(nil), rec...)
	bad[len(bad)-15] = 'X' // inside "__CRC32#"
	if err := Verify(bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailer name change: %v, want ErrCorrupt", err)
	}
}

// reseal rewrites an edited record's record checksum (body crc unchanged).
func reseal(rec []byte) []byte { Seal(rec); return rec }

func TestVerifyRequiresWellFormedProperties(t *testing.T) {
	base, err := Encode(nil, &Ext{Message: Message{Topic: "T", Properties: map[string]string{"abc": ""}}})
	if err != nil {
		t.Fatal(err)
	}
	props := len(base) - 20 - len("abc\x01\x02")
	if string(base[props:props+5]) != "abc\x01\x02" {
		t.Fatalf("unexpected layout %q", base[props:])
	}

	// A pair without a name/value separator.
	noSep := append([]byte(nil), base...)
	noSep[props+3] = 'x'
	reseal(noSep)
	if err := Verify(noSep); !errors.Is(err, ErrCorrupt) {
		t.Errorf("pair without separator: Verify = %v, want ErrCorrupt", err)
	}
	if _, err := Decode(noSep); !errors.Is(err, ErrCorrupt) {
		t.Errorf("pair without separator: Decode = %v, want ErrCorrupt", err)
	}
	if _, err := DecodeDispatch(noSep); !errors.Is(err, ErrCorrupt) {
		t.Errorf("pair without separator: DecodeDispatch = %v, want ErrCorrupt", err)
	}

	// The trailer glued onto the previous pair's value.
	glued := append([]byte(nil), base...)
	glued[props+4] = 'g'
	reseal(glued)
	if err := Verify(glued); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailer not a separate pair: Verify = %v, want ErrCorrupt", err)
	}

	// Empty pairs are tolerated.
	empty := append([]byte(nil), base...)
	empty[props] = PropertySeparator
	reseal(empty)
	if err := Verify(empty); err != nil {
		t.Errorf("empty pair: Verify = %v", err)
	}
}

func TestChecksumTrailerDigits(t *testing.T) {
	for _, tc := range roundTripCases() {
		rec, err := Encode(nil, tc.ext)
		if err != nil {
			t.Fatal(err)
		}
		crc := crc32.ChecksumIEEE(rec[:len(rec)-20]) & 0x7fffffff
		digits := string(rec[len(rec)-11 : len(rec)-1])
		if want := reversedDigits(crc); digits != want {
			t.Errorf("%s: digits %q, want %q (crc %d reversed)", tc.name, digits, want, crc)
		}
		got, ok := RecordChecksum(rec)
		if !ok || got != crc {
			t.Errorf("%s: RecordChecksum = %d, %v; want %d", tc.name, got, ok, crc)
		}
		if Checksum(rec[:len(rec)-20]) != crc {
			t.Errorf("%s: Checksum disagrees with crc32 IEEE & 0x7fffffff", tc.name)
		}
	}
}

func TestRecordChecksum(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"__CRC32#\x010000000000\x02", 0, true},
		{"__CRC32#\x011000000000\x02", 1, true},
		{"__CRC32#\x010000000001\x02", 1000000000, true},
		{"__CRC32#\x017463847412\x02", 2147483647, true},
		{"xyz__CRC32#\x019876543210\x02", 123456789, true},
		{"__CRC32#\x018463847412\x02", 0, false}, // 2147483648
		{"__CRC32#\x019999999999\x02", 0, false},
		{"__CRC32#\x01000000000a\x02", 0, false},
		{"__CRC32#\x01 000000000\x02", 0, false},
		{"__CRC32#\x010000000000\x01", 0, false},
		{"__CRC32#\x020000000000\x02", 0, false},
		{"__CRC33#\x010000000000\x02", 0, false},
		{"_CRC32#\x010000000000\x02", 0, false},
		{"", 0, false},
	} {
		got, ok := RecordChecksum([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("RecordChecksum(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSealMatchesRecordChecksum(t *testing.T) {
	rec := smallRecord(t)
	for i := range 64 {
		binary.BigEndian.PutUint32(rec[PosFlag:], uint32(i)*0x9E3779B9)
		Seal(rec)
		got, ok := RecordChecksum(rec)
		if !ok || got != refChecksum(rec[:len(rec)-20]) {
			t.Fatalf("after Seal: RecordChecksum = %d, %v; want %d", got, ok, refChecksum(rec[:len(rec)-20]))
		}
		if err := Verify(rec); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHeaders(t *testing.T) {
	b := make([]byte, 300)
	for i := range b {
		b[i] = 0xEE
	}
	EncodeBlank(b, 300)
	if want := []byte{0, 0, 1, 0x2C, 0xCB, 0xD4, 0x31, 0x94}; !bytes.Equal(b[:8], want) {
		t.Errorf("blank = % x, want % x", b[:8], want)
	}
	if b[8] != 0xEE {
		t.Error("EncodeBlank wrote past 8 bytes")
	}
	h, err := PeekHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.TotalSize != 300 || h.Magic != BlankMagic || !h.IsBlank() || h.IsRecord() {
		t.Errorf("blank header = %+v, IsBlank %v, IsRecord %v", h, h.IsBlank(), h.IsRecord())
	}
	if err := Verify(b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Verify(blank) = %v, want ErrCorrupt", err)
	}
	if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Decode(blank) = %v, want ErrCorrupt", err)
	}
	if _, err := DecodeDispatch(b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("DecodeDispatch(blank) = %v, want ErrCorrupt", err)
	}

	for _, e := range []*Ext{baseExt(), with(func(e *Ext) { e.Topic = strings.Repeat("v", 300) })} {
		rec, err := Encode(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		h, err := PeekHeader(rec)
		if err != nil {
			t.Fatal(err)
		}
		if int(h.TotalSize) != len(rec) || h.IsBlank() || !h.IsRecord() {
			t.Errorf("record header = %+v, IsBlank %v, IsRecord %v", h, h.IsBlank(), h.IsRecord())
		}
	}

	h, err = PeekHeader(make([]byte, 8))
	if err != nil || h != (Header{}) || h.IsBlank() || h.IsRecord() {
		t.Errorf("zero header = %+v, %v", h, err)
	}
	if _, err := PeekHeader(b[:7]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("PeekHeader(7 bytes) = %v, want ErrCorrupt", err)
	}
	if BlankSize != 8 || MagicV1 != 0xDAA320A7 || MagicV2 != 0xDAA320AB || BlankMagic != 0xCBD43194 {
		t.Error("magic constants differ from RocketMQ")
	}
	v1, v2, blank := MagicV1, MagicV2, BlankMagic
	if int32(v1) != -626843481 || int32(v2) != -626843477 || int32(blank) != -875286124 {
		t.Error("magic constants differ from RocketMQ's signed values")
	}
}

// refDelay is what DecodeDispatch should make of a DELAY value.
func refDelay(s string) int32 {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

func checkDispatch(t testing.TB, rec []byte) {
	t.Helper()
	e, err := Decode(rec)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	d, err := DecodeDispatch(rec)
	if err != nil {
		t.Fatalf("DecodeDispatch: %v", err)
	}
	want := Dispatch{
		Topic:          e.Topic,
		QueueID:        e.QueueID,
		QueueOffset:    e.QueueOffset,
		PhysicalOffset: e.PhysicalOffset,
		Size:           e.StoreSize,
		SysFlag:        e.SysFlag,
		StoreTimestamp: e.StoreTimestamp,
		TagsHash:       TagsHash(e.Tags()),
		Keys:           e.Property(PropertyKeys),
		UniqueKey:      e.UniqueID(),
		DelayLevel:     refDelay(e.Property(PropertyDelayLevel)),
	}
	if d != want {
		t.Errorf("DecodeDispatch = %+v\nwant %+v", d, want)
	}
}

func TestDecodeDispatch(t *testing.T) {
	for _, tc := range roundTripCases() {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := Encode(nil, tc.ext)
			if err != nil {
				t.Fatal(err)
			}
			checkDispatch(t, rec)
			d, _ := DecodeDispatch(rec)
			if d.Size != int32(len(rec)) {
				t.Errorf("Size = %d, want %d", d.Size, len(rec))
			}
		})
	}
	e := baseExt()
	rec, _ := Encode(nil, e)
	d, err := DecodeDispatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	if d.TagsHash != 2598919 || d.Keys != "order-1 order-2" || d.DelayLevel != 3 ||
		d.UniqueKey != "C0A8000A12341A2B3C4D000000010001" || d.Topic != "TopicTest" {
		t.Errorf("DecodeDispatch = %+v", d)
	}
	for _, delay := range []string{"", "0", "1", "18", "007", "-1", "+2", "x", "1x", "-", "+",
		"2147483647", "2147483648", "-2147483648", "-2147483649", "99999999999999999999999"} {
		e := with(func(e *Ext) { e.SetProperty(PropertyDelayLevel, delay) })
		rec, err := Encode(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		checkDispatch(t, rec)
	}
}

func TestDecodeDispatchLastDuplicateWins(t *testing.T) {
	// A record written by something else may repeat a key; Decode and
	// DecodeDispatch must agree on which one counts.
	e := &Ext{Message: Message{Topic: "T", Properties: map[string]string{"TAGS": "zzzzz", "KEYS": "k1", "DELAY": "2"}}}
	rec, err := Encode(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite the properties in place with the same length.
	old := "DELAY\x012\x02KEYS\x01k1\x02TAGS\x01zzzzz\x02"
	repl := "TAGS\x01aaa\x02\x02\x02TAGS\x01bb\x02\x02TAGS\x01c\x02"
	p := bytes.Index(rec, []byte(old))
	if p < 0 || len(repl) != len(old) {
		t.Fatalf("unexpected layout: %q", rec)
	}
	copy(rec[p:], repl)
	Seal(rec)
	if err := Verify(rec); err != nil {
		t.Fatal(err)
	}
	checkDispatch(t, rec)
	d, _ := DecodeDispatch(rec)
	if d.TagsHash != TagsHash("c") {
		t.Errorf("TagsHash = %d, want hash of the last TAGS", d.TagsHash)
	}
}

func TestRecordPropertiesLookup(t *testing.T) {
	e := &Ext{Message: Message{Topic: "T", Body: []byte("b"), Properties: map[string]string{
		"region": "eu", "reg": "x", PropertyTags: "paid", "empty": ""}}}
	rec, err := Encode(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	props, err := RecordProperties(rec)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"region": "eu", "reg": "x", PropertyTags: "paid", "empty": ""} {
		if v, ok := LookupProperty(props, name); !ok || string(v) != want {
			t.Errorf("%s: %q %v, want %q", name, v, ok, want)
		}
	}
	for _, name := range []string{"re", "regions", "missing", ""} {
		if v, ok := LookupProperty(props, name); ok {
			t.Errorf("%s: found %q", name, v)
		}
	}
	if _, err := RecordProperties(rec[:len(rec)-3]); err == nil {
		t.Error("a truncated record's properties were returned")
	}
}
