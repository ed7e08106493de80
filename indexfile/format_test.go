package indexfile

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestJavaHashCode(t *testing.T) {
	// Expectations worked out from s[0]*31^(n-1) + ... + s[n-1] in int32
	// and checked against java.lang.String.hashCode.
	tests := []struct {
		in        string
		java, abs int32
	}{
		{"", 0, 0},
		{"a", 97, 97},
		{"hello", 99162322, 99162322},
		{"Aa", 2112, 2112}, // 65*31+97
		{"BB", 2112, 2112}, // 66*31+66: a classic collision
		{"é", 233, 233},
		{"中文", 646394, 646394},                 // 0x4E2D*31 + 0x6587
		{"😀", 1772899, 1772899},                // surrogates 0xD83D*31 + 0xDE00
		{"Hello World", -862545276, 862545276}, // overflows, negative
		{"TopicTest#order-42", -870421153, 870421153},
		{"日本語キー#x", -305708805, 305708805},
		{"polygenelubricants", math.MinInt32, 0}, // abs does not fit: 0
	}
	for _, tt := range tests {
		if got := JavaHashCode(tt.in); got != tt.java {
			t.Errorf("JavaHashCode(%q) = %d, want %d", tt.in, got, tt.java)
		}
		if got := KeyHash(tt.in); got != tt.abs {
			t.Errorf("KeyHash(%q) = %d, want %d", tt.in, got, tt.abs)
		}
	}
}

func TestJavaHashCodeMatchesReference(t *testing.T) {
	// Independent reference: the same polynomial over UTF-16 units, in
	// int64 reduced mod 2^32.
	ref := func(s string) int32 {
		var h uint64
		for _, u := range utf16Units(s) {
			h = (h*31 + uint64(u)) & 0xffffffff
		}
		return int32(uint32(h))
	}
	for _, s := range []string{"x", strings.Repeat("z", 100), "ß∂ƒ©˙∆˚¬…æ", "𝄞 clef", "topic#key with spaces"} {
		if got, want := JavaHashCode(s), ref(s); got != want {
			t.Errorf("JavaHashCode(%q) = %d, reference %d", s, got, want)
		}
	}
}

func utf16Units(s string) []uint16 {
	var out []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
		} else {
			out = append(out, uint16(r))
		}
	}
	return out
}

// TestTopicKeyHash: the key's hash computed in parts is the hash of the
// built key, for keys of every kind the index sees, malformed UTF-8 at the
// seams included (a control that hashes the parts with JavaHashCode alone
// and adds them would differ).
func TestTopicKeyHash(t *testing.T) {
	topics := []string{"", "orders", "TopicTest", "%RETRY%group", "t\xe4\xb8", "\xf0\x9f\x98"}
	keys := []string{"", "order-42", "中文", "😀", "\xb8x", "\x80", strings.Repeat("k", 300), "polygenelubricants"}
	for _, topic := range topics {
		for _, key := range keys {
			if got, want := TopicKeyHash(topic, key), KeyHash(BuildKey(topic, key)); got != want {
				t.Errorf("TopicKeyHash(%q, %q) = %d, KeyHash of the built key %d", topic, key, got, want)
			}
		}
	}
	if TopicKeyHash("orders", "order-42") == absHash(JavaHashCode("orders")+JavaHashCode("#order-42")) {
		t.Error("the parts' hashes added give the same hash: the test would not see a wrong combination")
	}
}

func TestBuildKey(t *testing.T) {
	if got := BuildKey("orders", "order-42"); got != "orders#order-42" {
		t.Fatalf("BuildKey = %q", got)
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	tests := []Header{
		{},
		{IndexCount: 1},
		{BeginTimestamp: 1714560000000, EndTimestamp: 1714560999999, BeginPhyOffset: 0, EndPhyOffset: 1 << 40, SlotCount: 5_000_000, IndexCount: 20_000_000},
		{BeginTimestamp: -1, EndTimestamp: math.MaxInt64, BeginPhyOffset: math.MinInt64, EndPhyOffset: -5, SlotCount: math.MaxInt32, IndexCount: math.MaxInt32},
	}
	for _, h := range tests {
		buf := make([]byte, HeaderSize)
		EncodeHeader(buf, h)
		got, err := DecodeHeader(buf)
		if err != nil || got != h {
			t.Errorf("round trip %+v: got %+v, %v", h, got, err)
		}
	}
}

func TestHeaderBytes(t *testing.T) {
	buf := make([]byte, HeaderSize)
	EncodeHeader(buf, Header{BeginTimestamp: 0x0102030405060708, EndTimestamp: 0x1112131415161718,
		BeginPhyOffset: 0x2122232425262728, EndPhyOffset: 0x3132333435363738, SlotCount: 0x41424344, IndexCount: 0x51525354})
	want := []byte{
		1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
		0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38,
		0x41, 0x42, 0x43, 0x44, 0x51, 0x52, 0x53, 0x54,
	}
	if string(buf) != string(want) {
		t.Fatalf("header bytes\n got %x\nwant %x", buf, want)
	}
}

func TestDecodeHeaderErrors(t *testing.T) {
	if _, err := DecodeHeader(make([]byte, HeaderSize-1)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short: %v", err)
	}
	buf := make([]byte, HeaderSize)
	EncodeHeader(buf, Header{IndexCount: -1})
	if _, err := DecodeHeader(buf); !errors.Is(err, ErrCorrupt) {
		t.Errorf("negative indexCount: %v", err)
	}
	EncodeHeader(buf, Header{SlotCount: -1, IndexCount: 1})
	if _, err := DecodeHeader(buf); !errors.Is(err, ErrCorrupt) {
		t.Errorf("negative slot count: %v", err)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	tests := []Entry{
		{},
		{KeyHash: 99162322, PhyOffset: 123456789, TimeDiff: 42, PrevIndex: 7},
		{KeyHash: math.MaxInt32, PhyOffset: math.MaxInt64, TimeDiff: math.MaxInt32, PrevIndex: math.MaxInt32},
	}
	for _, e := range tests {
		buf := make([]byte, EntrySize)
		EncodeEntry(buf, e)
		got, err := DecodeEntry(buf)
		if err != nil || got != e {
			t.Errorf("round trip %+v: got %+v, %v", e, got, err)
		}
	}
	buf := make([]byte, EntrySize)
	EncodeEntry(buf, Entry{KeyHash: 0x01020304, PhyOffset: 0x1112131415161718, TimeDiff: 0x21222324, PrevIndex: 0x31323334})
	want := "0102030411121314151617182122232431323334"
	if got := hexString(buf); got != want {
		t.Fatalf("entry bytes %s, want %s", got, want)
	}
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func TestDecodeEntryErrors(t *testing.T) {
	if _, err := DecodeEntry(make([]byte, EntrySize-1)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short: %v", err)
	}
	for _, e := range []Entry{{KeyHash: -1}, {PhyOffset: -1}, {TimeDiff: -1}, {PrevIndex: -1}} {
		buf := make([]byte, EntrySize)
		EncodeEntry(buf, e)
		if _, err := DecodeEntry(buf); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%+v: %v", e, err)
		}
	}
}

func TestOptions(t *testing.T) {
	d := DefaultOptions()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := d.FileSize(); got != 420_000_040 {
		t.Fatalf("default file size %d", got)
	}
	for _, o := range []Options{{SlotCount: 0, MaxEntries: 10}, {SlotCount: 10, MaxEntries: 1}, {SlotCount: -1, MaxEntries: 10},
		{SlotCount: 10, MaxEntries: math.MaxInt32 + 1}, {SlotCount: 1 << 30, MaxEntries: 1 << 30}} {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", o)
		}
	}
}

func TestFileNames(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 30, 45, 123_456_789, time.Local)
	name := FileName(at)
	if name != "20240501123045123" {
		t.Fatalf("FileName = %q", name)
	}
	back, ok := parseFileName(name)
	if !ok || !back.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("parse %q = %v, %v", name, back, ok)
	}
	for _, bad := range []string{"", "2024050112304512", "2024050112304512x", "abc", "20241301123045123"} {
		if _, ok := parseFileName(bad); ok {
			t.Errorf("parseFileName(%q) accepted", bad)
		}
	}
	// Same millisecond, and a clock that stepped back: bump past last.
	if got, _ := nextFileName(at, name); got != "20240501123045124" {
		t.Errorf("same ms: %q", got)
	}
	if got, _ := nextFileName(at.Add(-time.Hour), "20240501123045999"); got != "20240501123046000" {
		t.Errorf("clock back: %q", got)
	}
	if got, _ := nextFileName(at, ""); got != name {
		t.Errorf("first: %q", got)
	}
}
