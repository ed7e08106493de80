package nameserver

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/controller"
	"github.com/bolide-mq/bolide/internal/freeport"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
)

// isControllerLeader reads s's bolide_controller_leader gauge.
func isControllerLeader(s *Server) (bool, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Controller().Collector()); err != nil {
		return false, err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return false, err
	}
	for _, mf := range mfs {
		if mf.GetName() == "bolide_controller_leader" {
			return mf.GetMetric()[0].GetGauge().GetValue() == 1, nil
		}
	}
	return false, nil
}

// Three NameServers with embedded controllers, TLS enforcing (verified
// certificates, client certificates required) and ACL on: their Raft
// transports take the NameServers' TLS, guard and credentials, so the
// controllers elect a leader; with a wrong secret in two of them, none is
// elected (the transports refuse each other).
func TestControllerRaftTLSAndACL(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ns")
	pair := ca.Server(t, dir, "ns", "localhost")
	acl := filepath.Join(dir, "plain_acl.yml")
	if err := auth.WriteFile(acl, &auth.File{Accounts: []auth.Account{
		{AccessKey: "nsadmin", SecretKey: "ns-secret", Admin: true},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		secrets []string
		leader  bool
	}{
		{"right keys", []string{"ns-secret", "ns-secret", "ns-secret"}, true},
		{"wrong secret on two", []string{"ns-secret", "wrong", "wrong"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var peers []controller.Peer
			for i := range 3 {
				addr, err := freeport.Addr()
				if err != nil {
					t.Fatal(err)
				}
				peers = append(peers, controller.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: addr})
			}
			var servers []*Server
			for i := range 3 {
				servers = append(servers, startServer(t, func(o *Options) {
					o.GossipAddr = GossipOff
					o.TLSCertFile, o.TLSKeyFile = pair.CertFile, pair.KeyFile
					o.TLS = tlsconf.Config{
						Mode: tlsconf.Enforcing, ClientCAFile: ca.File, ClientAuth: tlsconf.ClientCertRequire,
						Dial: true, CAFile: ca.File,
					}
					o.Auth = auth.Config{Enabled: true, File: acl, MaxSkew: time.Minute}
					o.Credentials = auth.Credentials{AccessKey: "nsadmin", SecretKey: c.secrets[i]}
					co := testControllerOptions(t)
					co.ID, co.RaftListen, co.Peers = peers[i].ID, peers[i].RaftAddr, peers
					co.InMemory, co.Dir = true, ""
					o.Controller = co
				}))
			}
			leaders := func() (int, error) {
				n := 0
				for _, s := range servers {
					is, err := isControllerLeader(s)
					if err != nil {
						return 0, err
					}
					if is {
						n++
					}
				}
				return n, nil
			}
			if c.leader {
				waitFor(t, 10*time.Second, "a controller leader", func() error {
					if n, err := leaders(); err != nil || n != 1 {
						return fmt.Errorf("%d leaders, %v", n, err)
					}
					return nil
				})
				return
			}
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) {
				if n, err := leaders(); err != nil || n != 0 {
					t.Fatalf("%d leaders (%v) among controllers that cannot authenticate each other", n, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
