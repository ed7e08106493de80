package consumequeue

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	if o := DefaultOptions(); o.UnitsPerFile != 300_000 || o.FileSize() != 6_000_000 || o.Validate() != nil {
		t.Fatalf("DefaultOptions = %+v", o)
	}
	for _, n := range []int{0, -1, MaxUnitsPerFile + 1} {
		if err := (Options{UnitsPerFile: n}).Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%d) = %v", n, err)
		}
		if _, err := Open(t.TempDir(), Options{UnitsPerFile: n}, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%d) = %v", n, err)
		}
	}
}

func TestStoreQueuesAndMaxPhysicalOffset(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, 10)
	if s.MaxPhysicalOffset() != 0 || s.Root() != root {
		t.Fatalf("empty store MaxPhysicalOffset = %d", s.MaxPhysicalOffset())
	}
	putRange(t, mustQueue(t, s, "b", 1), 0, 7)
	putRange(t, mustQueue(t, s, "b", 0), 0, 3)
	putRange(t, mustQueue(t, s, "a", 5), 0, 12)
	if q1, q2 := mustQueue(t, s, "a", 5), mustQueue(t, s, "a", 5); q1 != q2 {
		t.Fatal("Queue returned two queues for one id")
	}
	if _, ok := s.Lookup("a", 6); ok {
		t.Fatal("Lookup found a missing queue")
	}
	var names []string
	for _, q := range s.Queues() {
		names = append(names, q.String())
	}
	if !reflect.DeepEqual(names, []string{"a/5", "b/0", "b/1"}) {
		t.Fatalf("Queues = %v", names)
	}
	if got := s.Topics(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("Topics = %v", got)
	}
	if got, want := s.MaxPhysicalOffset(), unitFor(11).End(); got != want {
		t.Fatalf("MaxPhysicalOffset = %d, want %d", got, want)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, root, 10)
	if got, want := s.MaxPhysicalOffset(), unitFor(11).End(); got != want {
		t.Fatalf("MaxPhysicalOffset after reopen = %d, want %d", got, want)
	}
	if err := s.TruncateAfter(unitFor(5).Offset); err != nil {
		t.Fatal(err)
	}
	if got, want := s.MaxPhysicalOffset(), unitFor(4).End(); got != want {
		t.Fatalf("MaxPhysicalOffset after truncation = %d, want %d", got, want)
	}
}

func TestStoreInvalidNames(t *testing.T) {
	s := openStore(t, t.TempDir(), 10)
	for _, topic := range []string{"", ".", "..", "a/b", "a\\b", "a\x00", string(make([]byte, 256))} {
		if _, err := s.Queue(topic, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("Queue(%q) = %v, want ErrInvalid", topic, err)
		}
		if err := s.DeleteTopic(topic); !errors.Is(err, ErrInvalid) {
			t.Errorf("DeleteTopic(%q) = %v, want ErrInvalid", topic, err)
		}
	}
	if _, err := s.Queue("ok", -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("Queue(ok, -1) = %v, want ErrInvalid", err)
	}
	if _, err := s.Queue("%RETRY%group-1", 0); err != nil {
		t.Errorf("Queue(%%RETRY%%group-1) = %v", err)
	}
}

func TestDeleteTopic(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, 10)
	q := mustQueue(t, s, "gone", 0)
	putRange(t, q, 0, 15)
	putRange(t, mustQueue(t, s, "kept", 0), 0, 5)
	if err := s.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTopic("never-existed"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "gone")); !os.IsNotExist(err) {
		t.Fatalf("topic directory still there: %v", err)
	}
	if _, err := q.Get(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get on deleted topic = %v, want ErrClosed", err)
	}
	if err := q.Put(15, unitFor(15)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put on deleted topic = %v, want ErrClosed", err)
	}
	if got := s.Topics(); !reflect.DeepEqual(got, []string{"kept"}) {
		t.Fatalf("Topics = %v", got)
	}
	// The name can be reused from scratch.
	q = mustQueue(t, s, "gone", 0)
	checkRange(t, q, 0, 0)
	putRange(t, q, 0, 2)
	checkRange(t, q, 0, 2)
}

func TestCloseIsIdempotent(t *testing.T) {
	s := openStore(t, t.TempDir(), 10)
	q := mustQueue(t, s, "t", 0)
	putRange(t, q, 0, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	for name, err := range map[string]error{
		"Put":   q.Put(5, unitFor(5)),
		"Flush": q.Flush(),
		"Trunc": q.TruncateAfter(0),
		"Read": func() error {
			_, err := q.Read(0, 1, nil)
			return err
		}(),
		"Queue": func() error {
			_, err := s.Queue("t", 0)
			return err
		}(),
		"DeleteTopic": s.DeleteTopic("t"),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// TestConcurrentReadWrite runs one writer against readers, a flusher and a
// deleter; run it with -race.
func TestConcurrentReadWrite(t *testing.T) {
	s, err := Open(t.TempDir(), Options{UnitsPerFile: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := mustQueue(t, s, "t", 0)
	const total = 4000
	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 16)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []Unit
			for {
				select {
				case <-done:
					return
				default:
				}
				hi := q.MaxOffset()
				from := max(q.MinOffset(), hi-40)
				var err error
				buf, err = q.Read(from, 32, buf[:0])
				if errors.Is(err, ErrNotFound) { // DeleteBefore moved MinOffset
					continue
				}
				if err != nil {
					report(err)
					return
				}
				for i, u := range buf {
					if u != unitFor(from+int64(i)) {
						report(errors.New("read a wrong unit"))
						return
					}
				}
				if hi > 0 {
					if u, err := q.Get(hi - 1); err == nil && u != unitFor(hi-1) {
						report(errors.New("got a wrong unit"))
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; {
			select {
			case <-done:
				return
			default:
			}
			if n++; n%16 == 0 {
				if err := s.Flush(); err != nil {
					report(err)
					return
				}
			}
			if _, err := s.DeleteBefore(unitFor(q.MaxOffset() - 100).Offset); err != nil {
				report(err)
				return
			}
		}
	}()
	// The writer appends, and every 500 units truncates the last 50 and
	// writes them again: readers must only ever see unitFor(i) at offset i.
	var werr error
	truncated := map[int64]bool{}
	for i := int64(0); i < total && werr == nil; i++ {
		werr = q.Put(i, unitFor(i))
		if i%500 == 499 && !truncated[i] && werr == nil {
			truncated[i] = true
			werr = q.TruncateAfter(unitFor(i - 50).Offset)
			i -= 51
		}
	}
	// The writer may finish before the maintainer ran once (its first
	// flush makes the staging journal): let it move MinOffset.
	for deadline := time.Now().Add(5 * time.Second); q.MinOffset() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(done)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	if q.MaxOffset() != total || q.MinOffset() == 0 {
		t.Fatalf("range = [%d, %d)", q.MinOffset(), q.MaxOffset())
	}
}
