package indexfile

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzTopicKeyHash: hashing a topic and a key in parts equals hashing the
// key built from them, for any bytes.
func FuzzTopicKeyHash(f *testing.F) {
	f.Add("orders", "order-42")
	f.Add("t\xe4\xb8", "\xb8x")
	f.Add("", "😀")
	f.Fuzz(func(t *testing.T, topic, key string) {
		if got, want := TopicKeyHash(topic, key), KeyHash(BuildKey(topic, key)); got != want {
			t.Fatalf("TopicKeyHash(%q, %q) = %d, KeyHash of the built key %d", topic, key, got, want)
		}
	})
}

func FuzzDecodeHeader(f *testing.F) {
	buf := make([]byte, HeaderSize)
	EncodeHeader(buf, Header{BeginTimestamp: t0, EndTimestamp: t0 + 5000, BeginPhyOffset: 7, EndPhyOffset: 9000, SlotCount: 3, IndexCount: 12})
	f.Add(buf)
	f.Add(make([]byte, HeaderSize))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHeader(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			if len(data) >= HeaderSize && h != (Header{}) {
				t.Fatalf("header %+v with error", h)
			}
			return
		}
		if h.SlotCount < 0 || h.IndexCount < 0 {
			t.Fatalf("accepted negative counts %+v", h)
		}
		out := make([]byte, HeaderSize)
		EncodeHeader(out, h)
		if !bytes.Equal(out, data[:HeaderSize]) {
			t.Fatalf("round trip %x -> %+v -> %x", data[:HeaderSize], h, out)
		}
		_ = DefaultOptions().checkHeader(h) // must not panic
	})
}

func FuzzDecodeEntry(f *testing.F) {
	buf := make([]byte, EntrySize)
	EncodeEntry(buf, Entry{KeyHash: 99162322, PhyOffset: 1 << 33, TimeDiff: 17, PrevIndex: 4})
	f.Add(buf)
	f.Add(make([]byte, EntrySize+3))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEntry(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if e.KeyHash < 0 || e.PhyOffset < 0 || e.TimeDiff < 0 || e.PrevIndex < 0 {
			t.Fatalf("accepted negative field %+v", e)
		}
		out := make([]byte, EntrySize)
		EncodeEntry(out, e)
		if !bytes.Equal(out, data[:EntrySize]) {
			t.Fatalf("round trip %x -> %+v -> %x", data[:EntrySize], e, out)
		}
	})
}

// fuzzKeys include an exact hash collision (Aa/BB), a key hashing to 0 and
// non-ASCII keys; with at most 7 slots every slot is shared.
var fuzzKeys = []string{"Aa", "BB", "polygenelubricants", "T#a", "T#b", "T#c", "T#é", "T#😀"}

// FuzzIndexQuery drives a Store with puts (non-decreasing offsets and
// timestamps), truncations, deletions, queries and reopens, and compares
// every answer with the in-memory model.
func FuzzIndexQuery(f *testing.F) {
	f.Add([]byte{3, 1, 0, 0, 1, 9, 1, 1, 1, 40, 0, 2, 0, 5, 5, 3, 0, 200, 4, 1, 0, 0, 3, 2, 30, 6, 1, 4, 0, 0})
	f.Add([]byte{6, 0, 0, 1, 1, 1, 0, 0, 2, 200, 0, 3, 0, 255, 7, 0, 0, 1, 1, 4, 6, 0, 7, 3, 1})
	f.Fuzz(runIndexOps)
}

// runIndexOps decodes data into store operations and checks each against the
// model.
func runIndexOps(t *testing.T, data []byte) {
	if len(data) < 2 {
		return
	}
	opts := Options{SlotCount: int(data[0]%7) + 1, MaxEntries: int(data[1]%6) + 2}
	data = data[2:]
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	dir := t.TempDir()
	s, err := Open(dir, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.noSync = true // durability is tested elsewhere; this tests logic
	defer func() { _ = s.Close() }()
	m := newModel(opts)
	phy, ts := int64(0), t0
	for ops := 0; len(data) > 0 && ops < 64; ops++ {
		switch op := next(); op % 8 {
		case 0, 1, 2, 3:
			k := fuzzKeys[int(next())%len(fuzzKeys)]
			phy += int64(next() % 3)
			ts += int64(next()) * 29
			if err := s.Put(k, phy, ts); err != nil {
				t.Fatalf("Put(%q, %d, %d): %v", k, phy, ts, err)
			}
			m.put(k, phy, ts)
		case 4:
			cut := int64(next() % 3)
			if n := len(m.entries); n > 0 {
				cut = m.entries[int(next())%n].phy + int64(next()%2)
			}
			if err := s.TruncateAfter(cut); err != nil {
				t.Fatalf("TruncateAfter(%d): %v", cut, err)
			}
			m.truncate(cut)
			phy = m.maxPhy()
		case 5:
			k := fuzzKeys[int(next())%len(fuzzKeys)]
			begin := t0 + int64(next())*100 - 1000
			end := begin + int64(next())*60
			maxN := int(next()%6) + 1
			got, err := s.Query(k, begin, end, maxN)
			if err != nil {
				t.Fatal(err)
			}
			if want := m.query(k, begin, end, maxN); !equalOffsets(got, want) {
				t.Fatalf("Query(%q, %d, %d, %d) = %v, model %v", k, begin, end, maxN, got, want)
			}
			continue
		case 6:
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(dir, opts, nil); err != nil {
				t.Fatal(err)
			}
			s.noSync = true
		case 7:
			minPhy := int64(next() % 3)
			if n := len(m.entries); n > 0 {
				minPhy = m.entries[int(next())%n].phy + int64(next()%2)
			}
			got, err := s.DeleteBefore(minPhy)
			if err != nil {
				t.Fatal(err)
			}
			if want := m.deleteBefore(minPhy); got != want {
				t.Fatalf("DeleteBefore(%d) = %d, model %d", minPhy, got, want)
			}
		}
		m.checkAgainst(t, s, fuzzKeys)
	}
}

func equalOffsets(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
