package message

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestAppendEditedProperties: editing encoded pairs gives the encoding of
// the edited map, whatever the edits' names sort against the pairs'.
func TestAppendEditedProperties(t *testing.T) {
	base := map[string]string{"B": "1", "D": "2", "F": "3"}
	cases := [][]PropertyEdit{
		nil,
		{{Name: "A", Value: "new"}},
		{{Name: "G", Value: "new"}},
		{{Name: "B", Value: "replaced"}, {Name: "F", Remove: true}},
		{{Name: "A", Remove: true}, {Name: "C", Value: "c"}, {Name: "D", Remove: true}, {Name: "E", Value: ""}, {Name: "Z", Remove: true}},
		{{Name: "B", Remove: true}, {Name: "D", Remove: true}, {Name: "F", Remove: true}},
	}
	for _, edits := range cases {
		want := maps.Clone(base)
		for _, e := range edits {
			if e.Remove {
				delete(want, e.Name)
			} else {
				want[e.Name] = e.Value
			}
		}
		prefix := []byte("kept")
		got, err := AppendEditedProperties(prefix, EncodeProperties(base), edits)
		if err != nil {
			t.Fatalf("%v: %v", edits, err)
		}
		if string(got[:4]) != "kept" || string(got[4:]) != string(EncodeProperties(want)) {
			t.Errorf("%v: got %q, want %q", edits, got[4:], EncodeProperties(want))
		}
	}
	if got, err := AppendEditedProperties(nil, nil, []PropertyEdit{{Name: "X", Value: "1"}}); err != nil || string(got) != "X\x011\x02" {
		t.Errorf("edits of no pairs: %q %v", got, err)
	}

	bad := []struct {
		edits []PropertyEdit
		want  error
	}{
		{[]PropertyEdit{{Name: "B", Value: "1"}, {Name: "A", Value: "2"}}, ErrBadProperty}, // out of order
		{[]PropertyEdit{{Name: "A", Value: "1"}, {Name: "A", Remove: true}}, ErrBadProperty},
		{[]PropertyEdit{{Name: "A", Value: "x\x02y"}}, ErrBadProperty},
		{[]PropertyEdit{{Name: PropertyCRC32, Value: "1"}}, ErrBadProperty},
		{[]PropertyEdit{{Name: "", Value: "1"}}, ErrBadProperty},
		{[]PropertyEdit{{Name: "Big", Value: strings.Repeat("v", MaxPropertiesSize)}}, ErrTooLarge},
	}
	for _, tc := range bad {
		got, err := AppendEditedProperties([]byte("kept"), EncodeProperties(base), tc.edits)
		if !errors.Is(err, tc.want) || string(got) != "kept" {
			t.Errorf("%v: %q, %v; want dst unchanged and %v", tc.edits, got, err, tc.want)
		}
	}
}

// FuzzAppendEditedProperties: for any properties and any edits, the
// edited pairs are the encoding of the edited map, or the edits are
// refused with dst unchanged.
func FuzzAppendEditedProperties(f *testing.F) {
	f.Add("DELAY=3;KEYS=a b;UNIQ_KEY=x", "-DELAY;REAL_QID=1;REAL_TOPIC=t;TIMER_OUT_MS=5")
	f.Add("", "A=1")
	f.Add("B=1;D=2", "-A;B=;C=c;-D;-Z")
	f.Fuzz(func(t *testing.T, pairsSpec, editsSpec string) {
		props := map[string]string{}
		for _, kv := range strings.Split(pairsSpec, ";") {
			k, v, _ := strings.Cut(kv, "=")
			if k == "" || k == PropertyCRC32 || hasSeparator(k) || hasSeparator(v) {
				continue
			}
			props[k] = v
		}
		byName := map[string]PropertyEdit{}
		for _, spec := range strings.Split(editsSpec, ";") {
			if name, ok := strings.CutPrefix(spec, "-"); ok {
				byName[name] = PropertyEdit{Name: name, Remove: true}
				continue
			}
			name, value, _ := strings.Cut(spec, "=")
			byName[name] = PropertyEdit{Name: name, Value: value}
		}
		edits := slices.SortedFunc(maps.Values(byName), func(a, b PropertyEdit) int { return strings.Compare(a.Name, b.Name) })
		want, valid := maps.Clone(props), true
		for _, e := range edits {
			if e.Remove {
				delete(want, e.Name)
				continue
			}
			if e.Name == "" || e.Name == PropertyCRC32 || hasSeparator(e.Name) || hasSeparator(e.Value) {
				valid = false
			}
			want[e.Name] = e.Value
		}
		got, err := AppendEditedProperties([]byte("kept"), EncodeProperties(props), edits)
		wantPairs := EncodeProperties(want)
		switch {
		case !valid:
			if !errors.Is(err, ErrBadProperty) || string(got) != "kept" {
				t.Fatalf("edits %v: got %q, %v; want a refusal", edits, got, err)
			}
		case len(wantPairs)+crcReservedLen > MaxPropertiesSize:
			if !errors.Is(err, ErrTooLarge) || string(got) != "kept" {
				t.Fatalf("edits %v: got %q, %v; want too large", edits, got, err)
			}
		case err != nil || string(got) != "kept"+string(wantPairs):
			t.Fatalf("pairs %q, edits %v: got %q, %v; want %q", EncodeProperties(props), edits, got, err, wantPairs)
		}
	})
}
