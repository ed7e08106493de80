package message

import (
	"errors"
	"maps"
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
