package message

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestEncodeProperties(t *testing.T) {
	for _, tc := range []struct {
		props map[string]string
		want  string
	}{
		{nil, ""},
		{map[string]string{}, ""},
		{map[string]string{"TAGS": "TagA"}, "TAGS\x01TagA\x02"},
		{map[string]string{"b": "2", "a": "1", "c": ""}, "a\x011\x02b\x012\x02c\x01\x02"},
		{map[string]string{"UNIQ_KEY": "X", "KEYS": "k1 k2", "WAIT": "true", "DELAY": "3"},
			"DELAY\x013\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01X\x02WAIT\x01true\x02"},
		// Sorted by bytes, not by locale: upper case before lower case.
		{map[string]string{"a": "x", "B": "y", "_": "z"}, "B\x01y\x02_\x01z\x02a\x01x\x02"},
	} {
		if got := string(EncodeProperties(tc.props)); got != tc.want {
			t.Errorf("EncodeProperties(%q) = %q, want %q", tc.props, got, tc.want)
		}
	}
}

func TestEncodePropertiesManyKeysSorted(t *testing.T) {
	props := map[string]string{}
	var want strings.Builder
	for i := range 100 {
		k := fmt.Sprintf("key%03d", i)
		props[k] = fmt.Sprint(i)
		fmt.Fprintf(&want, "%s\x01%d\x02", k, i)
	}
	for range 10 { // map order is random; the encoding must not be
		if got := string(EncodeProperties(props)); got != want.String() {
			t.Fatalf("EncodeProperties = %q, want %q", got, want.String())
		}
	}
}

func TestPropertiesRoundTrip(t *testing.T) {
	for _, props := range []map[string]string{
		{},
		{"TAGS": "TagA"},
		{"a": "", "b": "x y z", "KEYS": "k1 k2", "UNIQ_KEY": "0A0000010000", "é": "中文", "sp ace": " "},
		{PropertyTransactionID: "tx-1", PropertyProducerGroup: "pg", PropertyTransactionPrepared: "true"},
	} {
		got, err := DecodeProperties(EncodeProperties(props))
		if err != nil {
			t.Fatalf("DecodeProperties(EncodeProperties(%q)): %v", props, err)
		}
		if !propsEqual(got, props) {
			t.Errorf("round trip of %q gave %q", props, got)
		}
	}
}

func TestDecodeProperties(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"", map[string]string{}},
		{"a\x01b\x02", map[string]string{"a": "b"}},
		{"a\x01b", map[string]string{"a": "b"}}, // no trailing separator
		{"a\x01b\x02c\x01d", map[string]string{"a": "b", "c": "d"}},
		{"\x02a\x01b\x02\x02\x02c\x01\x02\x02", map[string]string{"a": "b", "c": ""}}, // empty pairs
		{"\x02", map[string]string{}},
		{"a\x01", map[string]string{"a": ""}},
		{"\x01v\x02", map[string]string{"": "v"}},
		{"a\x01b\x01c\x02", map[string]string{"a": "b\x01c"}}, // first \x01 splits
		{"a\x01x\x02a\x01y\x02", map[string]string{"a": "y"}}, // last one wins
		{"__CRC32#\x011234567890\x02", map[string]string{PropertyCRC32: "1234567890"}},
	} {
		got, err := DecodeProperties([]byte(tc.in))
		if err != nil {
			t.Errorf("DecodeProperties(%q): %v", tc.in, err)
			continue
		}
		if got == nil || !propsEqual(got, tc.want) {
			t.Errorf("DecodeProperties(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDecodePropertiesErrors(t *testing.T) {
	for _, in := range []string{
		"a",
		"ab\x02",
		"a\x01b\x02c",
		"a\x01b\x02cd\x02e\x01f\x02",
		"\x02\x02x",
	} {
		got, err := DecodeProperties([]byte(in))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeProperties(%q) = %q, %v; want an error wrapping ErrCorrupt", in, got, err)
		}
		if got != nil {
			t.Errorf("DecodeProperties(%q) returned a map with its error", in)
		}
	}
}

func TestValidateProperties(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]string
		ok    bool
	}{
		{"nil", nil, true},
		{"empty map", map[string]string{}, true},
		{"ordinary", map[string]string{"TAGS": "a", "KEYS": "x y", "x": ""}, true},
		{"unicode", map[string]string{"名": "值"}, true},
		{"other control bytes", map[string]string{"a\x00": "\x03\x7f\n"}, true},
		{"empty name", map[string]string{"": "v"}, false},
		{"empty name and value", map[string]string{"": ""}, false},
		{"reserved checksum name", map[string]string{PropertyCRC32: "1"}, false},
		{"\\x01 in name", map[string]string{"a\x01": "v"}, false},
		{"\\x02 in name", map[string]string{"\x02a": "v"}, false},
		{"\\x01 in value", map[string]string{"a": "v\x01w"}, false},
		{"\\x02 in value", map[string]string{"a": "v\x02"}, false},
		{"one bad among good", map[string]string{"a": "1", "b": "2", "c": "\x02"}, false},
		// Names and values longer than 64 bytes are searched another way.
		{"long value", map[string]string{"a": strings.Repeat("v", 200)}, true},
		{"\\x01 at the end of a long value", map[string]string{"a": strings.Repeat("v", 200) + "\x01"}, false},
		{"\\x02 inside a long name", map[string]string{strings.Repeat("n", 100) + "\x02" + strings.Repeat("n", 100): "v"}, false},
		{"\\x02 last of 64 bytes", map[string]string{"a": strings.Repeat("v", 63) + "\x02"}, false},
		{"\\x01 last of 65 bytes", map[string]string{"a": strings.Repeat("v", 64) + "\x01"}, false},
	} {
		err := ValidateProperties(tc.props)
		if tc.ok && err != nil {
			t.Errorf("%s: ValidateProperties = %v, want nil", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrBadProperty) {
			t.Errorf("%s: ValidateProperties = %v, want ErrBadProperty", tc.name, err)
		}
		// Whatever passes validation can be stored and read back.
		if err == nil {
			rec, err := Encode(nil, &Ext{Message: Message{Topic: "T", Properties: tc.props}})
			if err != nil {
				t.Errorf("%s: valid properties do not encode: %v", tc.name, err)
				continue
			}
			e, err := Decode(rec)
			if err != nil || !propsEqual(e.Properties, tc.props) {
				t.Errorf("%s: decoded %q, %v", tc.name, e.Properties, err)
			}
		}
	}
}

func TestPropertySeparators(t *testing.T) {
	if NameValueSeparator != 1 || PropertySeparator != 2 || KeySeparator != " " {
		t.Error("separators differ from RocketMQ's MessageConst")
	}
	if crcReservedLen != 20 {
		t.Errorf("crcReservedLen = %d, RocketMQ's CRC32_RESERVED_LEN is 20", crcReservedLen)
	}
}

func TestDecodePropertiesKnownNames(t *testing.T) {
	for _, k := range []string{
		PropertyKeys, PropertyTags, PropertyWaitStoreMsgOK, PropertyDelayLevel, PropertyRetryTopic,
		PropertyRealTopic, PropertyRealQueueID, PropertyTransactionPrepared, PropertyProducerGroup,
		PropertyMinOffset, PropertyMaxOffset, PropertyUniqueKey, PropertyReconsumeTime,
		PropertyMaxReconsumeTimes, PropertyTransactionPreparedQOff, PropertyTransactionID,
		PropertyTransactionCheckTimes, PropertyCheckImmunityTime, PropertyOriginMessageID,
		PropertyConsumeStartTime, PropertyShardingKey, PropertyTimerDeliverMS, PropertyTimerDelaySec,
		PropertyTimerDelayMS, PropertyDLQOriginTopic, PropertyDLQOriginMessageID, PropertyCRC32,
		"KEY", "KEYSS", "tags",
	} {
		got, err := DecodeProperties([]byte(k + "\x01v-" + k + "\x02"))
		if err != nil || len(got) != 1 || got[k] != "v-"+k {
			t.Errorf("DecodeProperties of name %q = %q, %v", k, got, err)
		}
	}
}

// mapSink makes the maps of TestDecodePropertiesAllocations escape, as the
// one DecodeProperties returns does.
var mapSink map[string]string

// TestDecodePropertiesAllocations: the map and one copy of the field, however
// many pairs (the names and values are parts of that copy).
func TestDecodePropertiesAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b := EncodeProperties(map[string]string{PropertyTags: "a", PropertyKeys: "k1 k2", PropertyUniqueKey: "ID", "custom": "v"})
	mapOnly := testing.AllocsPerRun(100, func() {
		mapSink = make(map[string]string, 5)
		mapSink["k"] = "v"
	})
	if n := testing.AllocsPerRun(100, func() {
		var err error
		if mapSink, err = DecodeProperties(b); err != nil {
			t.Fatal(err)
		}
	}); n != mapOnly+1 {
		t.Errorf("DecodeProperties made %v allocations, want %v (the map's) + 1", n, mapOnly)
	}
}
