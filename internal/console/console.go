package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// Daemon kinds, as /whoami names them.
const (
	NameServer = "nameserver"
	Broker     = "broker"
)

// Defaults of Options.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultMaxClients = 4
)

// Options configure a Console.
type Options struct {
	// Daemon is NameServer or Broker; Name the broker's name or the
	// NameServer's address; Addr the daemon's client listen address;
	// Version the build's version.
	Daemon, Name, Addr, Version string
	// NameServers are the cluster's NameServers: the NameServer's own
	// address, a broker's --namesrv list. A broker without any still
	// serves a console of itself (/whoami, /cluster).
	NameServers []string
	// TLS is the configuration the console dials the cluster with (the
	// daemon's dial side); nil dials in plain text.
	TLS *tls.Config
	// Guard is the daemon's access control. With ACL on (Guard.Enabled)
	// every /console path needs HTTP Basic credentials of a user of its
	// file, and the cluster is called with them.
	Guard *auth.Guard
	// Assets is the browser app (index.html and its files); nil serves
	// the API alone and answers 404 for the pages.
	Assets fs.FS
	// Timeout bounds the cluster calls of one API request (not a
	// streamed replay); 0 is DefaultTimeout.
	Timeout time.Duration
	// MaxClients bounds the SDK clients kept, one per user (least
	// recently used closed first); 0 is DefaultMaxClients.
	MaxClients int
	// AllowRemoteAdmin is the daemon's --allow-remote-admin. With ACL off
	// the console calls the cluster from the daemon's own host, which the
	// cluster's loopback rule for administrative requests lets through;
	// so the console applies that rule to its browser: unless this is set,
	// changes (POST, PUT, DELETE) are accepted only from a loopback
	// address. Reads stay open. With ACL on the cluster checks the user.
	AllowRemoteAdmin bool
}

// Console serves the console's pages and API; it is an http.Handler.
type Console struct {
	opts    Options
	log     *zap.Logger
	mux     *http.ServeMux
	clients *clients
	assets  *assets
}

// New returns the console of opts. It dials nothing: SDK clients are made
// on the first API request that needs one.
func New(opts Options, lg *zap.Logger) (*Console, error) {
	if lg == nil {
		lg = zap.NewNop()
	}
	switch opts.Daemon {
	case NameServer, Broker:
	default:
		return nil, fmt.Errorf("console: daemon kind %q is neither %q nor %q", opts.Daemon, NameServer, Broker)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = DefaultMaxClients
	}
	opts.NameServers = append([]string(nil), opts.NameServers...)
	c := &Console{opts: opts, log: lg, mux: http.NewServeMux()}
	c.clients = newClients(opts.MaxClients, c.newAdmin)
	if opts.Assets != nil {
		c.assets = newAssets(opts.Assets)
	}
	c.routes()
	return c, nil
}

// newAdmin makes the SDK client of a user (zero: ACL off).
func (c *Console) newAdmin(u user) (*client.Admin, error) {
	ns := c.opts.NameServers
	if len(ns) == 0 {
		// A broker without NameServers: the client is used only for calls
		// to the broker's own address.
		ns = []string{c.opts.Addr}
	}
	opts := []client.Option{client.WithNameServers(ns...), client.WithLogger(c.log.Named("sdk")),
		client.WithInstanceName("console")}
	if c.opts.TLS != nil {
		opts = append(opts, client.WithTLS(c.opts.TLS))
	}
	if u.accessKey != "" {
		opts = append(opts, client.WithCredentials(u.accessKey, u.secretKey))
	}
	return client.NewAdmin(opts...)
}

// Close closes the SDK clients; requests still using one close it when
// they end. The console answers 503 afterwards.
func (c *Console) Close() error { return c.clients.close() }

// ServeHTTP serves /, /console/ and /console/api/.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/" || p == "/console":
		http.Redirect(w, r, "/console/", http.StatusFound)
		return
	case !strings.HasPrefix(p, "/console/"):
		http.NotFound(w, r)
		return
	}
	api := strings.HasPrefix(p, apiPrefix)
	u, err := c.authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="bolide console", charset="UTF-8"`)
		if api {
			writeError(w, err)
		} else {
			http.Error(w, err.Error(), http.StatusUnauthorized)
		}
		return
	}
	if api {
		if err := c.checkRemoteAdmin(r); err != nil {
			writeError(w, err)
			return
		}
		c.mux.ServeHTTP(w, r.WithContext(withUser(r.Context(), u)))
		return
	}
	if c.assets == nil {
		http.Error(w, "this build has no console pages (its API is at "+apiPrefix+")", http.StatusNotFound)
		return
	}
	c.assets.serve(w, r)
}

// user is who calls: zero with ACL off.
type user struct{ accessKey, secretKey string }

type userKey struct{}

func withUser(ctx context.Context, u user) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

func userOf(ctx context.Context) user {
	u, _ := ctx.Value(userKey{}).(user)
	return u
}

// authenticate checks the HTTP Basic credentials with ACL on: any user of
// the ACL file may open the console; what they may do is for the cluster
// to decide, as for the CLI. The secret is checked by the guard as a
// header signed with it (the same verification, address whitelist and
// audit as every protocol's).
func (c *Console) authenticate(r *http.Request) (user, error) {
	g := c.opts.Guard
	if !g.Enabled() {
		return user{}, nil
	}
	ak, sk, ok := r.BasicAuth()
	if !ok || ak == "" || sk == "" {
		return user{}, errcode.Errorf(errcode.Unauthenticated,
			"ACL is on: the console needs the access key and secret key of a user (HTTP Basic)")
	}
	authorization, date := auth.NewHeader(auth.Credentials{AccessKey: ak, SecretKey: sk}, time.Now())
	if _, err := g.Header(r.RemoteAddr, authorization, date); err != nil {
		if errcode.Of(err) == errcode.SystemError {
			err = errcode.Errorf(errcode.Unauthenticated, "%v", err)
		}
		return user{}, err
	}
	return user{accessKey: ak, secretKey: sk}, nil
}

// checkRemoteAdmin applies Bolide's rule for administrative requests with
// ACL off to the console's changes: from loopback only, unless
// AllowRemoteAdmin (auth.Guard.Admin). Without it a browser anywhere could
// change the cluster through a console whose admin listener is bound to a
// non-loopback address, since the console itself calls from loopback.
func (c *Console) checkRemoteAdmin(r *http.Request) error {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || c.opts.Guard.Enabled() {
		return nil
	}
	if c.opts.AllowRemoteAdmin || c.opts.Guard != nil && c.opts.Guard.Config().AllowRemoteAdmin || auth.IsLoopback(r.RemoteAddr) {
		return nil
	}
	c.log.Warn("console change refused: ACL is off and the caller is not on loopback",
		zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
	return errcode.Errorf(errcode.NoPermission,
		"console changes are administrative: while ACL is off they are accepted only from loopback, not from %s "+
			"(turn ACL on and log in with an admin user, or start the daemon with --allow-remote-admin)", auth.PeerIP(r.RemoteAddr))
}

// errClosed answers requests after Close.
var errClosed = errcode.Errorf(errcode.ServiceNotAvailable, "the console is closed: the daemon is stopping")

// errNoNameServer answers the cluster-wide views of a broker without
// NameServers.
var errNoNameServer = errcode.Errorf(errcode.ServiceNotAvailable,
	"this broker has no NameServer (--namesrv): its console shows the broker itself only (see /cluster)")

var _ http.Handler = (*Console)(nil)

// isNoController reports a cluster without a failover controller.
func isNoController(err error) bool { return errors.Is(err, client.ErrNoController) }
