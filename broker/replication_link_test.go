package broker_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/remote"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/controller"
	"github.com/bolide-mq/bolide/ha"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/nameserver"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// secureCluster is what the brokers of a test with TLS and ACL share: a
// CA, a certificate for the brokers, and an ACL file with an admin user
// (the daemons' key) and a user without admin rights.
type secureCluster struct {
	ca       *tlstest.CA
	pair     tlstest.Pair
	aclFile  string
	admin    auth.Credentials
	nonAdmin auth.Credentials
}

func newSecureCluster(t *testing.T) *secureCluster {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "bolide-test")
	c := &secureCluster{ca: ca, pair: ca.Server(t, dir, "broker", "broker"), aclFile: filepath.Join(dir, "plain_acl.yml"),
		admin:    auth.Credentials{AccessKey: "replicator", SecretKey: "replicator-secret"},
		nonAdmin: auth.Credentials{AccessKey: "app-user", SecretKey: "app-user-secret"}}
	if err := auth.WriteFile(c.aclFile, &auth.File{Accounts: []auth.Account{
		{AccessKey: c.admin.AccessKey, SecretKey: c.admin.SecretKey, Admin: true},
		{AccessKey: c.nonAdmin.AccessKey, SecretKey: c.nonAdmin.SecretKey, DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB"},
	}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// enforcing: TLS only on every listener, TLS to other daemons verified
// with the CA, ACL on, these credentials for the broker's own calls.
func (c *secureCluster) enforcing(creds auth.Credentials) func(*broker.Options) {
	return func(o *broker.Options) {
		o.TLS = tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: c.pair.CertFile, KeyFile: c.pair.KeyFile, Dial: true, CAFile: c.ca.File}
		o.Auth = auth.Config{Enabled: true, File: c.aclFile, MaxSkew: 15 * time.Minute}
		o.Credentials = creds
	}
}

// client is a bolide.v1 client of a broker's port over TLS (verified with
// the CA, presenting a certificate it signed) signing each call as the
// admin user.
func (c *secureCluster) client(t *testing.T, b *server.Server) pb.BrokerClient {
	t.Helper()
	cfg, err := tlsconf.ClientConfig(tlsconf.Config{Dial: true, CAFile: c.ca.File}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Certificates = []tls.Certificate{c.pair.Cert} // for a port asking for client certificates
	conn, err := remote.Dial(b.Addr(), remote.DialOptions{TLS: cfg, Credentials: c.admin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewBrokerClient(conn)
}

// startBroker starts a broker with these options (closed at the test's
// end).
func startBroker(t *testing.T, mutate ...func(*broker.Options)) *server.Server {
	t.Helper()
	opts := testOptions(t.TempDir())
	for _, f := range mutate {
		f(&opts)
	}
	b, err := newBroker(opts, nil)
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

// TestReplicationOverTLSWithACL: a master and a slave with TLS enforcing
// and ACL on, the slave's key an admin user's: sync replication works
// (every acknowledged message is on the slave) and the slave gets its
// master's topics. Slaves with a wrong secret, without credentials, with
// a user that is not an admin, or dialling in plain text are refused:
// nothing reaches them, the master keeps serving the good slave, and the
// refused slaves say why. A plaintext HA connection gets nothing.
func TestReplicationOverTLSWithACL(t *testing.T) {
	sc := newSecureCluster(t)
	ctx := context.Background()
	master := startBroker(t, haOpts(broker.ReplicationSync), sc.enforcing(sc.admin))
	mc := sc.client(t, master)
	createTopic(t, mc, "secure", 4)
	slave := startBroker(t, haOpts(broker.ReplicationSync), sc.enforcing(sc.admin), slaveOf(master, 1))
	testutil.WaitFor(t, 10*time.Second, "the slave in sync", func() error {
		if n := master.Replication().Server().InSync(); n != 1 {
			return fmt.Errorf("%d in sync; slave: %+v", n, slave.Replication().Info())
		}
		return nil
	})
	sendSome := func(prefix string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := send(ctx, mc, "secure", int32(i%4), fmt.Sprint(prefix, i)); err != nil {
				t.Fatalf("sync send %d: %v", i, err)
			}
			// Acknowledged in sync mode: the slave holds it already.
			if s, m := slave.Store().CommitLog().MaxOffset(), master.Store().CommitLog().MaxOffset(); s < m {
				t.Fatalf("acknowledged with the slave at %d, master at %d", s, m)
			}
		}
	}
	sendSome("before-", 40)
	waitCaughtUp(t, master, slave)
	sameLog(t, master.Store().CommitLog(), slave.Store().CommitLog())
	testutil.WaitFor(t, 10*time.Second, "the master's topic on the slave (metadata over TLS)", func() error {
		if _, ok := slave.TopicFor("secure"); !ok {
			return fmt.Errorf("no topic; metadata: %v", slave.Replication().Info().MetadataError)
		}
		return nil
	})

	plainDial := func(o *broker.Options) {
		o.TLS.Dial = false
		o.TLS.Mode = tlsconf.Permissive
	}
	for i, c := range []struct {
		name   string
		mutate []func(*broker.Options)
		want   string
	}{
		{"wrong secret", []func(*broker.Options){sc.enforcing(auth.Credentials{AccessKey: sc.admin.AccessKey, SecretKey: "not-the-secret"})},
			"UNAUTHENTICATED"},
		{"no credentials", []func(*broker.Options){sc.enforcing(auth.Credentials{})}, "UNAUTHENTICATED"},
		{"not an admin", []func(*broker.Options){sc.enforcing(sc.nonAdmin)}, "UNAUTHENTICATED"},
		{"plain text", []func(*broker.Options){sc.enforcing(sc.admin), plainDial}, "dial with TLS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := int64(2 + i)
			bad := startBroker(t, append(append([]func(*broker.Options){haOpts(broker.ReplicationSync)}, c.mutate...), slaveOf(master, id))...)
			testutil.WaitFor(t, 10*time.Second, "refused", func() error {
				info := bad.Replication().Info()
				if info.LastError == "" || !strings.Contains(info.LastError, c.want) {
					return fmt.Errorf("%+v", info)
				}
				return nil
			})
			sendSome(c.name+"-", 10)
			info := bad.Replication().Info()
			if info.State == ha.StateReplicating || bad.Store().CommitLog().MaxOffset() != 0 {
				t.Fatalf("refused slave replicated: %d bytes, %+v", bad.Store().CommitLog().MaxOffset(), info)
			}
			for _, s := range master.Replication().Server().Slaves() {
				if s.BrokerID == id {
					t.Fatalf("the master has a session for refused slave %d: %+v", id, s)
				}
			}
			t.Logf("refused slave says: %s", info.LastError)
		})
	}

	t.Run("plaintext HA connection", func(t *testing.T) {
		conn, err := net.Dial("tcp", master.HAServerAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		hello, err := ha.AppendHello(nil, ha.Hello{Version: ha.Version1, BrokerName: master.Options().BrokerName, BrokerID: 9, LastStart: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write(hello)
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		f, err := ha.ReadFrame(bufio.NewReader(conn), 1, nil)
		if err == nil || (!errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err)) {
			t.Fatalf("a plaintext HELLO got %+v, %v: want the connection closed", f, err)
		}
	})

	t.Run("TLS HA connection without AUTH", func(t *testing.T) {
		conn, err := tls.Dial("tcp", master.HAServerAddr(), &tls.Config{RootCAs: sc.ca.Pool, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		hello, _ := ha.AppendHello(nil, ha.Hello{Version: ha.Version2, BrokerName: master.Options().BrokerName, BrokerID: 9, LastStart: -1})
		_, _ = conn.Write(hello)
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		f, err := ha.ReadFrame(bufio.NewReader(conn), 1, nil)
		if err != nil || f.Kind != ha.KindRefuse || f.Refuse.Code != ha.RefuseUnauthenticated {
			t.Fatalf("%+v, %v: want REFUSE UNAUTHENTICATED", f, err)
		}
	})

	// The good slave was served throughout.
	sendSome("after-", 20)
	waitCaughtUp(t, master, slave)
	sameLog(t, master.Store().CommitLog(), slave.Store().CommitLog())
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

// TestRegistrationWithSecureNameServer: a NameServer with TLS enforcing
// and ACL on registers a broker that dials it with TLS and signs its calls
// as an admin user, and refuses one without credentials, one with a wrong
// secret and one dialling in plain text: their routes never appear.
func TestRegistrationWithSecureNameServer(t *testing.T) {
	sc := newSecureCluster(t)
	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = nameserver.GossipOff
	no.TLSCertFile, no.TLSKeyFile = sc.pair.CertFile, sc.pair.KeyFile
	no.TLS = tlsconf.Config{Mode: tlsconf.Enforcing, Dial: true, CAFile: sc.ca.File}
	no.Auth = auth.Config{Enabled: true, File: sc.aclFile, MaxSkew: 15 * time.Minute}
	ns, err := nameserver.New(no, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })

	registering := func(name string, creds auth.Credentials, dialTLS bool) func(*broker.Options) {
		return func(o *broker.Options) {
			o.BrokerName = name
			o.NameServers = []string{ns.Addr()}
			o.RegisterInterval = 100 * time.Millisecond
			o.Replication.HAListenAddr = "127.0.0.1:0"
			o.TLS = tlsconf.Config{Dial: dialTLS, CAFile: sc.ca.File}
			o.Credentials = creds
		}
	}
	startBroker(t, registering("good", sc.admin, true))
	testutil.WaitFor(t, 10*time.Second, "the broker's route", func() error {
		if _, ok := ns.Routes().Holder("good", 0); !ok {
			return errors.New("not registered")
		}
		return nil
	})

	for _, c := range []struct {
		name    string
		creds   auth.Credentials
		dialTLS bool
	}{
		{"no-credentials", auth.Credentials{}, true},
		{"wrong-secret", auth.Credentials{AccessKey: sc.admin.AccessKey, SecretKey: "not-the-secret"}, true},
		{"not-an-admin", sc.nonAdmin, true},
		{"plain-text", sc.admin, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			failures, denials := ns.Guard().Failures(), ns.Guard().Denials()
			b := startBroker(t, registering(c.name, c.creds, c.dialTLS))
			if c.dialTLS {
				testutil.WaitFor(t, 10*time.Second, "the guard's refusal", func() error {
					if ns.Guard().Failures() == failures && ns.Guard().Denials() == denials {
						return errors.New("nothing refused yet")
					}
					return nil
				})
			}
			time.Sleep(time.Second) // several registration rounds
			if lb, ok := ns.Routes().Holder(c.name, 0); ok {
				t.Fatalf("refused broker %s registered: %+v", b.Addr(), lb)
			}
		})
	}
}

// TestControllerModeOverTLSWithACL: brokers in controller mode beat to a
// controller (a NameServer with TLS enforcing and ACL on) over TLS with
// signed calls: one is elected master, the other replicates from it over
// TLS with AUTH and joins the sync state set, and a sync send reaches it.
// A replica whose key has a wrong secret is refused by the controller: it
// learns no master and receives nothing.
func TestControllerModeOverTLSWithACL(t *testing.T) {
	sc := newSecureCluster(t)
	co := controller.LoopbackOptions()
	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = nameserver.GossipOff
	no.Controller = &co
	no.TLSCertFile, no.TLSKeyFile = sc.pair.CertFile, sc.pair.KeyFile
	no.TLS = tlsconf.Config{Mode: tlsconf.Enforcing, Dial: true, CAFile: sc.ca.File}
	no.Auth = auth.Config{Enabled: true, File: sc.aclFile, MaxSkew: 15 * time.Minute}
	ns, err := nameserver.New(no, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	replica := func(id int64, creds auth.Credentials) func(*broker.Options) {
		return func(o *broker.Options) {
			haOpts(broker.ReplicationSync)(o)
			sc.enforcing(creds)(o)
			o.BrokerName = "group-a"
			o.BrokerID = id
			o.NameServers = []string{ns.Addr()}
			o.RegisterInterval = 200 * time.Millisecond
			o.Replication.ControllerAddrs = []string{ns.Addr()}
			o.Replication.ControllerHeartbeat = 100 * time.Millisecond
		}
	}
	r1 := startBroker(t, replica(1, sc.admin))
	r2 := startBroker(t, replica(2, sc.admin))
	var master, slave *server.Server
	testutil.WaitFor(t, 20*time.Second, "a master with both replicas in its sync state set", func() error {
		for _, p := range [][2]*server.Server{{r1, r2}, {r2, r1}} {
			if p[0].Replication().IsMaster() {
				st := p[0].Replication().Info().Controller
				if st == nil || len(st.SyncStateSet) != 2 {
					return fmt.Errorf("master's controller status %+v", st)
				}
				if info := p[1].Replication().Info(); info.State != ha.StateReplicating {
					return fmt.Errorf("slave %+v", info)
				}
				master, slave = p[0], p[1]
				return nil
			}
		}
		return errors.New("no master yet")
	})
	mc := sc.client(t, master)
	testutil.WaitFor(t, 10*time.Second, "the topic", func() error {
		resp, err := mc.CreateTopic(context.Background(), &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: "ctl", ReadQueueNums: 2, WriteQueueNums: 2}})
		if err != nil {
			return err
		}
		return wire.FromStatus(resp.GetStatus())
	})
	for i := 0; i < 20; i++ {
		if err := send(context.Background(), mc, "ctl", int32(i%2), fmt.Sprint("m", i)); err != nil {
			t.Fatalf("sync send %d: %v", i, err)
		}
	}
	waitCaughtUp(t, master, slave)
	sameLog(t, master.Store().CommitLog(), slave.Store().CommitLog())

	failures := ns.Guard().Failures()
	bad := startBroker(t, replica(3, auth.Credentials{AccessKey: sc.admin.AccessKey, SecretKey: "not-the-secret"}))
	testutil.WaitFor(t, 10*time.Second, "the controller's refusal", func() error {
		if ns.Guard().Failures() == failures {
			return errors.New("nothing refused yet")
		}
		return nil
	})
	time.Sleep(time.Second) // ten beats
	if info := bad.Replication().Info(); info.MasterHAAddr != "" || info.State == ha.StateReplicating || bad.Store().CommitLog().MaxOffset() != 0 {
		t.Fatalf("a replica refused by the controller follows a master: %+v", info)
	}
	if st := master.Replication().Info().Controller; slices.Contains(st.SyncStateSet, 3) {
		t.Fatalf("refused replica in the sync state set: %+v", st)
	}
}

// TestHACertificateRenewalAndClientCertificates: the HA listener serves
// the broker's certificate files and asks for client certificates as its
// TLS options say: a slave presenting the broker's certificate (signed by
// the client CA) replicates, a TLS client without one is refused, and a
// certificate renewed on disk is what new HA connections get, without a
// restart.
func TestHACertificateRenewalAndClientCertificates(t *testing.T) {
	sc := newSecureCluster(t)
	dir := t.TempDir()
	pair := sc.ca.Server(t, dir, "master", "master")
	mtls := func(o *broker.Options) {
		o.TLS.CertFile, o.TLS.KeyFile = pair.CertFile, pair.KeyFile
		o.TLS.ClientAuth = tlsconf.ClientCertRequire
		o.TLS.ClientCAFile = sc.ca.File
	}
	master := startBroker(t, haOpts(broker.ReplicationAsync), sc.enforcing(sc.admin), mtls)
	mc := sc.client(t, master)
	createTopic(t, mc, "renew", 1)
	for i := 0; i < 10; i++ {
		if err := send(context.Background(), mc, "renew", 0, fmt.Sprint("m", i)); err != nil {
			t.Fatal(err)
		}
	}
	slave := startBroker(t, haOpts(broker.ReplicationAsync), sc.enforcing(sc.admin), slaveOf(master, 1))
	waitCaughtUp(t, master, slave)

	serial := func(cfg *tls.Config) (string, error) {
		conn, err := tls.Dial("tcp", master.HAServerAddr(), cfg)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		// TLS 1.3: a refused client certificate shows at the first read.
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		hello, _ := ha.AppendHello(nil, ha.Hello{Version: ha.Version1, BrokerName: "x", BrokerID: 9, LastStart: -1})
		if _, err := conn.Write(hello); err != nil {
			return "", err
		}
		if _, err := ha.ReadFrame(bufio.NewReader(conn), 1, nil); err != nil {
			return "", err
		}
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}
	withCert := &tls.Config{RootCAs: sc.ca.Pool, ServerName: "localhost", Certificates: []tls.Certificate{sc.pair.Cert}}
	before, err := serial(withCert)
	if err != nil {
		t.Fatalf("a client with a certificate: %v", err)
	}
	if _, err := serial(&tls.Config{RootCAs: sc.ca.Pool, ServerName: "localhost"}); err == nil {
		t.Fatal("a TLS client without a certificate was served")
	}

	sc.ca.Server(t, dir, "master", "master") // renewed in place
	testutil.WaitFor(t, 10*time.Second, "the renewed certificate", func() error {
		after, err := serial(withCert)
		if err != nil {
			return err
		}
		if after == before {
			return fmt.Errorf("still serial %s", after)
		}
		return nil
	})
	// The slave reconnects, and verifies the renewed certificate.
	master.Replication().Server().DropSlaves()
	if err := send(context.Background(), mc, "renew", 0, "after"); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, master, slave)
}

// TestPermissiveHAServesTLSAndPlainSlaves: in the default TLS mode
// (permissive) the HA port serves a slave dialling with TLS and one in
// plain text side by side, with ACL off and no credentials (as before
// the HA link could be secured).
func TestPermissiveHAServesTLSAndPlainSlaves(t *testing.T) {
	master := startBroker(t, haOpts(broker.ReplicationAsync))
	mc := plainClient(t, master)
	createTopic(t, mc, "mixed", 1)
	for i := 0; i < 10; i++ {
		if err := send(context.Background(), mc, "mixed", 0, fmt.Sprint("m", i)); err != nil {
			t.Fatal(err)
		}
	}
	tlsSlave := startBroker(t, haOpts(broker.ReplicationAsync), slaveOf(master, 1), func(o *broker.Options) { o.TLS.Dial = true })
	plainSlave := startBroker(t, haOpts(broker.ReplicationAsync), slaveOf(master, 2))
	waitCaughtUp(t, master, tlsSlave)
	waitCaughtUp(t, master, plainSlave)
	testutil.WaitFor(t, 5*time.Second, "two slaves on the master", func() error {
		if n := len(master.Replication().Server().Slaves()); n != 2 {
			return fmt.Errorf("%d slaves", n)
		}
		return nil
	})
}

// plainClient is a plaintext bolide.v1 client without credentials.
func plainClient(t *testing.T, b *server.Server) pb.BrokerClient {
	t.Helper()
	conn, err := remote.Dial(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewBrokerClient(conn)
}
