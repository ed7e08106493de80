package pop

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestHandleCodec(t *testing.T) {
	h := Handle{Broker: "broker-a", Topic: "orders", QueueID: 3, Offset: 123456789, Seq: 1796156528492123, VisibleAtMS: 1796156528492}
	tok := EncodeHandle("billing", h)
	// The format is stable: handles survive restarts and upgrades.
	if want := "1:broker-a:orders:3:21i3v9:hoomx1odaz:mx557zak:7F9F7A5E"; tok != want {
		t.Fatalf("token %q, want %q", tok, want)
	}
	got, err := DecodeHandle("billing", tok)
	if err != nil || got != h {
		t.Fatalf("decode: %+v %v", got, err)
	}
	for _, tc := range []struct {
		name, group, tok string
		want             error
	}{
		{"other group", "billing2", tok, ErrHandleMismatch},
		{"empty", "billing", "", ErrMalformedHandle},
		{"fields", "billing", "1:a:b", ErrMalformedHandle},
		{"version", "billing", "2" + tok[1:], ErrMalformedHandle},
		{"flipped check", "billing", tok[:len(tok)-1] + "0", ErrHandleMismatch},
		{"lower-case check", "billing", tok[:len(tok)-8] + strings.ToLower(tok[len(tok)-8:]), ErrMalformedHandle},
		{"bad topic", "billing", strings.Replace(tok, "orders", "or ders", 1), ErrMalformedHandle},
		{"negative queue", "billing", strings.Replace(tok, ":3:", ":-3:", 1), ErrMalformedHandle},
		{"leading zero queue", "billing", strings.Replace(tok, ":3:", ":03:", 1), ErrMalformedHandle},
		{"offset changed", "billing", strings.Replace(tok, ":21i3v9:", ":21i3va:", 1), ErrHandleMismatch},
		{"zero seq", "billing", EncodeHandle("billing", Handle{Broker: "b", Topic: "t", Seq: 0}), ErrMalformedHandle},
		{"too long", "billing", strings.Repeat("1", maxHandleLen+1), ErrMalformedHandle},
	} {
		if _, err := DecodeHandle(tc.group, tc.tok); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func sampleRecords() []*Record {
	return []*Record{
		{Kind: KindPop, TimeMS: 1796156528492, Group: "g", Topic: "t", QueueID: 7, Next: 42, AttemptID: "a-1", ClientID: "c@1", InvisibleMS: 60000,
			Entries: []Entry{{Offset: 40, Seq: 99, Attempt: 1, VisibleAtMS: 1796156588492}, {Offset: 41, Seq: 100, Attempt: 3, VisibleAtMS: 1796156588492}}},
		{Kind: KindPop, Group: "g", Topic: "t", Next: 0},
		{Kind: KindAck, TimeMS: 1, Group: "%RETRY%g", Topic: "t", QueueID: 0, Entries: []Entry{{Offset: 0, Seq: 1 << 60}}},
		{Kind: KindDLQ, TimeMS: 2, Group: "g", Topic: "t", QueueID: 1, Entries: []Entry{{Offset: 5}}},
		{Kind: KindChange, TimeMS: 3, Group: "g", Topic: "t", QueueID: 1, Entries: []Entry{{Offset: 5, OldSeq: 7, Seq: 8, VisibleAtMS: 9}}},
		{Kind: KindRenew, TimeMS: -4, Group: "g", Topic: "t", QueueID: 1, Entries: []Entry{{Offset: 5, Seq: 8, VisibleAtMS: -1}}},
		{Kind: KindReset, TimeMS: 5, Group: "g", Topic: "t", QueueID: 2, Next: 77},
	}
}

func TestRecordCodec(t *testing.T) {
	for _, r := range sampleRecords() {
		b, err := AppendRecord(nil, r)
		if err != nil {
			t.Fatalf("%v: %v", r.Kind, err)
		}
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("%v: %v", r.Kind, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%v: round trip\n got %+v\nwant %+v", r.Kind, got, r)
		}
		// Every truncation fails cleanly; a trailing byte too.
		for i := range b {
			if _, err := DecodeRecord(b[:i]); !errors.Is(err, ErrBadRecord) {
				t.Fatalf("%v truncated to %d: %v", r.Kind, i, err)
			}
		}
		if _, err := DecodeRecord(append(b, 0)); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("%v with a trailing byte: %v", r.Kind, err)
		}
	}
	for name, r := range map[string]*Record{
		"kind":      {Kind: 9},
		"reset":     {Kind: KindReset, Entries: []Entry{{Offset: 1}}},
		"long name": {Kind: KindAck, Group: strings.Repeat("g", 256)},
		"queue":     {Kind: KindAck, QueueID: -1},
		"offset":    {Kind: KindAck, Entries: []Entry{{Offset: -1}}},
		"invisible": {Kind: KindPop, InvisibleMS: -1},
	} {
		if _, err := AppendRecord(nil, r); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"empty":    nil,
		"version":  {2, 1},
		"kind":     {1, 0},
		"entries":  {1, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f},
		"name len": {1, 2, 0, 0xff, 0x01},
	} {
		if _, err := DecodeRecord(b); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeHandle(f *testing.F) {
	f.Add("g", EncodeHandle("g", Handle{Broker: "broker-a", Topic: "t", QueueID: 1, Offset: 2, Seq: 3, VisibleAtMS: 4}))
	f.Add("g", "1:b:t:0:0:1:0:00000000")
	f.Add("", ":::::::")
	f.Fuzz(func(t *testing.T, group, tok string) {
		h, err := DecodeHandle(group, tok)
		if err != nil {
			if !errors.Is(err, ErrMalformedHandle) && !errors.Is(err, ErrHandleMismatch) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// A token that decodes is exactly the encoding of what it holds.
		if again := EncodeHandle(group, h); again != tok {
			t.Fatalf("re-encoded %q, was %q", again, tok)
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		b, _ := AppendRecord(nil, r)
		f.Add(b)
	}
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		enc, err := AppendRecord(nil, r)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		again, err := DecodeRecord(enc)
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip: %+v %v, was %+v", again, err, r)
		}
	})
}
