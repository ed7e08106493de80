package server

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/nameserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startBroker runs a NameServer and one broker on loopback until the test ends.
func startBroker(t *testing.T, options ...Option) *Server {
	t.Helper()
	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = nameserver.GossipOff
	ns, err := nameserver.New(no, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	bo := broker.DefaultOptions(filepath.Join(t.TempDir(), "broker-a"))
	bo.ListenAddr = "127.0.0.1:0"
	bo.NameServers = []string{ns.Addr()}
	bo.GossipAddr = "off"
	bo.Replication.HAListenAddr = "127.0.0.1:0"
	bo.Store.CommitLog.SegmentSize = 16 << 20
	b, err := New(bo, nil, options...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// v5Call makes one apache.rocketmq.v2 call on the broker's port and returns
// the gRPC error.
func v5Call(t *testing.T, addr string, opts ...grpc.DialOption) error {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = v2.NewMessagingServiceClient(cc).NotifyClientTermination(ctx, &v2.NotifyClientTerminationRequest{})
	return err
}

func TestV5ServiceIsServedUnlessTurnedOff(t *testing.T) {
	on := startBroker(t)
	if err := v5Call(t, on.Addr()); status.Code(err) == codes.Unimplemented && strings.Contains(status.Convert(err).Message(), "unknown service") {
		t.Fatalf("v5 on: %v", err)
	} else if status.Code(err) == codes.Unavailable {
		t.Fatalf("v5 on: %v", err)
	}
	// The Go client's default: TLS without verification, on the same port.
	tlsCreds := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))
	if err := v5Call(t, on.Addr(), tlsCreds); status.Code(err) == codes.Unimplemented && strings.Contains(status.Convert(err).Message(), "unknown service") {
		t.Fatalf("v5 on, TLS: %v", err)
	} else if status.Code(err) == codes.Unavailable {
		t.Fatalf("v5 on, TLS: %v", err)
	}
	off := startBroker(t, WithV5(false))
	err := v5Call(t, off.Addr())
	if status.Code(err) != codes.Unimplemented || !strings.Contains(status.Convert(err).Message(), "unknown service") {
		t.Fatalf("v5 off: got %v, want Unimplemented unknown service", err)
	}
}

func TestUnloadableTLSFilesFailNew(t *testing.T) {
	bo := broker.DefaultOptions(filepath.Join(t.TempDir(), "broker-a"))
	bo.ListenAddr = "127.0.0.1:0"
	bo.GossipAddr = "off"
	dir := t.TempDir()
	b, err := New(bo, nil, WithTLS(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")))
	if err == nil {
		_ = b.Close()
		t.Fatal("a broker started with certificate files that do not exist")
	}
}
