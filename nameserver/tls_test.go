package nameserver

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/plaintext"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func startTLSNameServer(t *testing.T, mode tlsconf.Mode, p tlstest.Pair) *Server {
	t.Helper()
	o := DefaultOptions()
	o.ListenAddr = "127.0.0.1:0"
	o.GossipAddr = GossipOff
	o.TLSCertFile, o.TLSKeyFile = p.CertFile, p.KeyFile
	o.TLS.Mode = mode
	s, err := New(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		_ = s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func nsGRPC(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pb.NewNameServerClient(cc).ListTopics(ctx, &pb.ListTopicsRequest{})
	return err
}

// nsFrame looks a route up over the frame protocol: the lookup's error, or
// nil once the NameServer answered (TOPIC_NOT_EXIST: it knows no topic).
func nsFrame(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	fc := frame.NewClient(addr, frame.Options{TLS: cfg})
	defer fc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := new(pb.GetRouteResponse)
	if err := fc.Call(ctx, frame.MethodGetRoute, &pb.GetRouteRequest{Topic: "t"}, resp); err != nil {
		return err
	}
	if resp.GetStatus().GetCode() != pb.Code_TOPIC_NOT_EXIST {
		t.Errorf("frame lookup of an unknown topic: %v", resp.GetStatus())
	}
	return nil
}

// The NameServer's port in each TLS mode, gRPC, frames and remoting, plain and
// TLS; in enforcing mode plain-text clients get the clear error.
func TestPortTLSModes(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	pair := ca.Server(t, dir, "ns", "ns.test")
	verified := &tls.Config{RootCAs: ca.Pool, ServerName: "ns.test"}
	for _, mode := range []tlsconf.Mode{tlsconf.Off, tlsconf.Permissive, tlsconf.Enforcing} {
		t.Run(mode.String(), func(t *testing.T) {
			s := startTLSNameServer(t, mode, pair)
			plainOK, tlsOK := mode != tlsconf.Enforcing, mode != tlsconf.Off
			err := nsGRPC(t, s.Addr(), nil)
			if plainOK && err != nil {
				t.Errorf("gRPC plain: %v", err)
			}
			if !plainOK && (status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "TLS")) {
				t.Errorf("gRPC plain: %v; want FailedPrecondition naming TLS", err)
			}
			if err := nsGRPC(t, s.Addr(), verified); tlsOK != (err == nil) {
				t.Errorf("gRPC TLS: %v; want served=%v", err, tlsOK)
			}
			err = nsFrame(t, s.Addr(), nil)
			var remote *frame.RemoteError
			if plainOK && err != nil {
				t.Errorf("frame plain: %v", err)
			}
			if !plainOK && (!errors.As(err, &remote) || remote.Msg != plaintext.Message) {
				t.Errorf("frame plain: %v; want an error frame %q", err, plaintext.Message)
			}
			if err := nsFrame(t, s.Addr(), verified); tlsOK != (err == nil) {
				t.Errorf("frame TLS: %v; want served=%v", err, tlsOK)
			}
			resp, err := tlstest.RemotingCall(t, s.Addr(), nil, remoting.GetAllTopicListFromNameServer)
			if plainOK && (err != nil || resp.Code != remoting.Success) {
				t.Errorf("remoting plain: %v %v", resp, err)
			}
			if !plainOK && (err != nil || resp.Code != remoting.SystemError || resp.Opaque != tlstest.RemotingOpaque || resp.Remark != plaintext.Message) {
				t.Errorf("remoting plain: %v, %v; want SYSTEM_ERROR %q", resp, err, plaintext.Message)
			}
			resp, err = tlstest.RemotingCall(t, s.Addr(), verified, remoting.GetAllTopicListFromNameServer)
			if tlsOK != (err == nil && resp.Code == remoting.Success) {
				t.Errorf("remoting TLS: %v, %v; want served=%v", resp, err, tlsOK)
			}
		})
	}
}

// NameServers with the same --gossip-key form a pool; one with another
// key does not join it.
func TestGossipKeyPool(t *testing.T) {
	key := []byte("0123456789abcdef")
	ns1 := startServer(t, func(o *Options) { o.GossipKey = key })
	ns2 := startServer(t, func(o *Options) { o.GossipKey = key; o.GossipSeeds = []string{ns1.GossipAddr()} })
	waitMembers(t, 2, ns1, ns2)
	ns3 := startServer(t, func(o *Options) {
		o.GossipKey = []byte("another key 16by")
		o.GossipSeeds = []string{ns1.GossipAddr()}
	})
	if n, err := ns3.members.Load().Join(ns1.GossipAddr()); err == nil && n > 0 {
		t.Fatalf("a NameServer with another key joined (%d reached)", n)
	}
	time.Sleep(time.Second)
	for _, s := range []*Server{ns1, ns2, ns3} {
		want := 2
		if s == ns3 {
			want = 1
		}
		if got := len(s.members.Load().Members()); got != want {
			t.Errorf("%s sees %d members, want %d", s.Addr(), got, want)
		}
	}
}
