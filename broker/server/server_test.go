package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/nameserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startBroker runs a NameServer and one broker on loopback until the test ends.
func startBroker(t *testing.T, options ...Option) *Server {
	b, _ := startBrokerNS(t, options...)
	return b
}

// startBrokerNS is startBroker that also returns the NameServer.
func startBrokerNS(t *testing.T, options ...Option) (*Server, *nameserver.Server) {
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
	bo.RegisterInterval = 100 * time.Millisecond
	b, err := New(bo, nil, options...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, ns
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
	bo.TLS.CertFile, bo.TLS.KeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	b, err := New(bo, nil)
	if err == nil {
		_ = b.Close()
		t.Fatal("a broker started with certificate files that do not exist")
	}
}

// TestNameServerAnswersV5ForRegisteredBrokers: what a broker registers (its
// address, a topic's message type, its FIFO groups) is what RocketMQ 5's
// clients get from the NameServer, their access point.
func TestNameServerAnswersV5ForRegisteredBrokers(t *testing.T) {
	b, ns := startBrokerNS(t)
	tc := broker.TopicConfig{Name: "orders", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6,
		Attributes: map[string]string{"message.type": "FIFO"}}
	if err := b.CreateTopic(tc, false); err != nil {
		t.Fatal(err)
	}
	g := subgroup.Default("ordered")
	g.ConsumeMessageOrderly = true
	if err := b.UpdateSubscriptionGroup(g); err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(ns.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := v2.NewMessagingServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, port, _ := net.SplitHostPort(b.Addr())
	wantEP := &v2.Endpoints{Scheme: v2.AddressScheme_IPv4, Addresses: []*v2.Address{{Host: host, Port: int32(atoi(t, port))}}}
	testutil.WaitFor(t, 20*time.Second, "a FIFO route and per-queue assignments", func() error {
		r, err := c.QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "orders"}})
		if err != nil {
			return err
		}
		if len(r.MessageQueues) != 2 || !proto.Equal(r.MessageQueues[0].Broker.Endpoints, wantEP) ||
			len(r.MessageQueues[0].AcceptMessageTypes) != 1 || r.MessageQueues[0].AcceptMessageTypes[0] != v2.MessageType_FIFO {
			return fmt.Errorf("route %v %v", r.Status, r.MessageQueues)
		}
		a, err := c.QueryAssignment(ctx, &v2.QueryAssignmentRequest{Topic: &v2.Resource{Name: "orders"}, Group: &v2.Resource{Name: "ordered"}})
		if err != nil {
			return err
		}
		if len(a.Assignments) != 2 || a.Assignments[1].MessageQueue.Id != 1 {
			return fmt.Errorf("assignments %v %v", a.Status, a.Assignments)
		}
		return nil
	})
	// The route's endpoint serves the v5 service (over TLS, as the Go
	// client dials it).
	tlsCreds := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))
	if err := v5Call(t, net.JoinHostPort(host, port), tlsCreds); status.Code(err) == codes.Unavailable ||
		strings.Contains(status.Convert(err).Message(), "unknown service") {
		t.Fatalf("the routed endpoint: %v", err)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
