package ha

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// checker is a master's Authenticate accepting one authorization value,
// counting the attempts.
type checker struct {
	want  string
	calls atomic.Int64
	last  atomic.Pointer[string] // "authorization|date|remote" of the last call
}

func (c *checker) authenticate(remote, authorization, date string) error {
	c.calls.Add(1)
	v := authorization + "|" + date + "|" + remote
	c.last.Store(&v)
	switch {
	case authorization == "":
		return errors.New("no credentials")
	case authorization != c.want:
		return errors.New("signature does not match")
	}
	return nil
}

func creds(authorization string) func() (string, string) {
	return func() (string, string) { return authorization, "20261202T031500Z" }
}

// TestAuthenticatedSlave: a master that checks credentials serves the
// slave whose AUTH it accepts, and refuses one with wrong or no
// credentials with RefuseUnauthenticated: nothing is shipped, the slave
// keeps retrying with backoff (not a fatal refusal, not a busy loop) and
// says why in its status.
func TestAuthenticatedSlave(t *testing.T) {
	master := newMemLog(testSeg)
	for i := 0; i < 20; i++ {
		master.append(200, byte(i))
	}
	chk := &checker{want: "good"}
	so := fastServerOptions("b")
	so.Authenticate = chk.authenticate
	srv := startServer(t, so, master)

	for _, c := range []struct {
		name  string
		creds func() (string, string)
		want  string
	}{
		{"wrong secret", creds("bad"), "signature does not match"},
		{"no credentials", nil, "the slave sent none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			slave := newMemLog(testSeg)
			co := fastClientOptions("b", 1, srv.Addr)
			co.Credentials = c.creds
			before := chk.calls.Load()
			cl := startClient(t, co, slave)
			waitFor(t, 5*time.Second, "refused", func() error {
				if st := cl.Status(); !strings.Contains(st.LastError, "UNAUTHENTICATED") || !strings.Contains(st.LastError, c.want) {
					return fmt.Errorf("%+v", st)
				}
				return nil
			})
			time.Sleep(500 * time.Millisecond)
			st := cl.Status()
			if st.State != StateConnecting {
				t.Fatalf("a refused slave is %s (%s), want %s: it retries", st.State, st.LastError, StateConnecting)
			}
			// Backoff 10 ms doubling to 100 ms: about ten attempts in the
			// time waited, not thousands.
			if n := chk.calls.Load() - before; n < 2 || n > 25 {
				t.Fatalf("%d attempts: want a retry with backoff", n)
			}
			if slave.MaxOffset() != 0 || len(srv.Slaves()) != 0 || srv.Stats().Frames != 0 {
				t.Fatalf("refused slave got bytes: slave at %d, master's slaves %+v, %+v", slave.MaxOffset(), srv.Slaves(), srv.Stats())
			}
			_ = cl.Close()
		})
	}

	t.Run("right credentials", func(t *testing.T) {
		slave := newMemLog(testSeg)
		co := fastClientOptions("b", 2, srv.Addr)
		co.Credentials = creds("good")
		startClient(t, co, slave)
		waitFor(t, 5*time.Second, "caught up", caughtUp(master, slave))
		if !bytes.Equal(master.bytes(), slave.bytes()) {
			t.Fatal("slave's bytes differ from the master's")
		}
		if v := *chk.last.Load(); !strings.HasPrefix(v, "good|20261202T031500Z|127.0.0.1:") {
			t.Fatalf("Authenticate saw %q", v)
		}
	})
}

// TestUnauthenticatedHelloOnTheWire: what a slave that knows nothing of
// AUTH (protocol versions 1 and 2 before it) gets from a master checking
// credentials: REFUSE with code 7 and the reason, then the master closes.
func TestUnauthenticatedHelloOnTheWire(t *testing.T) {
	so := fastServerOptions("b")
	so.Authenticate = (&checker{want: "good"}).authenticate
	srv := startServer(t, so, newMemLog(testSeg))
	for _, v := range []uint16{Version1, Version2} {
		conn, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write(mustHello(t, Hello{Version: v, BrokerName: "b", BrokerID: 1, LastStart: -1}))
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(conn)
		f, err := ReadFrame(br, 1, nil)
		if err != nil || f.Kind != KindRefuse || f.Refuse.Code != RefuseUnauthenticated || !strings.Contains(f.Refuse.Reason, "no credentials") {
			t.Fatalf("version %d: %+v, %v", v, f, err)
		}
		if f.Refuse.Code.Fatal() {
			t.Fatal("RefuseUnauthenticated is fatal: a slave would stop for good when the master's users change")
		}
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("the master wrote more after REFUSE")
		}
		_ = conn.Close()
	}
}

// TestAuthIgnoredWithoutCheck: a master that checks nothing (ACL off)
// serves a slave that sends AUTH as one that does not.
func TestAuthIgnoredWithoutCheck(t *testing.T) {
	master := newMemLog(testSeg)
	master.append(300, 1)
	srv := startServer(t, fastServerOptions("b"), master)
	slave := newMemLog(testSeg)
	co := fastClientOptions("b", 1, srv.Addr)
	co.Credentials = creds("anything")
	startClient(t, co, slave)
	waitFor(t, 5*time.Second, "caught up", caughtUp(master, slave))
}

// TestReplicateOverTLS: a master whose listener serves TLS only and a
// slave dialling with TLS, verifying the master's certificate for the
// host of its address (ServerName left empty).
func TestReplicateOverTLS(t *testing.T) {
	src, err := tlsconf.New("", "", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(src.Certificate().Leaf)
	master := newMemLog(testSeg)
	for i := 0; i < 30; i++ {
		master.append(500, byte(i))
	}
	so := fastServerOptions("b")
	so.WrapListener = func(l net.Listener) net.Listener { return tls.NewListener(l, src.ServerConfig()) }
	srv := startServer(t, so, master)

	plain := fastClientOptions("b", 1, srv.Addr)
	pslave := newMemLog(testSeg)
	pcl := startClient(t, plain, pslave)

	co := fastClientOptions("b", 2, srv.Addr)
	co.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	slave := newMemLog(testSeg)
	startClient(t, co, slave)
	waitFor(t, 5*time.Second, "caught up", caughtUp(master, slave))
	if !bytes.Equal(master.bytes(), slave.bytes()) {
		t.Fatal("slave's bytes differ from the master's")
	}
	if pslave.MaxOffset() != 0 || pcl.Status().State == StateReplicating {
		t.Fatalf("a plaintext slave replicated from a TLS-only master: %+v", pcl.Status())
	}

	// A slave that verifies against another CA does not connect.
	other := x509.NewCertPool()
	bad := fastClientOptions("b", 3, srv.Addr)
	bad.TLS = &tls.Config{RootCAs: other}
	bcl := startClient(t, bad, newMemLog(testSeg))
	waitFor(t, 5*time.Second, "untrusted master", func() error {
		if st := bcl.Status(); !strings.Contains(st.LastError, "TLS handshake") {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
}
