package indexfile

import (
	"math"
	"slices"
	"testing"

	"go.uber.org/zap/zaptest"
)

// model is an in-memory reference for a Store fed non-decreasing offsets and
// timestamps: it tracks which file each entry lands in only to reproduce the
// whole-second time rounding, and answers queries by a linear scan.
type model struct {
	perFile int // MaxEntries-1
	entries []modelEntry
	files   []*modelFile // oldest first, none empty
}

type modelEntry struct {
	key  string
	hash int32
	phy  int64
	time int64 // begin + timeDiff*1000, as the store computes it
	file *modelFile
}

type modelFile struct {
	begin int64
	count int
}

func newModel(opts Options) *model { return &model{perFile: opts.MaxEntries - 1} }

func (m *model) put(key string, phy, ts int64) {
	if len(m.files) == 0 || m.files[len(m.files)-1].count == m.perFile {
		m.files = append(m.files, &modelFile{begin: ts})
	}
	f := m.files[len(m.files)-1]
	var diff int64
	if f.count > 0 && f.begin > 0 {
		diff = min(max((ts-f.begin)/1000, 0), math.MaxInt32)
	}
	f.count++
	m.entries = append(m.entries, modelEntry{key: key, hash: KeyHash(key), phy: phy, time: f.begin + diff*1000, file: f})
}

func (m *model) truncate(phy int64) {
	for len(m.entries) > 0 && m.entries[len(m.entries)-1].phy >= phy {
		e := m.entries[len(m.entries)-1]
		m.entries = m.entries[:len(m.entries)-1]
		e.file.count--
		if e.file.count == 0 {
			m.files = m.files[:len(m.files)-1]
		}
	}
}

func (m *model) endPhy(f *modelFile) int64 {
	for i := len(m.entries) - 1; i >= 0; i-- {
		if m.entries[i].file == f {
			return m.entries[i].phy
		}
	}
	return 0
}

func (m *model) deleteBefore(minPhy int64) int {
	n := 0
	for len(m.files) > 1 && m.endPhy(m.files[0]) < minPhy {
		f := m.files[0]
		m.files = m.files[1:]
		m.entries = slices.DeleteFunc(m.entries, func(e modelEntry) bool { return e.file == f })
		n++
	}
	return n
}

func (m *model) maxPhy() int64 {
	if len(m.entries) == 0 {
		return 0
	}
	return m.entries[len(m.entries)-1].phy
}

func (m *model) query(key string, begin, end int64, maxN int) []int64 {
	h := KeyHash(key)
	var out []int64
	for i := len(m.entries) - 1; i >= 0 && len(out) < maxN; i-- {
		e := m.entries[i]
		if e.hash == h && e.time >= begin && e.time <= end {
			out = append(out, e.phy)
		}
	}
	return out
}

// checkAgainst compares store and model for every key over the whole time
// range and a few windows.
func (m *model) checkAgainst(t testing.TB, s *Store, keys []string) {
	t.Helper()
	if got, want := s.MaxPhysicalOffset(), m.maxPhy(); got != want {
		t.Fatalf("MaxPhysicalOffset = %d, model %d", got, want)
	}
	if got, want := s.Files(), len(m.files); got != want {
		t.Fatalf("Files = %d, model %d", got, want)
	}
	windows := [][2]int64{{math.MinInt64, math.MaxInt64}}
	if n := len(m.entries); n > 0 {
		lo, hi := m.entries[0].time, m.entries[n-1].time
		mid := lo + (hi-lo)/2
		windows = append(windows, [2]int64{lo, mid}, [2]int64{mid, hi}, [2]int64{mid + 1, mid + 1500})
	}
	for _, k := range keys {
		for _, w := range windows {
			for _, maxN := range []int{1, 3, 1 << 20} {
				got, err := s.Query(k, w[0], w[1], maxN)
				if err != nil {
					t.Fatalf("Query(%q): %v", k, err)
				}
				if want := m.query(k, w[0], w[1], maxN); !slices.Equal(got, want) {
					t.Fatalf("Query(%q, %d, %d, %d) = %v, model %v", k, w[0], w[1], maxN, got, want)
				}
			}
		}
	}
}

func openTest(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// openNoSync opens a store that skips fsync and msync, for tests of logic
// that create many files.
func openNoSync(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s := openTest(t, dir, opts)
	s.noSync = true
	return s
}

func mustPut(t testing.TB, s *Store, key string, phy, ts int64) {
	t.Helper()
	if err := s.Put(key, phy, ts); err != nil {
		t.Fatalf("Put(%q, %d, %d): %v", key, phy, ts, err)
	}
}

func mustQuery(t testing.TB, s *Store, key string, begin, end int64, maxN int) []int64 {
	t.Helper()
	got, err := s.Query(key, begin, end, maxN)
	if err != nil {
		t.Fatalf("Query(%q): %v", key, err)
	}
	return got
}
