package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// guardedNameServer is a NameServer's gRPC service behind a guard with ACL
// on, refusing as the daemons' interceptors do (wire.GRPCError) — or, with
// inStatus, in the response's Status as a handler does. It counts the
// calls that reached it, refused or not.
type guardedNameServer struct {
	pb.UnimplementedNameServerServer
	g        *auth.Guard
	inStatus bool
	calls    atomic.Int64
	dates    chan string // the x-mq-date-time of each call
}

func (s *guardedNameServer) check(ctx context.Context) error {
	s.calls.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	select {
	case s.dates <- first(auth.HeaderDate):
	default:
	}
	p, _ := peer.FromContext(ctx)
	prin, err := s.g.Header(p.Addr.String(), first(auth.HeaderAuthorization), first(auth.HeaderDate))
	if err != nil {
		return err
	}
	return s.g.Authenticated(prin, p.Addr.String())
}

func (s *guardedNameServer) GetRoute(ctx context.Context, req *pb.GetRouteRequest) (*pb.GetRouteResponse, error) {
	if err := s.check(ctx); err != nil {
		if s.inStatus {
			return &pb.GetRouteResponse{Status: wire.Status(err)}, nil
		}
		return nil, wire.GRPCError(err)
	}
	return &pb.GetRouteResponse{Status: wire.OK, Route: &pb.TopicRoute{
		QueueDatas:  []*pb.QueueData{{BrokerName: "b", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}},
		BrokerDatas: []*pb.BrokerData{{BrokerName: "b", BrokerAddrs: map[int64]string{0: "127.0.0.1:1"}}},
	}}, nil
}

// startGuarded serves a guarded NameServer (over TLS with cert) with the
// users of an ACL file: "admin-key"/"admin-secret" (admin) and
// "user-key"/"user-secret".
func startGuarded(t *testing.T, inStatus bool, cert *tls.Certificate) (*guardedNameServer, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: "admin-key", SecretKey: "admin-secret", Admin: true},
		{AccessKey: "user-key", SecretKey: "user-secret", DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB"},
	}}); err != nil {
		t.Fatal(err)
	}
	g, err := auth.New(auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*cert}})))
	}
	gs := grpc.NewServer(opts...)
	ns := &guardedNameServer{g: g, inStatus: inStatus, dates: make(chan string, 64)}
	pb.RegisterNameServerServer(gs, ns)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return ns, lis.Addr().String()
}

func newTestAdmin(t *testing.T, opts ...Option) *Admin {
	t.Helper()
	a, err := NewAdmin(append([]Option{WithRPCTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// The SDK signs every gRPC call so that a guard with ACL on accepts it;
// wrong or missing credentials come back as ErrUnauthenticated, named in
// the text, and are not tried on the next NameServer — whether the daemon
// refused in an interceptor (a gRPC status) or in the response's Status.
func TestCredentialsOverGRPC(t *testing.T) {
	for _, inStatus := range []bool{false, true} {
		name := "interceptor"
		if inStatus {
			name = "status"
		}
		t.Run(name, func(t *testing.T) {
			ns, addr := startGuarded(t, inStatus, nil)
			ctx := context.Background()

			good := newTestAdmin(t, WithNameServers(addr), WithCredentials("user-key", "user-secret"))
			for i := 0; i < 3; i++ {
				if _, err := good.Route(ctx, "orders"); err != nil {
					t.Fatalf("call %d with the right keys: %v", i, err)
				}
			}
			// Every call carried a UTC date of now.
			for i := 0; i < 3; i++ {
				d, err := auth.ParseDate(<-ns.dates)
				if err != nil || time.Since(d).Abs() > time.Minute {
					t.Fatalf("call %d signed date %v, %v; want now, UTC", i, d, err)
				}
			}

			for _, c := range []struct {
				name string
				opts []Option
				want string
			}{
				{"no credentials", nil, "UNAUTHENTICATED: no credentials"},
				{"wrong secret", []Option{WithCredentials("user-key", "not-the-secret")}, "UNAUTHENTICATED: signature check failed for access key user-key"},
				{"unknown key", []Option{WithCredentials("who-is-this", "whatever")}, "UNAUTHENTICATED: unknown access key who-is-this"},
			} {
				// Two NameServer addresses: a refusal is an answer, the
				// second is not asked.
				a := newTestAdmin(t, append(c.opts, WithNameServers(addr, addr))...)
				before := ns.calls.Load()
				_, err := a.Route(ctx, "orders")
				if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: %v; want ErrUnauthenticated with %q", c.name, err, c.want)
				}
				if errors.Is(err, ErrNoRoute) || errors.Is(err, ErrNoNameServer) {
					t.Errorf("%s: %v reads as a missing route or NameServer", c.name, err)
				}
				if n := ns.calls.Load() - before; n != 1 {
					t.Errorf("%s: the NameServers got %d calls, want 1 (no retry)", c.name, n)
				}
			}
		})
	}
}

// With WithTLS the calls go over TLS, verified against the CA; a client
// that does not trust the CA, or speaks plain text, gets nothing.
func TestCredentialsOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "sdk")
	pair := ca.Server(t, dir, "ns", "localhost")
	_, addr := startGuarded(t, false, &pair.Cert)
	ctx := context.Background()

	a := newTestAdmin(t, WithNameServers(addr), WithCredentials("user-key", "user-secret"), WithTLS(&tls.Config{RootCAs: ca.Pool}))
	if _, err := a.Route(ctx, "orders"); err != nil {
		t.Fatalf("over TLS with the CA: %v", err)
	}
	for name, opts := range map[string][]Option{
		"untrusted": {WithTLS(&tls.Config{RootCAs: tlstest.NewCA(t, dir, "other").Pool})},
		"plain":     nil,
	} {
		a := newTestAdmin(t, append(opts, WithNameServers(addr), WithCredentials("user-key", "user-secret"), WithRPCTimeout(time.Second))...)
		if _, err := a.Route(ctx, "orders"); err == nil {
			t.Errorf("%s: served", name)
		}
	}
}

func TestCredentialsNeedBothKeys(t *testing.T) {
	for _, c := range [][2]string{{"ak-only", ""}, {"", "sk-only"}} {
		if _, err := NewAdmin(WithCredentials(c[0], c[1])); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("WithCredentials(%q, %q): %v, want ErrInvalidParameter", c[0], c[1], err)
		}
	}
}

// The signature is computed once a second and shared by that second's
// calls; a new second signs anew.
func TestSignerSignsEachSecond(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 100, time.FixedZone("CET", 3600))
	s := newSigner(auth.Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"})
	s.now = func() time.Time { return now }
	h1 := s.header()
	// RocketMQ's published vector: secret 12345678 over 20260101T120000Z
	// (11:00 UTC here, so 12:00 in CET is 11:00Z — use the UTC date).
	if h1[auth.HeaderDate] != "20260101T110000Z" {
		t.Fatalf("date %q, want UTC", h1[auth.HeaderDate])
	}
	if want := auth.SignDate("20260101T110000Z", "12345678"); !strings.HasSuffix(h1[auth.HeaderAuthorization], "Signature="+want) ||
		!strings.HasPrefix(h1[auth.HeaderAuthorization], "MQv2-HMAC-SHA1 Credential=RocketMQ,") {
		t.Fatalf("authorization %q", h1[auth.HeaderAuthorization])
	}
	now = now.Add(500 * time.Millisecond)
	if h2 := s.header(); h2[auth.HeaderAuthorization] != h1[auth.HeaderAuthorization] {
		t.Fatalf("same second signed differently: %v %v", h1, h2)
	}
	now = now.Add(time.Second)
	if h3 := s.header(); h3[auth.HeaderDate] != "20260101T110001Z" || h3[auth.HeaderAuthorization] == h1[auth.HeaderAuthorization] {
		t.Fatalf("next second: %v", h3)
	}
	if fa := s.frameAuth(); fa.DateTime != "20260101T110001Z" || !strings.Contains(fa.Authorization, "Credential=RocketMQ") {
		t.Fatalf("frame Auth request %v", fa)
	}
}

// A consumer whose credentials the NameServers refuse fails Start with
// the refusal, rather than retrying in the background.
func TestConsumerStartRefused(t *testing.T) {
	_, addr := startGuarded(t, false, nil)
	ctx := context.Background()
	shared := WithOptions(WithNameServers(addr), WithCredentials("user-key", "not-the-secret"), WithRPCTimeout(2*time.Second))

	push, err := NewPushConsumer("g", shared)
	if err != nil {
		t.Fatal(err)
	}
	defer push.Close()
	if err := push.Subscribe("orders", "*", ConcurrentListener(func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })); err != nil {
		t.Fatal(err)
	}
	if err := push.Start(ctx); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "UNAUTHENTICATED: signature check failed") {
		t.Fatalf("push consumer Start: %v, want UNAUTHENTICATED", err)
	}

	pull, err := NewPullConsumer("g", shared)
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	if err := pull.Subscribe("orders", "*"); err != nil {
		t.Fatal(err)
	}
	if err := pull.Start(ctx); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("pull consumer Start: %v, want UNAUTHENTICATED", err)
	}
}

// TestErrorChecksOfASuccessAllocateNothing: the checks every answered call
// makes of its error (isCoded, frameRefusal) allocate nothing when there is
// no error, and still find what they look for in a wrapped one.
func TestErrorChecksOfASuccessAllocateNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = isCoded(nil) }); n != 0 {
		t.Errorf("isCoded(nil): %.0f allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = frameRefusal("127.0.0.1:1", nil) }); n != 0 {
		t.Errorf("frameRefusal(nil): %.0f allocations", n)
	}
	coded := fmt.Errorf("send: %w", wire.Errorf(pb.Code_NO_PERMISSION, "topic t"))
	if !isCoded(coded) || isCoded(errors.New("reset")) {
		t.Error("isCoded does not tell a coded error from another")
	}
	refused := frameRefusal("127.0.0.1:1", &frame.AuthError{Addr: "127.0.0.1:1", Err: coded})
	if wire.CodeOf(refused) != pb.Code_NO_PERMISSION || !strings.Contains(refused.Error(), "frame connection to 127.0.0.1:1") {
		t.Errorf("frameRefusal of a refused handshake: %v", refused)
	}
	if frameRefusal("127.0.0.1:1", coded) != nil {
		t.Error("frameRefusal of an error that is no handshake refusal is not nil")
	}
}
