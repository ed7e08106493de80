package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/admin"
	"github.com/bolide-mq/bolide/internal/membership"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/internal/tlsconf/plaintext"
)

// AdminAuto is the default of --admin-listen: loopback, on the daemon's
// listen port + 2 (port 0 when the daemon listens on port 0), so several
// daemons on one host need no extra flags.
const AdminAuto = "auto"

// AdminFlagHelp is the help text of --admin-listen.
const AdminFlagHelp = `admin HTTP address (metrics, /healthz, /readyz, pprof): "auto" is 127.0.0.1 on the listen port + 2, "" or "off" disables`

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
}

// StartAdmin binds and serves the admin listener at addr (from
// ResolveAdminAddr; "" does nothing) with the build info, the Go and
// process metrics, the gossip port's bad packets, the refused TLS
// connections and c, answering /readyz with ready, under sec, and writes
// the bound address to addrFile if set. A derived address that cannot be
// bound is logged and skipped (the port may belong to a neighbour); an
// explicit one is an error.
func StartAdmin(addr string, derived bool, addrFile string, c prometheus.Collector, ready func() error, sec AdminSecurity, lg *zap.Logger) (*Admin, error) {
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
	var handler http.Handler = admin.Handler(admin.Options{Gatherer: reg, Ready: ready})
	if sec.Auth.Enabled {
		guard, err := auth.New(sec.Auth, lg.Named("auth"))
		if err != nil {
			return nil, fmt.Errorf("admin listener: %w", err)
		}
		handler = basicAuth(guard, handler)
	}
	var src *tlsconf.Source
	if sec.TLS.Mode != tlsconf.Off {
		if src, err = tlsconf.Open(sec.TLS, lg.Named("tls")); err != nil {
			return nil, fmt.Errorf("admin listener: %w", err)
		}
	}
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		if derived {
			lg.Warn("admin listener off: its derived address is taken; set --admin-listen", zap.Error(err))
			return nil, nil
		}
		return nil, fmt.Errorf("admin: listen %s: %w", addr, err)
	}
	a := &Admin{
		lis: tlsconf.ListenRefusing(raw, sec.TLS, src, lg, plaintext.HTTP), log: lg, done: make(chan struct{}), addrFile: addrFile,
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
// (the same verification, whitelist and audit as every protocol's).
func basicAuth(g *auth.Guard, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
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
	if a.addrFile != "" {
		if rerr := RemoveAddrFile(a.addrFile); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
