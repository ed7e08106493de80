package message

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"unicode/utf16"
)

// refJavaHash is an independent String.hashCode: 31*h + c over the UTF-16
// code units, in uint32 so the wrap-around is explicit.
func refJavaHash(s string) int32 {
	var h uint32
	for _, u := range utf16.Encode([]rune(s)) {
		h = h*31 + uint32(u)
	}
	return int32(h)
}

func TestJavaStringHash(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"ab", 97*31 + 98},
		{"hello", 99162322},
		{"TagA", 2598919},
		{"TagA||TagB", 1789476431},
		{"polygenelubricants", math.MinInt32}, // a well-known overflow to exactly -2^31
		{"The quick brown fox jumps over the lazy dog", -609428141},
		{"é", 233},
		{"中文", 646394},
		{"😀", 1772899},         // U+1F600 = D83D DE00
		{"a😀b", 57849694},      // surrogate pair in the middle
		{"𝄞music", 1496085755}, // U+1D11E = D834 DD1E
		{"\uFFFF", 0xFFFF},
		{"\U00010000", 0xD800*31 + 0xDC00},
		{"\U0010FFFF", 0xDBFF*31 + 0xDFFF},
	} {
		if got := JavaStringHash(tc.s); got != tc.want {
			t.Errorf("JavaStringHash(%q) = %d, want %d", tc.s, got, tc.want)
		}
		if got := refJavaHash(tc.s); got != tc.want {
			t.Errorf("reference hash of %q = %d, table says %d", tc.s, got, tc.want)
		}
	}
}

func TestJavaStringHashRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := []func() rune{
		func() rune { return rune(r.IntN(0x80)) },
		func() rune { return rune(0x80 + r.IntN(0x800-0x80)) },
		func() rune { return rune(0x800 + r.IntN(0xD800-0x800)) },
		func() rune { return rune(0xE000 + r.IntN(0x10000-0xE000)) },
		func() rune { return rune(0x10000 + r.IntN(0x110000-0x10000)) },
	}
	for range 2000 {
		rs := make([]rune, r.IntN(40))
		for i := range rs {
			rs[i] = pick[r.IntN(len(pick))]()
		}
		s := string(rs)
		if got, want := JavaStringHash(s), refJavaHash(s); got != want {
			t.Fatalf("JavaStringHash(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestTagsHash(t *testing.T) {
	for _, tc := range []struct {
		tags string
		want int64
	}{
		{"", 0},
		{"TagA", 2598919},
		{"polygenelubricants", -2147483648}, // sign-extended like Java's int→long
		{"The quick brown fox jumps over the lazy dog", -609428141},
	} {
		if got := TagsHash(tc.tags); got != tc.want {
			t.Errorf("TagsHash(%q) = %d, want %d", tc.tags, got, tc.want)
		}
	}
}

func TestSplitKeys(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" ", nil},
		{"   ", nil},
		{"a", []string{"a"}},
		{"a b", []string{"a", "b"}},
		{"  a   b  ", []string{"a", "b"}},
		{"order-1 order-2 order-3", []string{"order-1", "order-2", "order-3"}},
		// RocketMQ splits on " " only; other whitespace is part of a key.
		{"a\tb c", []string{"a\tb", "c"}},
		{"a\u00a0b", []string{"a\u00a0b"}},
		{"中 文", []string{"中", "文"}},
	} {
		if got := SplitKeys(tc.in); !slices.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("SplitKeys(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMessageAccessors(t *testing.T) {
	var m Message
	if m.Tags() != "" || m.Keys() != nil || m.UniqueID() != "" || m.Property("x") != "" {
		t.Error("accessors of an empty message are not empty")
	}
	m.SetProperty(PropertyTags, "TagA")
	m.SetProperty(PropertyKeys, "k1  k2")
	m.SetProperty(PropertyUniqueKey, "ABC")
	m.SetProperty("custom", "v")
	if m.Properties == nil {
		t.Fatal("SetProperty did not allocate the map")
	}
	if m.Tags() != "TagA" || !slices.Equal(m.Keys(), []string{"k1", "k2"}) || m.UniqueID() != "ABC" || m.Property("custom") != "v" {
		t.Errorf("accessors: tags %q keys %q uniq %q custom %q", m.Tags(), m.Keys(), m.UniqueID(), m.Property("custom"))
	}
	m.SetProperty("custom", "w")
	if m.Property("custom") != "w" || len(m.Properties) != 4 {
		t.Errorf("SetProperty did not overwrite: %q", m.Properties)
	}
	if PropertyTags != "TAGS" || PropertyKeys != "KEYS" || PropertyUniqueKey != "UNIQ_KEY" || PropertyDelayLevel != "DELAY" {
		t.Error("property names differ from RocketMQ's MessageConst")
	}
}

func TestExtMsgID(t *testing.T) {
	e := Ext{StoreHost: netip.MustParseAddrPort("10.0.0.1:10911"), PhysicalOffset: 0x1234}
	if got, want := e.MsgID(), "0A00000100002A9F0000000000001234"; got != want {
		t.Errorf("MsgID = %s, want %s", got, want)
	}
	rec, err := Encode(nil, &Ext{Message: Message{Topic: "T"}, StoreHost: e.StoreHost, PhysicalOffset: 4096})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(rec)
	if err != nil {
		t.Fatal(err)
	}
	host, off, err := ParseOffsetMsgID(d.MsgID())
	if err != nil || host != e.StoreHost || off != 4096 {
		t.Errorf("ParseOffsetMsgID(%s) = %v, %d, %v", d.MsgID(), host, off, err)
	}
}
