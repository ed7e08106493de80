package daemon

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/console"
	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// Server is what Serve runs: a broker or a NameServer.
type Server interface {
	// Start serves on the address the constructor bound.
	Start() error
	// Shutdown stops, draining in-flight calls until ctx ends.
	Shutdown(ctx context.Context) error
	// Close is Shutdown with the server's own bound on the drain; Serve
	// calls it when the server never got to serve.
	Close() error
	// Addr is the bound address, written to the address file.
	Addr() string
	// Collector is exported on the admin listener's /metrics.
	Collector() prometheus.Collector
	// Ready answers the admin listener's /readyz: nil when ready, else
	// what the server waits for.
	Ready() error
}

// ServeOptions are the daemon flags Serve applies around a Server.
type ServeOptions struct {
	// Name names the server in the log line of a failed construction
	// ("broker"); "server" if empty.
	Name string
	// ListenAddr is the server's --listen; --admin-listen auto derives
	// from it.
	ListenAddr string
	// AddrFile (--addr-file) receives the bound address once serving.
	AddrFile string
	// AdminListen is --admin-listen, as ResolveAdminAddr takes it.
	AdminListen string
	// AdminAddrFile (--admin-addr-file) receives the admin address.
	AdminAddrFile string
	// DrainTimeout (--drain-timeout) bounds the stop; 0 is the default.
	DrainTimeout time.Duration
	// TLS is the daemon's TLS: its mode, certificate and client
	// certificates apply to the admin listener too.
	TLS tlsconf.Config
	// Auth is the daemon's access control: with ACL on the admin
	// listener asks for an admin user's HTTP Basic credentials on every
	// path but /healthz and /readyz.
	Auth auth.Config
	// Console is the console the admin listener serves (--console).
	Console Console
}

// Serve runs a daemon's server until SIGTERM or SIGINT (or ctx ends) and
// returns the exit status, as RunUntilSignal does. It removes a stale
// address file, builds the server with newServer, starts the admin
// listener, then starts the server, writes the address file and releases
// the executable's start-up pages (ReleaseStartPages). Stopping
// shuts the server down within the drain timeout, removes the address file
// and closes the admin listener last, so a drain can be watched on it.
func Serve(ctx context.Context, newServer func() (Server, error), o ServeOptions, lg *zap.Logger) int {
	if lg == nil {
		lg = zap.NewNop()
	}
	name := o.Name
	if name == "" {
		name = "server"
	}
	adminAddr, derived, err := ResolveAdminAddr(o.AdminListen, o.ListenAddr)
	if err != nil {
		lg.Error("admin listener", zap.Error(err))
		return 1
	}
	// Removed before the server is built: building may take long (a store
	// recovers), and a script must not read the old address meanwhile.
	if o.AddrFile != "" {
		if err := RemoveAddrFile(o.AddrFile); err != nil {
			lg.Error("stale address file", zap.Error(err))
			return 1
		}
	}
	srv, err := newServer()
	if err != nil {
		lg.Error(name, zap.Error(err))
		return 1
	}
	// The admin listener comes up before Start, so /readyz can say what
	// the server waits for; it goes down last, so a drain can be watched.
	adm, err := startAdmin(adminAddr, derived, o.AdminAddrFile, srv.Collector(), srv.Ready,
		AdminSecurity{TLS: o.TLS, Auth: o.Auth}, consoleOptions(o.Console, srv.Addr()), lg)
	if err != nil {
		lg.Error("admin listener", zap.Error(err))
		_ = srv.Close()
		return 1
	}
	start := func() error {
		if err := srv.Start(); err != nil {
			_ = srv.Close()
			return err
		}
		if o.AddrFile != "" {
			if err := WriteAddrFile(o.AddrFile, srv.Addr()); err != nil {
				_ = srv.Close()
				return err
			}
		}
		// Serving: what start-up alone ran need not stay resident.
		ReleaseStartPages(lg)
		return nil
	}
	stop := func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		if o.AddrFile != "" {
			if rerr := RemoveAddrFile(o.AddrFile); rerr != nil && err == nil {
				err = rerr
			}
		}
		// A scrape or profile still running when the drain ends is cut
		// off; that does not make the stop unclean.
		if aerr := adm.Close(ctx); aerr != nil {
			lg.Warn("admin listener", zap.Error(aerr))
		}
		return err
	}
	code := RunUntilSignal(ctx, start, stop, lg, WithDrainTimeout(o.DrainTimeout))
	if code != 0 {
		_ = adm.Close(context.Background()) // start failed: stop was not called
	}
	return code
}

// consoleOptions are the console's options for a server bound at addr;
// nil when the console is off.
func consoleOptions(c Console, addr string) *console.Options {
	if !c.Enabled {
		return nil
	}
	co := &console.Options{Daemon: c.Daemon, Name: c.Name, Addr: addr, NameServers: c.NameServers}
	if c.Daemon == console.NameServer {
		co.Name = addr
		co.NameServers = []string{addr}
	}
	return co
}
