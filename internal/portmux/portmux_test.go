package portmux

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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

// grpcProto serves a grpc.Server (health service) as a Protocol.
type grpcProto struct{ srv *grpc.Server }

func (grpcProto) Name() string { return "grpc" }
func (grpcProto) Claims(head []byte) bool {
	return bytes.HasPrefix([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), head)
}
func (g grpcProto) Serve(lis net.Listener) error { return g.srv.Serve(lis) }
func (g grpcProto) Shutdown(context.Context) error {
	g.srv.GracefulStop()
	return nil
}

func dialTLS(t *testing.T, addr, send string) string {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
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

func checkHealth(t *testing.T, addr string, creds credentials.TransportCredentials) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health over %s: %v", creds.Info().SecurityProtocol, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health over %s: %v", creds.Info().SecurityProtocol, resp.GetStatus())
	}
}

func TestMuxServesTLSAndPlaintextOnOnePort(t *testing.T) {
	src := newTestSource(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	a := &echo{name: "a", prefix: "AAAA"}
	m := NewMux(lis, nil, grpcProto{srv}, a)
	m.SetTLS(TLS{Mode: Permissive, Config: src.ServerConfig})
	m.Serve()
	addr := lis.Addr().String()

	// The same protocols in the clear and inside TLS.
	if got := dial(t, addr, "AAAA1234"); got != "a:AAAA1234" {
		t.Fatalf("plaintext a got %q", got)
	}
	if got := dialTLS(t, addr, "AAAA5678"); got != "a:AAAA5678" {
		t.Fatalf("TLS a got %q", got)
	}
	checkHealth(t, addr, insecure.NewCredentials())
	checkHealth(t, addr, credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))
	// A verifying client trusts the certificate once told its CA.
	checkHealth(t, addr, credentials.NewTLS(&tls.Config{RootCAs: src.roots, ServerName: "localhost"}))

	// Unclaimed bytes inside TLS close the connection, as in the clear.
	if got := dialTLS(t, addr, "CCCC0000"); got != "" {
		t.Fatalf("an unclaimed TLS connection got %q; want it closed", got)
	}
	// A TLS client that never finishes its handshake is cut at shutdown.
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Write([]byte{0x16, 0x03, 0x01, 0x00}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_ = stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := stalled.Read(make([]byte, 1)); err == nil {
		t.Fatal("a stalled handshake survived Shutdown")
	}
}

func TestTLSIsRefusedUnlessEnabled(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(lis, nil, &echo{name: "a", prefix: "AAAA"})
	m.Serve()
	defer func() { _ = m.Shutdown(context.Background()) }()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", lis.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		nc.Close()
		t.Fatal("a TLS handshake succeeded on a port without TLS")
	}
}
