package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/admin"
	"github.com/bolide-mq/bolide/internal/console"
	"github.com/bolide-mq/bolide/internal/console/web"
	"github.com/bolide-mq/bolide/internal/membership"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/plaintext"
)

// AdminAuto is the default of --admin-listen: loopback, on the daemon's
// listen port + 2 (port 0 when the daemon listens on port 0), so several
// daemons on one host need no extra flags.
const AdminAuto = "auto"

// AdminFlagHelp is the help text of --admin-listen.
const AdminFlagHelp = `admin HTTP address (console, metrics, /healthz, /readyz, pprof): "auto" is 127.0.0.1 on the listen port + 2, "" or "off" disables`

// ConsoleFlagHelp is the help text of --console.
const ConsoleFlagHelp = "serve the web console (its pages and JSON API under /console/) on the admin listener; false loads nothing of it"

// Console is what the daemon's console shows (ServeOptions.Console).
type Console struct {
	// Enabled is --console.
	Enabled bool
	// Daemon is console.NameServer or console.Broker; Name the broker's
	// name ("" for a NameServer: its address).
	Daemon, Name string
	// NameServers are a broker's --namesrv (a NameServer uses its own
	// address).
	NameServers []string
}

// ResolveAdminAddr turns an --admin-listen value into an address: "" when
// the listener is off; derived reports an address made from listen (auto).
func ResolveAdminAddr(value, listen string) (addr string, derived bool, err error) {
	switch value {
	case "", "off":
		return "", false, nil
	case AdminAuto:
		_, port, err := net.SplitHostPort(listen)
		if err != nil {
			return "", false, fmt.Errorf("admin-listen: derive from listen %q: %w", listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535-2 {
			return "", false, fmt.Errorf("admin-listen: derive from listen %q: bad port", listen)
		}
		if p != 0 {
			p += 2
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), true, nil
	}
	if _, _, err := net.SplitHostPort(value); err != nil {
		return "", false, fmt.Errorf("admin-listen: %q is not host:port, auto or off: %w", value, err)
	}
	return value, false, nil
}

// AdminSecurity is what guards the admin listener: the daemon's TLS
// (its mode applies to the admin port too: tlsconf.Listen) and its access
// control (with ACL on, every path but /healthz and /readyz needs HTTP
// Basic credentials of an admin user: access key and secret key).
type AdminSecurity struct {
	TLS  tlsconf.Config
	Auth auth.Config
}

// Admin is a daemon's running admin listener; a nil *Admin is a listener
// that is off, and its methods do nothing.
type Admin struct {
	lis      net.Listener
	srv      *http.Server
	log      *zap.Logger
	done     chan struct{} // closed when Serve returns
	addrFile string
	console  *console.Console
}

// StartAdmin binds and serves the admin listener at addr (from
// ResolveAdminAddr; "" does nothing) with the build info, the Go and
// process metrics, the gossip port's bad packets, the refused TLS
// connections and c, answering /readyz with ready, under sec, and writes
// the bound address to addrFile if set. A derived address that cannot be
// bound is logged and skipped (the port may belong to a neighbour); an
// explicit one is an error.
func StartAdmin(addr string, derived bool, addrFile string, c prometheus.Collector, ready func() error, sec AdminSecurity, lg *zap.Logger) (*Admin, error) {
	return startAdmin(addr, derived, addrFile, c, ready, sec, nil, lg)
}

// startAdmin is StartAdmin serving the console of co too, when set: its
// Addr is the daemon's bound client address.
func startAdmin(addr string, derived bool, addrFile string, c prometheus.Collector, ready func() error, sec AdminSecurity,
	co *console.Options, lg *zap.Logger) (*Admin, error) {
	if addrFile != "" {
		if err := RemoveAddrFile(addrFile); err != nil {
			return nil, err
		}
	}
	if addr == "" {
		return nil, nil
	}
	lg = lg.Named("admin")
	// A daemon has one gossip node; its bad packets are counted
	// process-wide, as are refused TLS connections.
	reg, err := admin.NewRegistry(Version, c, membership.BadPacketsCollector(), tlsconf.RefusedCollector())
	if err != nil {
		return nil, err
	}
	var guard *auth.Guard
	if sec.Auth.Enabled {
		if guard, err = auth.New(sec.Auth, lg.Named("auth")); err != nil {
			return nil, fmt.Errorf("admin listener: %w", err)
		}
	}
	var src *tlsconf.Source
	if sec.TLS.Mode != tlsconf.Off {
		if src, err = tlsconf.Open(sec.TLS, lg.Named("tls")); err != nil {
			return nil, fmt.Errorf("admin listener: %w", err)
		}
	}
	var cons *console.Console
	opts := admin.Options{Gatherer: reg, Ready: ready}
	if co != nil {
		if cons, err = newConsole(*co, sec, guard, src, lg); err != nil {
			return nil, err
		}
		opts.Rest = cons
	}
	var handler http.Handler = admin.Handler(opts)
	if sec.Auth.Enabled {
		handler = basicAuth(guard, handler, cons != nil)
	}
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		if cons != nil {
			_ = cons.Close()
		}
		if derived {
			lg.Warn("admin listener off: its derived address is taken; set --admin-listen", zap.Error(err))
			return nil, nil
		}
		return nil, fmt.Errorf("admin: listen %s: %w", addr, err)
	}
	a := &Admin{
		lis: tlsconf.ListenRefusing(raw, sec.TLS, src, lg, plaintext.HTTP), log: lg, done: make(chan struct{}), addrFile: addrFile,
		console: cons,
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          zap.NewStdLog(lg.Named("http")),
		},
	}
	go func() {
		defer close(a.done)
		if err := a.srv.Serve(a.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("admin listener stopped", zap.Error(err))
		}
	}()
	lg.Info("admin listener started", zap.String("addr", a.Addr()), zap.String("tls_mode", sec.TLS.Mode.String()),
		zap.Bool("basic_auth", sec.Auth.Enabled))
	if cons != nil {
		scheme := "http"
		if sec.TLS.Mode == tlsconf.Enforcing {
			scheme = "https"
		}
		lg.Info("console at "+scheme+"://"+a.Addr()+"/console/", zap.Bool("login", sec.Auth.Enabled))
	}
	if addrFile != "" {
		if err := WriteAddrFile(addrFile, a.Addr()); err != nil {
			_ = a.Close(context.Background())
			return nil, err
		}
	}
	return a, nil
}

// basicAuth lets through /healthz and /readyz, and every other path only
// for an admin user's HTTP Basic credentials (access key, secret key):
// 401 without valid credentials, 403 for a user who is not an admin. The
// secret is checked by the guard as a signed header made from it here
// (the same verification, whitelist and audit as every protocol's). With
// the console on, its paths (/, /console/...) go through too: the console
// asks for the credentials of any user of the ACL file itself.
func basicAuth(g *auth.Guard, next http.Handler, withConsole bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if path == "/healthz" || path == "/readyz" ||
			withConsole && (path == "/" || path == "/console" || strings.HasPrefix(path, "/console/")) {
			next.ServeHTTP(w, r)
			return
		}
		peer := r.RemoteAddr
		ak, sk, ok := r.BasicAuth()
		if !ok || ak == "" || sk == "" {
			w.Header().Set("WWW-Authenticate", `Basic realm="bolide admin", charset="UTF-8"`)
			http.Error(w, "UNAUTHENTICATED: ACL is on: this path needs the access key and secret key of an admin user (HTTP Basic)", http.StatusUnauthorized)
			return
		}
		authorization, date := auth.NewHeader(auth.Credentials{AccessKey: ak, SecretKey: sk}, time.Now())
		p, err := g.Header(peer, authorization, date)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="bolide admin", charset="UTF-8"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if err := g.Admin(p, peer, "admin HTTP "+r.URL.Path); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Addr is the bound address ("" when off).
func (a *Admin) Addr() string {
	if a == nil {
		return ""
	}
	return a.lis.Addr().String()
}

// Close stops the listener, waiting for requests in flight until ctx ends
// (then cutting them off), and removes the address file. It is idempotent.
func (a *Admin) Close(ctx context.Context) error {
	if a == nil {
		return nil
	}
	var err error
	if serr := a.srv.Shutdown(ctx); serr != nil {
		_ = a.srv.Close()
		err = fmt.Errorf("admin: %w", serr)
	}
	<-a.done
	if a.console != nil {
		if cerr := a.console.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("console: %w", cerr)
		}
	}
	if a.addrFile != "" {
		if rerr := RemoveAddrFile(a.addrFile); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// newConsole builds the console of co: it dials the cluster as the daemon
// does (tlsconf.ClientConfig with the daemon's certificate, when TLS dial
// is on), authenticates with the admin listener's guard and, with ACL off,
// takes changes from a remote browser only with --allow-remote-admin.
func newConsole(co console.Options, sec AdminSecurity, g *auth.Guard, src *tlsconf.Source, lg *zap.Logger) (*console.Console, error) {
	if sec.TLS.Dial {
		cfg, err := tlsconf.ClientConfig(sec.TLS, src)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		co.TLS = cfg
	}
	co.Guard = g
	co.AllowRemoteAdmin = sec.Auth.AllowRemoteAdmin
	if co.Assets == nil {
		co.Assets = web.FS
	}
	if co.Version == "" {
		co.Version = Version
	}
	c, err := console.New(co, lg.Named("console"))
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return c, nil
}
