package freeport

import (
	"net"
	"sync"
	"testing"
)

// TestPick: ports (and their offsets) handed out concurrently are distinct,
// below the kernel's ephemeral range where there is room, and bindable.
func TestPick(t *testing.T) {
	from, to := drawRange()
	var (
		mu   sync.Mutex
		seen = make(map[int]bool)
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for range 20 {
				p, err := Pick(1, 3)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, q := range []int{p, p + 1, p + 3} {
					if seen[q] {
						t.Errorf("port %d handed out twice", q)
					}
					seen[q] = true
				}
				mu.Unlock()
				if to != 0 && (p < from || p >= to) {
					t.Errorf("port %d outside [%d, %d)", p, from, to)
				}
			}
		})
	}
	wg.Wait()
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	l.Close()
}

// TestPickSkipsTaken: a port in use is never handed out.
func TestPickSkipsTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	if err := reserve(taken, nil); err == nil {
		t.Fatalf("port %d in use was reserved", taken)
	}
	if err := reserve(taken-1, []int{1}); err == nil {
		t.Fatalf("port %d with %d in use as its offset was reserved", taken-1, taken)
	}
}
