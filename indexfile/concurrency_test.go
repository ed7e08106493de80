package indexfile

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestConcurrentQueriesDuringPuts(t *testing.T) {
	opts := Options{SlotCount: 31, MaxEntries: 200}
	s := openTest(t, t.TempDir(), opts)
	defer s.Close()
	const nKeys = 17
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("T#key-%d", i)
	}
	keyOf := func(phy int64) string { return keys[phy%nKeys] } // fixed, so re-puts agree

	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; !done.Load(); i++ {
				k := keys[(i+r)%nKeys]
				got, err := s.Query(k, 0, 1<<62, 64)
				if err != nil {
					errc <- err
					return
				}
				for j, off := range got {
					if KeyHash(keyOf(off)) != KeyHash(k) {
						errc <- fmt.Errorf("query %q returned %d of key %q", k, off, keyOf(off))
						return
					}
					if j > 0 && off > got[j-1] {
						errc <- fmt.Errorf("query %q not newest first: %v", k, got)
						return
					}
				}
				_ = s.MaxPhysicalOffset()
				_ = s.Files()
			}
		}(r)
	}
	wg.Add(1)
	go func() { // a flusher, as the broker's flush service would run
		defer wg.Done()
		for !done.Load() {
			if err := s.Flush(); err != nil {
				errc <- err
				return
			}
		}
	}()

	ts := t0
	for phy := int64(0); phy < 3000; phy++ {
		ts += 7
		if err := s.Put(keyOf(phy), phy, ts); err != nil {
			t.Fatal(err)
		}
		if phy%500 == 499 { // roll back a little and redo it
			cut := phy - 40
			if err := s.TruncateAfter(cut); err != nil {
				t.Fatal(err)
			}
			for p := cut; p <= phy; p++ {
				if err := s.Put(keyOf(p), p, ts); err != nil {
					t.Fatal(err)
				}
			}
		}
		if phy%1000 == 999 {
			if _, err := s.DeleteBefore(phy - 600); err != nil {
				t.Fatal(err)
			}
		}
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if got := s.MaxPhysicalOffset(); got != 2999 {
		t.Fatalf("MaxPhysicalOffset = %d", got)
	}
}
