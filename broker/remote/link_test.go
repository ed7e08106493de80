package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// fakeNameServer answers RegisterBroker behind an interceptor that checks
// every call as a daemon does with ACL on: the signed-date header through
// a real auth.Guard, then Internal (an admin user).
type fakeNameServer struct {
	pb.UnimplementedNameServerServer
	mu    sync.Mutex
	dates []string // x-mq-date-time of each accepted call
	regs  int
}

func (f *fakeNameServer) RegisterBroker(context.Context, *pb.RegisterBrokerRequest) (*pb.RegisterBrokerResponse, error) {
	f.mu.Lock()
	f.regs++
	f.mu.Unlock()
	return &pb.RegisterBrokerResponse{MasterAddr: "m:1"}, nil
}

func (f *fakeNameServer) registrations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.regs
}

func guardOf(t *testing.T) *auth.Guard {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: "daemon-admin", SecretKey: "admin-secret", Admin: true},
		{AccessKey: "plain-user", SecretKey: "user-secret", DefaultTopicPerm: "PUB|SUB"},
	}}); err != nil {
		t.Fatal(err)
	}
	g, err := auth.New(auth.Config{Enabled: true, File: file, MaxSkew: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// serveTLS serves f on 127.0.0.1:0 over TLS only, with the certificate ca
// signed.
func serveTLS(t *testing.T, ca *tlstest.CA, dir string, g *auth.Guard, f *fakeNameServer) string {
	t.Helper()
	pair := ca.Server(t, dir, "ns", "ns")
	check := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		get := func(k string) string {
			if v := md.Get(k); len(v) > 0 {
				return v[0]
			}
			return ""
		}
		p, _ := peer.FromContext(ctx)
		who, err := g.Header(p.Addr.String(), get(auth.HeaderAuthorization), get(auth.HeaderDate))
		if err == nil {
			err = g.Internal(who, p.Addr.String(), info.FullMethod)
		}
		if err != nil {
			return nil, wire.GRPCError(err)
		}
		f.mu.Lock()
		f.dates = append(f.dates, get(auth.HeaderDate))
		f.mu.Unlock()
		return h(ctx, req)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair.Cert}, MinVersion: tls.VersionTLS12})),
		grpc.UnaryInterceptor(check))
	pb.RegisterNameServerServer(srv, f)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestNameServersOverTLSWithCredentials: the NameServer client dials with
// TLS verified against the CA and signs each call with the broker's
// credentials; the server's guard accepts an admin user's calls, and
// refuses calls without credentials, with a wrong secret or from a user
// that is not an admin, with UNAUTHENTICATED or NO_PERMISSION; a plaintext
// client does not get through at all.
func TestNameServersOverTLSWithCredentials(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	g := guardOf(t)
	f := &fakeNameServer{}
	addr := serveTLS(t, ca, dir, g, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg := broker.Registration{Cluster: "c", BrokerName: "b", Addr: "127.0.0.1:1", BrokerID: 0}

	dial := func(creds auth.Credentials) *NameServers {
		d, err := NewDialOptions(tlsconf.Config{Dial: true, CAFile: ca.File}, nil, creds)
		if err != nil {
			t.Fatal(err)
		}
		ns := NewNameServers(d)
		t.Cleanup(func() { _ = ns.Close() })
		return ns
	}

	ns := dial(auth.Credentials{AccessKey: "daemon-admin", SecretKey: "admin-secret"})
	for i := 0; i < 2; i++ {
		ans, err := ns.Register(ctx, addr, reg)
		if err != nil || ans.MasterAddr != "m:1" {
			t.Fatalf("registration %d: %+v, %v", i, ans, err)
		}
		if i == 0 {
			time.Sleep(1100 * time.Millisecond) // the next call signs another second
		}
	}
	f.mu.Lock()
	dates := append([]string(nil), f.dates...)
	f.mu.Unlock()
	if len(dates) != 2 || dates[0] == dates[1] || !strings.HasSuffix(dates[0], "Z") {
		t.Fatalf("dates signed: %q: want one fresh UTC date per call", dates)
	}

	for _, c := range []struct {
		name  string
		creds auth.Credentials
		code  errcode.Code
	}{
		{"no credentials", auth.Credentials{}, errcode.Unauthenticated},
		{"wrong secret", auth.Credentials{AccessKey: "daemon-admin", SecretKey: "not-the-secret"}, errcode.Unauthenticated},
		{"not an admin", auth.Credentials{AccessKey: "plain-user", SecretKey: "user-secret"}, errcode.NoPermission},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := f.registrations()
			_, err := dial(c.creds).Register(ctx, addr, reg)
			if got := errcode.Of(wire.FromGRPCError(err)); got != c.code {
				t.Fatalf("error %v (code %v), want %v", err, got, c.code)
			}
			if f.registrations() != before {
				t.Fatal("a refused call reached the handler")
			}
		})
	}

	t.Run("plain text", func(t *testing.T) {
		plain := NewNameServers(DialOptions{Credentials: auth.Credentials{AccessKey: "daemon-admin", SecretKey: "admin-secret"}})
		defer plain.Close()
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		if _, err := plain.Register(pctx, addr, reg); err == nil {
			t.Fatal("a plaintext client registered with a TLS-only server")
		}
	})

	t.Run("untrusted server", func(t *testing.T) {
		other := tlstest.NewCA(t, t.TempDir(), "other")
		d, err := NewDialOptions(tlsconf.Config{Dial: true, CAFile: other.File}, nil, auth.Credentials{AccessKey: "daemon-admin", SecretKey: "admin-secret"})
		if err != nil {
			t.Fatal(err)
		}
		ns := NewNameServers(d)
		defer ns.Close()
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		_, err = ns.Register(pctx, addr, reg)
		if err == nil || errors.Is(err, context.Canceled) {
			t.Fatalf("a server the CA did not sign was trusted: %v", err)
		}
	})
}

// TestDialOptionsWithoutTLS: without Dial the connections are plain text
// whatever the rest of the configuration says.
func TestDialOptionsWithoutTLS(t *testing.T) {
	d, err := NewDialOptions(tlsconf.Config{Mode: tlsconf.Enforcing, CAFile: "/nonexistent"}, nil, auth.Credentials{})
	if err != nil || d.TLS != nil {
		t.Fatalf("%+v, %v", d, err)
	}
	if _, err := NewDialOptions(tlsconf.Config{Dial: true, CAFile: "/nonexistent"}, nil, auth.Credentials{}); err == nil {
		t.Fatal("an unreadable CA file was accepted")
	}
}
