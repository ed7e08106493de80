package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/plaintext"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// startTLSBroker runs a broker without NameServer under tc until the test
// ends.
func startTLSBroker(t *testing.T, tc tlsconf.Config) *Server {
	t.Helper()
	bo := broker.DefaultOptions(filepath.Join(t.TempDir(), "broker-a"))
	bo.ListenAddr = "127.0.0.1:0"
	bo.GossipAddr = "off"
	bo.Replication.HAListenAddr = "127.0.0.1:0"
	bo.Store.CommitLog.SegmentSize = 16 << 20
	bo.TLS = tc
	b, err := New(bo, nil, WithV5(false))
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

// grpcCall makes a bolide.v1 call (GetBrokerInfo) over TLS when cfg is
// set, else in plain text.
func grpcCall(t *testing.T, addr string, cfg *tls.Config) error {
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
	_, err = pb.NewBrokerClient(cc).GetBrokerInfo(ctx, &pb.GetBrokerInfoRequest{})
	return err
}

// frameCall makes a frame Pull over TLS when cfg is set.
func frameCall(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	c := frame.NewClient(addr, frame.Options{TLS: cfg, DialTimeout: 5 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Call(ctx, frame.MethodPull, &pb.PullRequest{Group: "g", Topic: "t", MaxMessages: 1}, &pb.PullResponse{})
}

// Each TLS mode × plain text and TLS on the broker's port, for gRPC,
// frames and remoting; in enforcing mode a plain-text client gets the
// clear error in its own protocol.
func TestPortTLSModes(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	srv := ca.Server(t, dir, "broker", "broker.test")
	verified := &tls.Config{RootCAs: ca.Pool, ServerName: "broker.test"}
	for _, mode := range []tlsconf.Mode{tlsconf.Off, tlsconf.Permissive, tlsconf.Enforcing} {
		t.Run(mode.String(), func(t *testing.T) {
			b := startTLSBroker(t, tlsconf.Config{Mode: mode, CertFile: srv.CertFile, KeyFile: srv.KeyFile})
			addr := b.Addr()
			plainOK, tlsOK := mode != tlsconf.Enforcing, mode != tlsconf.Off

			// gRPC.
			err := grpcCall(t, addr, nil)
			switch {
			case plainOK && err != nil:
				t.Errorf("gRPC plain: %v; want served", err)
			case !plainOK && (status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "TLS")):
				t.Errorf("gRPC plain: %v; want FailedPrecondition naming TLS", err)
			}
			err = grpcCall(t, addr, verified)
			if tlsOK && err != nil {
				t.Errorf("gRPC TLS: %v; want served", err)
			}
			if !tlsOK && status.Code(err) != codes.Unavailable {
				t.Errorf("gRPC TLS to an off port: %v; want Unavailable (closed)", err)
			}

			// Frames.
			err = frameCall(t, addr, nil)
			var re *frame.RemoteError
			switch {
			case plainOK && err != nil:
				t.Errorf("frames plain: %v; want served", err)
			case !plainOK && (!errors.As(err, &re) || re.Msg != plaintext.Message):
				t.Errorf("frames plain: %v; want an error frame %q", err, plaintext.Message)
			}
			err = frameCall(t, addr, verified)
			if tlsOK && err != nil {
				t.Errorf("frames TLS: %v; want served", err)
			}
			if !tlsOK && err == nil {
				t.Error("frames TLS served by an off port")
			}

			// Remoting.
			resp, err := tlstest.RemotingCall(t, addr, nil, remoting.GetBrokerRuntimeInfo)
			switch {
			case plainOK && (err != nil || resp.Code != remoting.Success):
				t.Errorf("remoting plain: code %d, %v; want served", code(resp), err)
			case !plainOK && (err != nil || resp.Code != remoting.SystemError || resp.Opaque != tlstest.RemotingOpaque || !resp.IsResponse() || resp.Remark != plaintext.Message):
				t.Errorf("remoting plain: code %d remark %q, %v; want SYSTEM_ERROR %q for opaque 4242", code(resp), remark(resp), err, plaintext.Message)
			}
			resp, err = tlstest.RemotingCall(t, addr, verified, remoting.GetBrokerRuntimeInfo)
			if tlsOK && (err != nil || resp.Code != remoting.Success) {
				t.Errorf("remoting TLS: code %d, %v; want served", code(resp), err)
			}
			if !tlsOK && err == nil {
				t.Errorf("remoting TLS served by an off port: code %d", code(resp))
			}
		})
	}
}

// A frame client with credentials sends Auth first: in enforcing mode it
// gets the error frame there, goes on (as with a server without the
// method) and gets it again on its request.
func TestPortFramesWithAuthRefused(t *testing.T) {
	b := startTLSBroker(t, tlsconf.Config{Mode: tlsconf.Enforcing})
	c := frame.NewClient(b.Addr(), frame.Options{DialTimeout: 5 * time.Second, Auth: func() *pb.FrameAuthRequest {
		authz, date := auth.NewHeader(auth.Credentials{AccessKey: "someuser", SecretKey: "somesecret"}, time.Now())
		return &pb.FrameAuthRequest{Authorization: authz, DateTime: date}
	}})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Call(ctx, frame.MethodSend, &pb.SendRequest{ProducerGroup: "p"}, &pb.SendResponse{})
	var re *frame.RemoteError
	if !errors.As(err, &re) || re.Msg != plaintext.Message {
		t.Fatalf("frames with Auth, plain: %v; want an error frame %q", err, plaintext.Message)
	}
}

// Refused plain-text connections are counted per protocol.
func TestPortCountsRefusals(t *testing.T) {
	b := startTLSBroker(t, tlsconf.Config{Mode: tlsconf.Enforcing})
	before := tlsconf.Refused("plaintext_remoting")
	if _, err := tlstest.RemotingCall(t, b.Addr(), nil, remoting.GetBrokerRuntimeInfo); err != nil {
		t.Fatal(err)
	}
	if n := tlsconf.Refused("plaintext_remoting") - before; n != 1 {
		t.Fatalf("refusals counted: %d, want 1", n)
	}
}

// Client certificates on the port: required — a client without one, or
// with one of another CA, is refused; optional — one without is served,
// one with a bad certificate refused.
func TestPortClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	other := tlstest.NewCA(t, dir, "other")
	srv := ca.Server(t, dir, "broker", "broker.test")
	good := ca.Client(t, dir, "app", "app")
	bad := other.Client(t, dir, "intruder", "intruder")
	cfg := func(p *tlstest.Pair) *tls.Config {
		c := &tls.Config{RootCAs: ca.Pool, ServerName: "broker.test"}
		if p != nil {
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &p.Cert, nil }
		}
		return c
	}
	for _, tc := range []struct {
		auth            tlsconf.ClientAuth
		none, good, bad bool
	}{
		{tlsconf.ClientCertRequire, false, true, false},
		{tlsconf.ClientCertOptional, true, true, false},
	} {
		t.Run(tc.auth.String(), func(t *testing.T) {
			b := startTLSBroker(t, tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: srv.CertFile, KeyFile: srv.KeyFile,
				ClientCAFile: ca.File, ClientAuth: tc.auth})
			before := tlsconf.Refused("handshake")
			refused := 0
			for _, c := range []struct {
				name string
				p    *tlstest.Pair
				want bool
			}{{"none", nil, tc.none}, {"good", &good, tc.good}, {"other CA", &bad, tc.bad}} {
				if !c.want {
					refused += 2 // gRPC and remoting
				}
				err := grpcCall(t, b.Addr(), cfg(c.p))
				if c.want != (err == nil) {
					t.Errorf("gRPC, client certificate %s: %v; want served=%v", c.name, err, c.want)
				}
				resp, err := tlstest.RemotingCall(t, b.Addr(), cfg(c.p), remoting.GetBrokerRuntimeInfo)
				if served := err == nil && resp.Code == remoting.Success; served != c.want {
					t.Errorf("remoting, client certificate %s: code %d, %v; want served=%v", c.name, code(resp), err, c.want)
				}
			}
			// The failed handshakes are counted (gRPC retries its dial:
			// at least one per refused client). Under TLS 1.3 the client
			// may finish its side before the server has checked the
			// certificate, so the server counts a moment later.
			testutil.WaitFor(t, 5*time.Second, "failed handshakes counted", func() error {
				if n := tlsconf.Refused("handshake") - before; n < int64(refused) {
					return fmt.Errorf("%d, want at least %d", n, refused)
				}
				return nil
			})
		})
	}
}

// A renewed certificate is presented to new connections of the port.
func TestPortRenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	srv := ca.Server(t, dir, "broker", "first.test")
	b := startTLSBroker(t, tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: srv.CertFile, KeyFile: srv.KeyFile})
	name := func() string {
		c, err := tls.Dial("tcp", b.Addr(), &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := name(); got != "first.test" {
		t.Fatalf("presented %q, want first.test", got)
	}
	time.Sleep(tlsconf.CheckInterval) // the files are looked at once a second
	ca.Server(t, dir, "broker", "second.test")
	deadline := time.Now().Add(5 * time.Second)
	for name() != "second.test" {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was never presented")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func code(c *remoting.Command) int32 {
	if c == nil {
		return -1
	}
	return c.Code
}

func remark(c *remoting.Command) string {
	if c == nil {
		return ""
	}
	return c.Remark
}
