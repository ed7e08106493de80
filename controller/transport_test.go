package controller

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
)

func TestRaftHandshakeCodec(t *testing.T) {
	authz, date := auth.NewHeader(auth.Credentials{AccessKey: "ctladmin", SecretKey: "s3cret"}, time.Now())
	b, ok := encodeHello(authz, date)
	if !ok {
		t.Fatal("encodeHello refused a normal header")
	}
	if !bytes.HasPrefix(b, []byte("BRF\x01")) {
		t.Fatalf("hello starts %q", b[:4])
	}
	a, d, err := decodeHello(b)
	if err != nil || a != authz || d != date {
		t.Fatalf("decodeHello = %q, %q, %v; want %q, %q", a, d, err, authz, date)
	}
	// No credentials: an empty authorization and date.
	b, _ = encodeHello("", "")
	if a, d, err := decodeHello(b); err != nil || a != "" || d != "" {
		t.Fatalf("empty hello decodes to %q, %q, %v", a, d, err)
	}
	if _, ok := encodeHello(strings.Repeat("x", raftMaxBody), "d"); ok {
		t.Fatal("a hello over raftMaxBody was encoded")
	}
	for name, bad := range map[string][]byte{
		"empty":          nil,
		"raft rpc":       {0, 1, 2, 3, 4, 5, 6},
		"tls record":     {0x16, 3, 1, 0, 5, 1},
		"other version":  []byte("BRF\x02\x00\x02\x00\x00"),
		"too long":       append([]byte("BRF\x01"), 0xff, 0xff),
		"short body":     []byte("BRF\x01\x00\x05\x00\x00"),
		"trailing bytes": []byte("BRF\x01\x00\x02\x00\x00x"),
		"authz too long": []byte("BRF\x01\x00\x02\x00\x09"),
	} {
		if _, _, err := decodeHello(bad); err == nil {
			t.Errorf("%s: decodeHello accepted %q", name, bad)
		}
	}

	s, body, err := decodeAnswer(encodeAnswer(raftRefused, []byte("no credentials")))
	if err != nil || s != raftRefused || string(body) != "no credentials" {
		t.Fatalf("decodeAnswer = %d, %q, %v", s, body, err)
	}
	s, body, err = decodeAnswer(encodeAnswer(raftOK, appendCreds(nil, authz, date)))
	if err != nil || s != raftOK {
		t.Fatalf("decodeAnswer(ok) = %d, %v", s, err)
	}
	if a, d, err := parseCreds(body); err != nil || a != authz || d != date {
		t.Fatalf("answer creds = %q, %q, %v", a, d, err)
	}
	if got := encodeAnswer(raftRefused, bytes.Repeat([]byte("x"), 5000)); len(got) != raftAnswerHead+raftMaxBody {
		t.Fatalf("a long refusal is %d bytes, want it cut to %d", len(got), raftAnswerHead+raftMaxBody)
	}
	for _, bad := range [][]byte{nil, {9, 0, 0}, {raftOK, 0xff, 0xff}, {raftOK, 0, 1}} {
		if _, _, err := decodeAnswer(bad); err == nil {
			t.Errorf("decodeAnswer accepted %q", bad)
		}
	}
}

func FuzzDecodeHello(f *testing.F) {
	authz, date := auth.NewHeader(auth.Credentials{AccessKey: "ctladmin", SecretKey: "s"}, time.Unix(1_700_000_000, 0))
	ok, _ := encodeHello(authz, date)
	empty, _ := encodeHello("", "")
	f.Add(ok)
	f.Add(empty)
	f.Add([]byte("BRF\x01\x00\x02\xff\xff"))
	f.Add(encodeAnswer(raftRefused, []byte("refused")))
	f.Fuzz(func(t *testing.T, b []byte) {
		if a, d, err := decodeHello(b); err == nil {
			again, fits := encodeHello(a, d)
			if !fits || !bytes.Equal(again, b) {
				t.Fatalf("hello %q decodes to %q, %q which encodes to %q", b, a, d, again)
			}
		}
		if s, body, err := decodeAnswer(b); err == nil {
			if again := encodeAnswer(s, body); !bytes.Equal(again, b) {
				t.Fatalf("answer %q re-encodes to %q", b, again)
			}
		}
	})
}

// raftSec is a TLS enforcing setup (server certificates verified against
// the CA, client certificates required) with an ACL file holding the
// admin user "ctladmin".
type raftSec struct {
	tls   tlsconf.Config
	guard *auth.Guard
	creds auth.Credentials
}

func newRaftSec(t *testing.T) raftSec {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "raft")
	pair := ca.Server(t, dir, "ctl", "localhost")
	acl := filepath.Join(dir, "plain_acl.yml")
	if err := auth.WriteFile(acl, &auth.File{Accounts: []auth.Account{
		{AccessKey: "ctladmin", SecretKey: "ctl-secret", Admin: true},
		{AccessKey: "appuser", SecretKey: "app-secret", DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB"},
	}}); err != nil {
		t.Fatal(err)
	}
	g, err := auth.New(auth.Config{Enabled: true, File: acl, MaxSkew: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return raftSec{
		tls: tlsconf.Config{
			Mode: tlsconf.Enforcing, CertFile: pair.CertFile, KeyFile: pair.KeyFile,
			ClientCAFile: ca.File, ClientAuth: tlsconf.ClientCertRequire,
			Dial: true, CAFile: ca.File,
		},
		guard: g,
		creds: auth.Credentials{AccessKey: "ctladmin", SecretKey: "ctl-secret"},
	}
}

func (s raftSec) apply(o *Options) {
	o.Guard = s.guard
	o.Raft = RaftSecurity{TLS: s.tls, Credentials: s.creds}
}

// commitGroup commits a register command on l and waits until every node
// in on has applied it.
func commitGroup(t *testing.T, l *node, name string, on ...*node) {
	t.Helper()
	res, err := l.c.propose(&Command{Op: opRegister, Name: name, Cluster: "c1", ID: 1, Addr: "a:1", HAAddr: "a:2"})
	if err != nil || res.Code != ResultOK {
		t.Fatalf("commit %s on %s: %+v, %v", name, l.opts.ID, res, err)
	}
	for _, n := range on {
		testutil.Eventually(t, 5*time.Second, n.opts.ID+" applies "+name, func() bool { return n.c.fsm.group(name) != nil })
	}
}

// Three controllers over TLS (enforcing, client certificates) with ACL on
// elect a leader and replicate a commit to all of them.
func TestRaftTransportTLSAndACL(t *testing.T) {
	sec := newRaftSec(t)
	nodes := startCluster(t, sec.apply)
	l := leader(t, nodes)
	commitGroup(t, l, "g1", nodes...)
}

// A controller whose secret is wrong neither joins nor replicates: its
// connections are refused, and the others refuse it as a peer (the
// authentication is mutual); the other two elect a leader and commit.
func TestRaftTransportWrongSecret(t *testing.T) {
	sec := newRaftSec(t)
	nodes := startCluster(t, func(o *Options) {
		sec.apply(o)
		if o.ID == "n2" {
			o.Raft.Credentials.SecretKey = "wrong"
		}
	})
	good, bad := nodes[:2], nodes[2]
	l := leader(t, good)
	commitGroup(t, l, "g1", good...)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if bad.c.raft.State() == raft.Leader {
			t.Fatal("the controller with a wrong secret became leader")
		}
		if id, _ := bad.c.leaderID(); id != "" {
			t.Fatalf("the controller with a wrong secret follows %q", id)
		}
		if bad.c.fsm.group("g1") != nil {
			t.Fatal("the controller with a wrong secret replicated the log")
		}
		time.Sleep(100 * time.Millisecond)
	}
	commitGroup(t, leader(t, good), "g2", good...)
	if bad.c.fsm.group("g2") != nil {
		t.Fatal("the controller with a wrong secret replicated the log")
	}
}

// helloAnswer shakes hands with the transport at addr as a peer with creds
// would (TLS with cfg unless nil; the answer is not checked) and returns
// the answer.
func helloAnswer(t *testing.T, addr string, cfg *tls.Config, creds auth.Credentials) (byte, string, error) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	conn := nc
	if cfg != nil {
		tc := tls.Client(nc, cfg)
		if err := tc.Handshake(); err != nil {
			return 0, "", err
		}
		conn = tc
	}
	hello, _ := encodeHello(signedCreds(creds))
	if _, err := conn.Write(hello); err != nil {
		return 0, "", err
	}
	head := make([]byte, raftAnswerHead)
	if _, err := io.ReadFull(conn, head); err != nil {
		return 0, "", err
	}
	s, n, err := parseAnswerHead(head)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	return s, string(body), nil
}

// What a single enforcing, ACL-on controller answers: plain text (Raft's
// own TCP transport, or the handshake in clear) is closed unanswered;
// over TLS, missing or wrong credentials and a non-admin user get a
// refusal naming why; the admin user is accepted and gets the
// controller's own credentials back.
func TestRaftTransportRefusals(t *testing.T) {
	sec := newRaftSec(t)
	o := testOptions("n0")
	sec.apply(&o)
	n := startNode(t, o)
	addr := n.c.RaftAddr()

	// Plain text: hashicorp/raft's TCP transport.
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var resp raft.AppendEntriesResponse
	if err := plain.AppendEntries("n0", raft.ServerAddress(addr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("intruder"), Addr: []byte(plain.LocalAddr())}, Term: 99,
	}, &resp); err == nil {
		t.Fatal("a plain-text Raft RPC to an enforcing controller succeeded")
	}
	// Plain text: the handshake in clear.
	if _, _, err := helloAnswer(t, addr, nil, sec.creds); err == nil {
		t.Fatal("a plain-text handshake was answered")
	}
	if got := n.c.raft.CurrentTerm(); got >= 99 {
		t.Fatalf("the refused RPC reached Raft (term %d)", got)
	}

	cfg, err := tlsconf.ClientConfig(sec.tls, mustSource(t, sec.tls))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "127.0.0.1"
	for _, c := range []struct {
		name  string
		creds auth.Credentials
		want  string
	}{
		{"no credentials", auth.Credentials{}, "no credentials"},
		{"wrong secret", auth.Credentials{AccessKey: "ctladmin", SecretKey: "nope"}, "signature"},
		{"unknown user", auth.Credentials{AccessKey: "whoever", SecretKey: "x"}, "whoever"},
		{"not admin", auth.Credentials{AccessKey: "appuser", SecretKey: "app-secret"}, "admin"},
	} {
		s, msg, err := helloAnswer(t, addr, cfg, c.creds)
		if err != nil || s != raftRefused || !strings.Contains(msg, c.want) {
			t.Errorf("%s: answer %d %q, %v; want a refusal containing %q", c.name, s, msg, err, c.want)
		}
	}
	s, body, err := helloAnswer(t, addr, cfg, sec.creds)
	if err != nil || s != raftOK {
		t.Fatalf("admin: answer %d %q, %v", s, body, err)
	}
	if a, _, err := parseCreds([]byte(body)); err != nil || !strings.Contains(a, "Credential=ctladmin") {
		t.Fatalf("admin: the answer carries %q, %v; want the controller's own credentials", a, err)
	}

	// A TLS client without a client certificate fails the TLS handshake.
	nocert := cfg.Clone()
	nocert.GetClientCertificate = nil
	if _, _, err := helloAnswer(t, addr, nocert, sec.creds); err == nil {
		t.Fatal("a TLS client without a certificate was answered (client certificates are required)")
	}
}

func mustSource(t *testing.T, c tlsconf.Config) *tlsconf.Source {
	t.Helper()
	src, err := tlsconf.Open(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// With ACL off every handshake is accepted (credentials or not, even
// wrong ones), and the transport's dialer does not check the answer:
// controllers without credentials and with them form one group.
func TestRaftTransportACLOff(t *testing.T) {
	nodes := startCluster(t, func(o *Options) {
		o.Raft.TLS.Mode = tlsconf.Permissive
		switch o.ID {
		case "n1":
			o.Raft.Credentials = auth.Credentials{AccessKey: "ctladmin", SecretKey: "any"}
		case "n2":
			o.Raft.TLS.Dial = true
		}
	})
	commitGroup(t, leader(t, nodes), "g1", nodes...)
}

// The stream layer's Accept ends with Close, and a dial to a closed one
// fails.
func TestRaftStreamLayerClose(t *testing.T) {
	s, err := newStreamLayer("127.0.0.1:0", RaftSecurity{TLS: tlsconf.Config{Mode: tlsconf.Off}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	done := make(chan error, 1)
	go func() { _, err := s.Accept(); done <- err }()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not end with Close")
	}
	if _, err := s.Dial(raft.ServerAddress(addr), time.Second); err == nil {
		t.Fatal("dialed a closed transport")
	}
	if _, err := newStreamLayer("0.0.0.0:0", RaftSecurity{TLS: tlsconf.Config{Mode: tlsconf.Off}}, nil, nil); err == nil {
		t.Fatal("an unspecified bind address was accepted (it cannot be advertised)")
	}
}

// A dialer with --tls-ca refuses a peer whose certificate another CA
// signed, and connects to one the CA signed (checked for the host
// dialled).
func TestRaftStreamLayerVerifiesPeer(t *testing.T) {
	sec := newRaftSec(t)
	dir := t.TempDir()
	other := tlstest.NewCA(t, dir, "other").Server(t, dir, "other", "localhost")
	otherTLS := sec.tls
	otherTLS.CertFile, otherTLS.KeyFile = other.CertFile, other.KeyFile
	otherTLS.ClientAuth, otherTLS.ClientCAFile = tlsconf.ClientCertNone, ""
	impostor, err := newStreamLayer("127.0.0.1:0", RaftSecurity{TLS: otherTLS, Credentials: sec.creds}, sec.guard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	good, err := newStreamLayer("127.0.0.1:0", RaftSecurity{TLS: sec.tls, Credentials: sec.creds}, sec.guard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	dialer, err := newStreamLayer("127.0.0.1:0", RaftSecurity{TLS: sec.tls, Credentials: sec.creds}, sec.guard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dialer.Close()

	if _, err := dialer.Dial(raft.ServerAddress(impostor.Addr().String()), 5*time.Second); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("dial to a peer with another CA's certificate: %v; want a certificate error", err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := good.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	conn, err := dialer.Dial(raft.ServerAddress(good.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("dial to a verified peer: %v", err)
	}
	defer conn.Close()
	if _, ok := conn.(*tls.Conn); !ok {
		t.Fatalf("the dialed connection is a %T, not TLS", conn)
	}
	select {
	case c := <-accepted:
		_ = c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the verified connection was not handed to Raft")
	}
}
