package frame

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bolide-mq/bolide/internal/errcode"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// mWho answers the identity its connection established with Auth
// ("anonymous" without one) and the peer it was served for.
const mWho Method = 104

type whoKey struct{}

// authServer is a test server whose Authenticate accepts the
// authorization "good <name>" and refuses anything else with
// UNAUTHENTICATED; it counts the requests mWho served.
func authServer(t *testing.T, hook bool) (*testServer, *atomic.Int64) {
	t.Helper()
	opts := Options{}
	if hook {
		opts.Authenticate = func(ctx context.Context, nc net.Conn, req *pb.FrameAuthRequest) (context.Context, error) {
			if Peer(ctx) != nc.RemoteAddr().String() {
				return nil, errors.New("Peer does not name the connection")
			}
			name, ok := strings.CutPrefix(req.Authorization, "good ")
			if !ok || req.DateTime != "20260101T120000Z" {
				return nil, errcode.Errorf(errcode.Unauthenticated, "bad credentials %q", req.Authorization)
			}
			return context.WithValue(ctx, whoKey{}, name), nil
		}
	}
	ts := startServer(t, opts, nil)
	var served atomic.Int64
	ts.Handle(mWho, Handler{NewRequest: func() proto.Message { return new(wrapperspb.StringValue) },
		Serve: func(ctx context.Context, _ proto.Message) proto.Message {
			served.Add(1)
			who, _ := ctx.Value(whoKey{}).(string)
			if who == "" {
				who = "anonymous"
			}
			return wrapperspb.String(who + "@" + Peer(ctx))
		}})
	return ts, &served
}

func signedAs(authorization string) func() *pb.FrameAuthRequest {
	return func() *pb.FrameAuthRequest {
		return &pb.FrameAuthRequest{Authorization: authorization, DateTime: "20260101T120000Z"}
	}
}

// The Auth request made at dial time gives the connection's requests the
// identity Authenticate established, and Peer names the client.
func TestAuthEstablishesIdentity(t *testing.T) {
	ts, _ := authServer(t, true)
	ctx := context.Background()

	c := newClient(t, ts.addr, Options{Auth: signedAs("good alice")})
	got, err := call(ctx, c, mWho, "")
	if err != nil {
		t.Fatal(err)
	}
	who, peer, _ := strings.Cut(got, "@")
	if who != "alice" || !strings.HasPrefix(peer, "127.0.0.1:") {
		t.Fatalf("served as %q, want alice@127.0.0.1:port", got)
	}
	// Requests on their own goroutine see it too.
	if got, err := call(ctx, c, mEchoAsync, "still"); err != nil || got != "still" {
		t.Fatalf("async call after Auth: %q, %v", got, err)
	}

	// Without Auth: no identity, and the server still serves (it is the
	// handlers that refuse, by what the context lacks).
	anon := newClient(t, ts.addr, Options{})
	if got, err := call(ctx, anon, mWho, ""); err != nil || !strings.HasPrefix(got, "anonymous@") {
		t.Fatalf("without Auth: %q, %v", got, err)
	}
}

// A refused Auth fails the call with an *AuthError carrying the coded
// error, and nothing is sent: the handler never runs. Every call dials and
// is refused again.
func TestAuthRefused(t *testing.T) {
	ts, served := authServer(t, true)
	c := newClient(t, ts.addr, Options{Auth: signedAs("forged")})
	for i := 0; i < 2; i++ {
		_, err := call(context.Background(), c, mWho, "")
		var ae *AuthError
		if !errors.As(err, &ae) || errcode.Of(err) != errcode.Unauthenticated || !strings.Contains(err.Error(), `bad credentials "forged"`) {
			t.Fatalf("call %d with refused credentials: %v, want an UNAUTHENTICATED *AuthError", i, err)
		}
		var ce *ConnError
		if errors.As(err, &ce) {
			t.Fatalf("a refusal is not a connection failure: %v", err)
		}
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("%d requests served after a refused Auth", n)
	}
}

// A server without an Authenticate hook answers Auth OK and serves the
// connection anonymously.
func TestAuthWithoutHook(t *testing.T) {
	ts, _ := authServer(t, false)
	c := newClient(t, ts.addr, Options{Auth: signedAs("good alice")})
	if got, err := call(context.Background(), c, mWho, ""); err != nil || !strings.HasPrefix(got, "anonymous@") {
		t.Fatalf("served as %q, %v; want anonymous", got, err)
	}
}

// Each Auth replaces the connection's identity: after a failed one the
// connection is anonymous again.
func TestAuthReplacesIdentity(t *testing.T) {
	ts, _ := authServer(t, true)
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, Magic); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(nc, make([]byte, len(Magic))); err != nil {
		t.Fatal(err)
	}
	id := uint32(0)
	roundTrip := func(m Method, req, resp proto.Message) {
		t.Helper()
		id++
		b, err := AppendMessage(nil, Header{Kind: KindRequest, Method: m, ID: id}, req, DefaultMaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(b); err != nil {
			t.Fatal(err)
		}
		hb := make([]byte, HeaderSize)
		if _, err := io.ReadFull(nc, hb); err != nil {
			t.Fatal(err)
		}
		h, err := ParseHeader(hb, DefaultMaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, h.Size)
		if _, err := io.ReadFull(nc, payload); err != nil {
			t.Fatal(err)
		}
		if h.Kind != KindResponse || h.ID != id || h.Method != m {
			t.Fatalf("answer %+v %q to request %d", h, payload, id)
		}
		if err := proto.Unmarshal(payload, resp); err != nil {
			t.Fatal(err)
		}
	}
	who := func() string {
		t.Helper()
		var resp wrapperspb.StringValue
		roundTrip(mWho, wrapperspb.String(""), &resp)
		name, _, _ := strings.Cut(resp.Value, "@")
		return name
	}
	auth := func(authorization string) *pb.Status {
		t.Helper()
		var resp pb.FrameAuthResponse
		roundTrip(MethodAuth, signedAs(authorization)(), &resp)
		return resp.Status
	}
	if st := auth("good alice"); st.GetCode() != pb.Code_OK || who() != "alice" {
		t.Fatalf("first Auth: %v", st)
	}
	if st := auth("good bob"); st.GetCode() != pb.Code_OK || who() != "bob" {
		t.Fatalf("second Auth: %v", st)
	}
	if st := auth("forged"); st.GetCode() != pb.Code_UNAUTHENTICATED || !strings.Contains(st.Message, "bad credentials") {
		t.Fatalf("forged Auth answered %v", st)
	}
	if got := who(); got != "anonymous" {
		t.Fatalf("after a failed Auth the connection is served as %q, want anonymous", got)
	}
}

// A server older than the Auth method answers it with an error frame: the
// client goes on without authentication.
func TestAuthAgainstAnOlderServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := lis.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		// Magic, then an error frame for the Auth request, then echo one
		// request.
		if _, err := io.ReadFull(nc, make([]byte, len(Magic))); err != nil {
			return
		}
		_, _ = io.WriteString(nc, Magic)
		for i := 0; i < 2; i++ {
			hb := make([]byte, HeaderSize)
			if _, err := io.ReadFull(nc, hb); err != nil {
				return
			}
			h, err := ParseHeader(hb, DefaultMaxFrame)
			if err != nil {
				return
			}
			payload := make([]byte, h.Size)
			if _, err := io.ReadFull(nc, payload); err != nil {
				return
			}
			if h.Method == MethodAuth {
				_, _ = nc.Write(AppendFrame(nil, Header{Kind: KindError, Method: h.Method, ID: h.ID}, []byte("unknown method 3")))
				continue
			}
			_, _ = nc.Write(AppendFrame(nil, Header{Kind: KindResponse, Method: h.Method, ID: h.ID}, payload))
		}
		_, _ = io.Copy(io.Discard, nc)
	}()
	c := NewClient(lis.Addr().String(), Options{Auth: signedAs("good alice")})
	if got, err := call(context.Background(), c, mEcho, "hello"); err != nil || got != "hello" {
		t.Fatalf("call to an older server: %q, %v", got, err)
	}
	_ = c.Close()
	<-done
}

// testCA is a CA and a server certificate it signed for 127.0.0.1 and
// localhost.
type testCA struct {
	pool   *x509.CertPool
	server tls.Certificate
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "frame test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "frame test server"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testCA{pool: pool, server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// A client with TLS speaks the protocol, Auth included, inside TLS; the
// server name defaults to the address's host and is verified.
func TestTLS(t *testing.T) {
	ca := newTestCA(t)
	ts, _ := authServer(t, true)
	// A TLS terminator in front of the test server, as the broker's port
	// mux is: it decrypts and relays.
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.server}})
	if err != nil {
		t.Fatal(err)
	}
	relayed := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				if err := nc.(*tls.Conn).Handshake(); err != nil {
					return
				}
				relayed <- struct{}{}
				up, err := net.Dial("tcp", ts.addr)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, nc); _ = up.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(nc, up)
			}()
		}
	}()
	defer func() { _ = lis.Close(); <-done }()
	ctx := context.Background()

	c := NewClient(lis.Addr().String(), Options{TLS: &tls.Config{RootCAs: ca.pool}, Auth: signedAs("good alice")})
	got, err := call(ctx, c, mWho, "")
	_ = c.Close()
	if err != nil || !strings.HasPrefix(got, "alice@") {
		t.Fatalf("over TLS: %q, %v", got, err)
	}
	select {
	case <-relayed:
	default:
		t.Fatal("the call did not go through the TLS listener")
	}

	// A certificate the client cannot verify: a handshake *ConnError.
	bad := NewClient(lis.Addr().String(), Options{TLS: &tls.Config{RootCAs: x509.NewCertPool()}})
	_, err = call(ctx, bad, mEcho, "x")
	_ = bad.Close()
	var ce *ConnError
	if !errors.As(err, &ce) || ce.Op != "handshake" || !strings.Contains(err.Error(), "TLS") {
		t.Fatalf("untrusted certificate: %v, want a TLS handshake *ConnError", err)
	}

	// Plain text to the TLS port fails the handshake; it never reads as
	// the protocol.
	plain := NewClient(lis.Addr().String(), Options{DialTimeout: 2 * time.Second})
	_, err = call(ctx, plain, mEcho, "x")
	_ = plain.Close()
	if err == nil {
		t.Fatal("a plain-text client was served by a TLS listener")
	}
}
