package portmux

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// refusingEcho is an echo that answers a refused plain-text client with
// "refused:" and its head.
type refusingEcho struct{ echo }

func (e *refusingEcho) RefusePlaintext(conn net.Conn, head []byte) {
	// The head is replayed by conn as well.
	buf := make([]byte, len(head))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != string(head) {
		return
	}
	_, _ = conn.Write(append([]byte("refused:"), head...))
}

// counter records Refused calls.
type counter struct {
	mu    sync.Mutex
	kinds []string
}

func (c *counter) count(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kinds = append(c.kinds, kind)
}

func (c *counter) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.kinds...)
}

func tryTLS(addr, send string) (string, error) {
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return "", err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte(send)); err != nil {
		return "", err
	}
	got, err := io.ReadAll(nc)
	return string(got), err
}

func TestModes(t *testing.T) {
	src := newTestSource(t)
	for _, tc := range []struct {
		name                 string
		mode                 Mode
		plainA, plainB, tlsA string // what each client gets back
		counted              []string
	}{
		{"off", Off, "a:AAAA1234", "b:BBBB1234", "", []string{"tls"}},
		{"permissive", Permissive, "a:AAAA1234", "b:BBBB1234", "a:AAAA5678", nil},
		// A refuses in its protocol; B has no RefusePlaintext and is
		// closed.
		{"enforcing", Enforcing, "refused:AAAA", "", "a:AAAA5678", []string{"plaintext_a", "plaintext_b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var c counter
			m := NewMux(lis, nil, &refusingEcho{echo{name: "a", prefix: "AAAA"}}, &echo{name: "b", prefix: "BBBB"})
			m.SetTLS(TLS{Mode: tc.mode, Config: src.ServerConfig, Refused: c.count})
			m.Serve()
			defer func() { _ = m.Shutdown(context.Background()) }()
			addr := lis.Addr().String()
			if got := dial(t, addr, "AAAA1234"); got != tc.plainA {
				t.Errorf("plain a: got %q, want %q", got, tc.plainA)
			}
			if got := dial(t, addr, "BBBB1234"); got != tc.plainB {
				t.Errorf("plain b: got %q, want %q", got, tc.plainB)
			}
			got, err := tryTLS(addr, "AAAA5678")
			if got != tc.tlsA {
				t.Errorf("TLS a: got %q (%v), want %q", got, err, tc.tlsA)
			}
			if tc.tlsA == "" && err == nil {
				t.Error("TLS a: handshake succeeded on an off port")
			}
			if k := c.get(); len(k) != len(tc.counted) || (len(k) > 0 && (k[0] != tc.counted[0] || k[len(k)-1] != tc.counted[len(k)-1])) {
				t.Errorf("refusals counted %v, want %v", k, tc.counted)
			}
		})
	}
}

// stallingRefuser waits for a whole request after the head, as a
// remoting refusal does.
type stallingRefuser struct {
	echo
	started chan struct{}
}

func (e *stallingRefuser) RefusePlaintext(conn net.Conn, head []byte) {
	close(e.started)
	_, _ = io.ReadAll(conn) // until the client or the mux closes conn
}

// A refusal waiting on its client is cut short by Shutdown, not left to
// RefuseTimeout.
func TestShutdownCutsARefusal(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingRefuser{echo: echo{name: "a", prefix: "AAAA"}, started: make(chan struct{})}
	m := NewMux(lis, nil, p)
	m.SetTLS(TLS{Mode: Enforcing})
	m.Serve()
	nc, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("AAAA")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.started:
	case <-time.After(5 * time.Second):
		t.Fatal("RefusePlaintext not called")
	}
	start := time.Now()
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > RefuseTimeout/2 {
		t.Fatalf("Shutdown waited %v for a stalled refusal", d)
	}
}

// Beyond MaxRefusing refusals running at once, a plain-text connection is
// closed without an answer (a flood cannot make the port answer each).
func TestRefusalsAreBounded(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingRefuser{echo: echo{name: "a", prefix: "AAAA"}, started: make(chan struct{})}
	m := NewMux(lis, nil, p)
	m.SetTLS(TLS{Mode: Enforcing})
	// Every token taken, as by MaxRefusing stalled refusals.
	for range MaxRefusing {
		m.refusing <- struct{}{}
	}
	m.Serve()
	defer func() { _ = m.Shutdown(context.Background()) }()
	if got := dial(t, lis.Addr().String(), "AAAA1234"); got != "" {
		t.Fatalf("got %q; want closed without an answer", got)
	}
	select {
	case <-p.started:
		t.Fatal("RefusePlaintext called beyond MaxRefusing")
	default:
	}
	// A token back: the next one is answered.
	<-m.refusing
	nc, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("AAAA")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.started:
	case <-time.After(5 * time.Second):
		t.Fatal("RefusePlaintext not called with a token free")
	}
}
