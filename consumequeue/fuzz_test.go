package consumequeue

import (
	"bytes"
	"errors"
	"testing"
)

func FuzzDecodeUnit(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 20))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21})
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := DecodeUnit(data)
		if len(data) < UnitSize {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeUnit(%d bytes) error = %v, want ErrCorrupt", len(data), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("DecodeUnit: %v", err)
		}
		var buf [UnitSize]byte
		EncodeUnit(buf[:], u)
		if !bytes.Equal(buf[:], data[:UnitSize]) {
			t.Fatalf("round trip: % x -> %+v -> % x", data[:UnitSize], u, buf)
		}
		if back, _ := DecodeUnit(buf[:]); back != u {
			t.Fatalf("re-decode = %+v, want %+v", back, u)
		}
	})
}

// cqModel is the in-memory reference a Queue must agree with.
type cqModel struct {
	upf      int64
	hasFiles bool
	first    int64 // queue offset of the first file's first unit
	// base is MinOffset as Open recovers it from the files: the first
	// file's first unit that is not pre-blank. DeleteBefore may raise min
	// above it; a reopen brings min back to it.
	base     int64
	min, max int64
	// end is End() of the unit at max-1, 0 for an empty queue; it stays
	// when DeleteBefore moves min up to max.
	end int64
	// floor is the highest minPhyOffset DeleteBefore was given: the
	// CommitLog never goes below its minimum again, so later units and
	// truncation points are at or above it (units below MinOffset stay in
	// the files and must keep CommitLog order with the new ones).
	floor int64
	units map[int64]Unit
}

func (m *cqModel) lastEnd() int64 { return m.end }

// resetEnd recomputes end after the queue lost units or was reopened.
func (m *cqModel) resetEnd() {
	m.end = 0
	if m.max > m.min {
		m.end = m.units[m.max-1].End()
	}
}

func (m *cqModel) files() int {
	if !m.hasFiles {
		return 0
	}
	return int(max(1, (m.max-m.first+m.upf-1)/m.upf))
}

// fuzzInput hands out the fuzzer's bytes, then zeros.
type fuzzInput []byte

func (in *fuzzInput) next() int64 {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return int64(b)
}

// FuzzQueueRead drives one queue with a byte-coded sequence of appends,
// starts at an offset, re-puts, reads, gets, truncations, deletions and
// reopens, and checks every result against cqModel.
func FuzzQueueRead(f *testing.F) {
	f.Add([]byte{3, 0, 1, 0, 2, 0, 3, 3, 0, 9})
	f.Add([]byte{2, 1, 7, 0, 0, 0, 0, 6, 0, 5, 3, 7, 200, 3, 0, 20})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		root := t.TempDir()
		m := &cqModel{upf: 1 + in.next()%8, units: map[int64]Unit{}}
		s, err := Open(root, Options{UnitsPerFile: int(m.upf)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		q, err := s.Queue("f", 0)
		if err != nil {
			t.Fatal(err)
		}
		for step := 0; len(in) > 0 && step < 200; step++ {
			op, arg := in.next()%8, in.next()
			switch op {
			case 0: // append
				u := Unit{Offset: max(m.lastEnd(), m.floor) + arg%4, Size: int32(1 + arg%50), TagHash: arg - 100}
				if err := q.Put(m.max, u); err != nil {
					t.Fatalf("step %d: Put(%d): %v", step, m.max, err)
				}
				if !m.hasFiles {
					m.hasFiles, m.first = true, m.max-m.max%m.upf
				}
				m.units[m.max] = u
				m.max++
				m.end = u.End()
			case 1: // past the end: a start on an empty queue, a gap otherwise
				off := m.max + 1 + arg%20
				u := Unit{Offset: max(m.lastEnd(), m.floor) + 1, Size: 1}
				err := q.Put(off, u)
				// A queue whose only file starts at 0 and holds no unit
				// (truncated back to nothing, or made by Create) starts
				// anew as one without files does.
				if m.hasFiles && m.max > 0 {
					if !errors.Is(err, ErrOffsetGap) {
						t.Fatalf("step %d: Put(%d) past max %d = %v, want ErrOffsetGap", step, off, m.max, err)
					}
					break
				}
				if err != nil {
					t.Fatalf("step %d: start Put(%d): %v", step, off, err)
				}
				m.hasFiles, m.first, m.min, m.base = true, off-off%m.upf, off, off
				m.units[off] = u
				m.max = off + 1
				m.end = u.End()
			case 2: // re-put
				off := m.min - 2 + arg%(m.max-m.min+3)
				if off < 0 || off >= m.max {
					break
				}
				want, ok := m.units[off]
				if !ok || off < m.min {
					want = Unit{Offset: 7, Size: 7}
				}
				if err := q.Put(off, want); err != nil {
					t.Fatalf("step %d: re-put(%d): %v", step, off, err)
				}
				if off >= m.min {
					want.TagHash++
					if err := q.Put(off, want); !errors.Is(err, ErrCorrupt) {
						t.Fatalf("step %d: re-put(%d) of another unit = %v, want ErrCorrupt", step, off, err)
					}
				}
			case 3: // read
				from := m.min - 2 + arg%(m.max-m.min+5)
				n := int(in.next() % 12)
				got, err := q.Read(from, n, nil)
				checkRead(t, step, m, from, n, got, err)
			case 4: // get
				off := m.min - 1 + arg%(m.max-m.min+2)
				u, err := q.Get(off)
				if off < m.min || off >= m.max {
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("step %d: Get(%d) outside [%d,%d) = %v", step, off, m.min, m.max, err)
					}
				} else if err != nil || u != m.units[off] {
					t.Fatalf("step %d: Get(%d) = %+v, %v, want %+v", step, off, u, err, m.units[off])
				}
			case 5: // truncate
				phy := max(m.lastEnd()*arg/200, m.floor)
				if err := q.TruncateAfter(phy); err != nil {
					t.Fatalf("step %d: TruncateAfter(%d): %v", step, phy, err)
				}
				if m.max > m.min && m.units[m.max-1].Offset >= phy {
					for m.max > m.min && m.units[m.max-1].Offset >= phy {
						m.max--
						delete(m.units, m.max)
					}
					m.resetEnd()
				}
			case 6: // flush, close and reopen
				if err := s.Close(); err != nil {
					t.Fatalf("step %d: Close: %v", step, err)
				}
				if s, err = Open(root, Options{UnitsPerFile: int(m.upf)}, nil); err != nil {
					t.Fatalf("step %d: reopen: %v", step, err)
				}
				if q, err = s.Queue("f", 0); err != nil {
					t.Fatal(err)
				}
				m.min = m.base
				m.resetEnd()
			case 7: // delete expired files
				phy := m.lastEnd() * arg / 200
				m.floor = max(m.floor, phy)
				n, err := s.DeleteBefore(phy)
				if err != nil {
					t.Fatalf("step %d: DeleteBefore(%d): %v", step, phy, err)
				}
				want := 0
				for m.files() > 1 && m.units[m.first+m.upf-1].End() <= phy {
					for o := m.first; o < m.first+m.upf; o++ {
						delete(m.units, o)
					}
					m.first += m.upf
					m.min = max(m.min, m.first)
					m.base = max(m.base, m.first)
					want++
				}
				for m.min < m.max && m.units[m.min].Offset < phy {
					m.min++
				}
				if n != want {
					t.Fatalf("step %d: DeleteBefore(%d) removed %d files, want %d", step, phy, n, want)
				}
			}
			if q.MinOffset() != m.min || q.MaxOffset() != m.max || q.MaxPhysicalOffset() != m.lastEnd() {
				t.Fatalf("step %d (op %d): queue [%d,%d) phy %d, model [%d,%d) phy %d", step, op,
					q.MinOffset(), q.MaxOffset(), q.MaxPhysicalOffset(), m.min, m.max, m.lastEnd())
			}
			q.mu.RLock()
			files := len(q.segs)
			q.mu.RUnlock()
			if files != m.files() {
				t.Fatalf("step %d (op %d): %d files, model %d", step, op, files, m.files())
			}
		}
	})
}

func checkRead(t *testing.T, step int, m *cqModel, from int64, n int, got []Unit, err error) {
	t.Helper()
	switch {
	case n == 0 || from >= m.max:
		if err != nil || len(got) != 0 {
			t.Fatalf("step %d: Read(%d, %d) = %d units, %v, want none", step, from, n, len(got), err)
		}
	case from < m.min:
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("step %d: Read(%d) below min %d = %v, want ErrNotFound", step, from, m.min, err)
		}
	default:
		if err != nil {
			t.Fatalf("step %d: Read(%d, %d): %v", step, from, n, err)
		}
		want := int(min(int64(n), m.max-from))
		if len(got) != want {
			t.Fatalf("step %d: Read(%d, %d) = %d units, want %d", step, from, n, len(got), want)
		}
		for i, u := range got {
			if u != m.units[from+int64(i)] {
				t.Fatalf("step %d: Read(%d)[%d] = %+v, want %+v", step, from, i, u, m.units[from+int64(i)])
			}
		}
	}
}
