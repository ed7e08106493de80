package nameserver

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/freeport"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
)

// tlsHolder is a broker port that accepts TLS only: it counts the
// connections that completed a handshake and the ones that did not.
func tlsHolder(t *testing.T, pair tlstest.Pair) (addr string, ok, bad *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ok, bad = new(atomic.Int64), new(atomic.Int64)
	cfg := &tls.Config{Certificates: []tls.Certificate{pair.Cert}, MinVersion: tls.VersionTLS12}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(c, cfg)
			_ = tc.SetDeadline(time.Now().Add(2 * time.Second))
			if tc.Handshake() == nil {
				ok.Add(1)
			} else {
				bad.Add(1)
			}
			_ = tc.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return l.Addr().String(), ok, bad
}

// TestIdentityProbeTLS: with --tls-dial the holder's reachability probe
// shakes hands in TLS (verified with --tls-ca), so a TLS-only port sees
// a proper client; without it the probe is a bare TCP connection. Either
// way an accepted connection means the holder is alive, even when the
// handshake fails (an untrusted certificate), and a closed port means it
// is gone.
func TestIdentityProbeTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	addr, ok, bad := tlsHolder(t, ca.Server(t, dir, "broker", "broker"))
	now := time.Unix(1000, 0)

	g := newIdentityGuard()
	g.ttl = 0
	g.useTLS(tlsconf.Config{Mode: tlsconf.Enforcing, Dial: true, CAFile: ca.File}, nil, zap.NewNop())
	if !g.reachable(addr, now) {
		t.Fatal("a TLS holder probed with TLS is unreachable")
	}
	testutil.WaitFor(t, 2*time.Second, "a completed handshake", func() error {
		if ok.Load() != 1 || bad.Load() != 0 {
			return fmt.Errorf("handshakes: %d completed, %d failed", ok.Load(), bad.Load())
		}
		return nil
	})

	plain := newIdentityGuard()
	plain.ttl = 0
	plain.useTLS(tlsconf.Config{}, nil, zap.NewNop())
	if !plain.reachable(addr, now) {
		t.Fatal("a plain TCP probe of a listening port is unreachable")
	}
	testutil.WaitFor(t, 2*time.Second, "a plaintext connection", func() error {
		if ok.Load() != 1 || bad.Load() != 1 {
			return fmt.Errorf("handshakes: %d completed, %d failed", ok.Load(), bad.Load())
		}
		return nil
	})

	other := tlstest.NewCA(t, t.TempDir(), "other")
	untrusting := newIdentityGuard()
	untrusting.ttl = 0
	untrusting.useTLS(tlsconf.Config{Dial: true, CAFile: other.File}, nil, zap.NewNop())
	if !untrusting.reachable(addr, now) {
		t.Fatal("a holder whose certificate is not trusted counts as gone: its identity could be taken over")
	}

	gone, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	if g.reachable(gone, now) {
		t.Fatal("a closed port is reachable")
	}
}
