package portmux

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echo is a front end that claims connections opening with its prefix and
// answers each with its name followed by what the client sent.
type echo struct {
	name, prefix string
	mu           sync.Mutex
	lis          net.Listener
	wg           sync.WaitGroup
}

func (e *echo) Name() string            { return e.name }
func (e *echo) Claims(head []byte) bool { return bytes.HasPrefix(head, []byte(e.prefix)) }

func (e *echo) Serve(lis net.Listener) error {
	e.mu.Lock()
	e.lis = lis
	e.mu.Unlock()
	for {
		nc, err := lis.Accept()
		if err != nil {
			return err
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer nc.Close()
			buf := make([]byte, 8)
			n, _ := io.ReadFull(nc, buf)
			_, _ = nc.Write(append([]byte(e.name+":"), buf[:n]...))
		}()
	}
}

func (e *echo) Shutdown(context.Context) error {
	e.wg.Wait()
	return nil
}

func dial(t *testing.T, addr, send string) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte(send)); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(nc)
	return string(got)
}

func TestMuxSortsConnectionsByTheirFirstBytes(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, b := &echo{name: "a", prefix: "AAAA"}, &echo{name: "b", prefix: "BB"}
	m := NewMux(lis, nil, a, b)
	m.Serve()
	addr := lis.Addr().String()
	if got := dial(t, addr, "AAAA1234"); got != "a:AAAA1234" {
		t.Fatalf("a got %q", got)
	}
	if got := dial(t, addr, "BBxx5678"); got != "b:BBxx5678" {
		t.Fatalf("b got %q (the head must be replayed)", got)
	}
	if got := dial(t, addr, "CCCC0000"); got != "" {
		t.Fatalf("an unclaimed connection got %q; want it closed", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("the listener still accepts after Shutdown")
	}
}
