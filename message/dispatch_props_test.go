package message

import (
	"testing"
)

// checkSetProperties encodes a record with props and fails unless the
// fields SetProperties takes from props equal DecodeDispatch's.
func checkSetProperties(t *testing.T, props map[string]string) {
	t.Helper()
	e := baseExt()
	e.Properties = props
	rec, err := Encode(nil, e)
	if err != nil {
		return // props a record cannot hold: nothing to compare
	}
	want, err := DecodeDispatch(rec)
	if err != nil {
		t.Fatalf("%q: DecodeDispatch: %v", props, err)
	}
	got := want
	got.TagsHash, got.Keys, got.UniqueKey, got.DelayLevel, got.TimerOutMS = 7, "stale", "stale", 7, 7
	got.SetProperties(props)
	if got != want {
		t.Fatalf("%q:\n SetProperties %+v\nDecodeDispatch %+v", props, got, want)
	}
}

// TestSetPropertiesMatchesDecode: what the put path knows of a record's
// properties gives the dispatcher what decoding the record would.
func TestSetPropertiesMatchesDecode(t *testing.T) {
	for _, props := range []map[string]string{
		nil,
		{},
		{PropertyTags: "TagA", PropertyKeys: "k1 k2", PropertyUniqueKey: "C0A8000A12341A2B3C4D000000010001"},
		{PropertyTags: ""},
		{PropertyTags: "标签😀", PropertyKeys: "", PropertyUniqueKey: ""},
		{PropertyDelayLevel: "3"},
		{PropertyDelayLevel: "-2"},
		{PropertyDelayLevel: "+4"},
		{PropertyDelayLevel: "x"},
		{PropertyDelayLevel: "2147483648"},
		{PropertyDelayLevel: ""},
		{PropertyTimerOutMS: "1700000000000"},
		{PropertyTimerOutMS: "-5"},
		{PropertyTimerOutMS: "9999999999999999999"},
		{PropertyTimerOutMS: ""},
		{PropertyTags: "a\x01b", "other": "v"},
	} {
		checkSetProperties(t, props)
	}
}

func FuzzSetPropertiesMatchesDecode(f *testing.F) {
	f.Add("TagA", "k1 k2", "ID-1", "3", "1700000000000", true)
	f.Add("", "", "", "", "", false)
	f.Add("t\x01x", "k", "u", "-7", "12x", true)
	f.Fuzz(func(t *testing.T, tags, keys, uniq, delay, timer string, all bool) {
		props := map[string]string{PropertyTags: tags, PropertyKeys: keys, PropertyUniqueKey: uniq}
		if all {
			props[PropertyDelayLevel] = delay
			props[PropertyTimerOutMS] = timer
		}
		checkSetProperties(t, props)
	})
}
