package auth

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/fsutil"
)

// DefaultMaxSkew is how far a signed date may be from the server's clock.
const DefaultMaxSkew = 15 * time.Minute

// ReplayGrace is how long after its first use a signed header may still
// be used by other connections: clients sign every call, so two honest
// connections carry the same header only when they sign within the same
// second. Later, a header seen on a new connection is a replay.
const ReplayGrace = 5 * time.Second

// reloadCheck is how often, at most, the file is looked at for a change.
const reloadCheck = time.Second

// Config is a daemon's access control.
type Config struct {
	// Enabled turns authentication and authorization on for every
	// protocol (--acl).
	Enabled bool
	// File is the ACL file (--acl-file): RocketMQ's plain_acl.yml format,
	// reloaded when it changes. Required when Enabled; without Enabled it is
	// still what the Acl service manages.
	File string
	// MaxSkew bounds the distance of a signed date from the clock; 0 turns
	// the check off (the replay check stays).
	MaxSkew time.Duration
	// AllowRemoteAdmin accepts administrative requests from any address
	// while ACL is off; otherwise only loopback callers may make them.
	AllowRemoteAdmin bool
}

// Principal is an authenticated caller.
type Principal struct {
	AccessKey string
	Admin     bool
}

// Guard authenticates and authorizes requests. A nil *Guard is a guard
// with ACL off and remote administration allowed: every method may be
// called on it.
type Guard struct {
	cfg Config
	log *zap.Logger

	table     atomic.Pointer[Table]
	lastCheck atomic.Int64 // unix nanos of the last look at the file
	stat      atomic.Pointer[fileStat]
	writeMu   sync.Mutex // serialises PutUser/DeleteUser

	replay replayCache
	audit  auditLog

	failures atomic.Uint64 // authentication failures
	denials  atomic.Uint64 // authorization failures
}

type fileStat struct {
	info os.FileInfo
}

// New returns the guard of cfg: with Enabled the file must load.
func New(cfg Config, log *zap.Logger) (*Guard, error) {
	if log == nil {
		log = zap.NewNop()
	}
	g := &Guard{cfg: cfg, log: log}
	g.replay.init()
	g.audit.log = log
	g.audit.w.Every = auditEvery
	if cfg.Enabled && cfg.File == "" {
		return nil, errors.New("auth: ACL is on but no ACL file is set (--acl-file)")
	}
	if cfg.File == "" {
		g.table.Store(&Table{users: map[string]*User{}})
		return g, nil
	}
	info, err := os.Stat(cfg.File)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist) && !cfg.Enabled:
		g.table.Store(&Table{users: map[string]*User{}})
		return g, nil
	default:
		return nil, fmt.Errorf("auth: ACL file: %w", err)
	}
	t, err := loadTable(cfg.File)
	if err != nil {
		return nil, err
	}
	for _, w := range t.Warnings {
		log.Warn("ACL file: "+w, zap.String("file", cfg.File))
	}
	g.table.Store(t)
	g.stat.Store(&fileStat{info: info})
	g.lastCheck.Store(time.Now().UnixNano())
	log.Info("ACL file loaded", zap.String("file", cfg.File), zap.Int("users", t.Len()), zap.Bool("enabled", cfg.Enabled))
	return g, nil
}

func loadTable(path string) (*Table, error) {
	f, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return f.Compile()
}

// Enabled reports whether ACL is on.
func (g *Guard) Enabled() bool { return g != nil && g.cfg.Enabled }

// Config is the guard's configuration.
func (g *Guard) Config() Config {
	if g == nil {
		return Config{AllowRemoteAdmin: true}
	}
	return g.cfg
}

// Failures and Denials count refused authentications and authorizations.
func (g *Guard) Failures() uint64 {
	if g == nil {
		return 0
	}
	return g.failures.Load()
}

// Denials counts refused authorizations.
func (g *Guard) Denials() uint64 {
	if g == nil {
		return 0
	}
	return g.denials.Load()
}

// current is the table, reloaded first when the file changed (looked at
// no more than once a second, by one caller at a time).
func (g *Guard) current() *Table {
	now := time.Now().UnixNano()
	last := g.lastCheck.Load()
	if g.cfg.File != "" && now-last >= int64(reloadCheck) && g.lastCheck.CompareAndSwap(last, now) {
		g.reload()
	}
	return g.table.Load()
}

func (g *Guard) reload() {
	info, err := os.Stat(g.cfg.File)
	if err != nil {
		if prev := g.stat.Load(); prev != nil {
			g.log.Warn("ACL file unreadable: keeping the loaded users", zap.String("file", g.cfg.File), zap.Error(err))
			g.stat.Store(nil)
		}
		return
	}
	if prev := g.stat.Load(); prev != nil && fsutil.Unchanged(prev.info, info) {
		return
	}
	t, err := loadTable(g.cfg.File)
	g.stat.Store(&fileStat{info: info})
	if err != nil {
		g.log.Error("ACL file changed but does not load: keeping the previous users", zap.String("file", g.cfg.File), zap.Error(err))
		return
	}
	for _, w := range t.Warnings {
		g.log.Warn("ACL file: "+w, zap.String("file", g.cfg.File))
	}
	g.table.Store(t)
	g.log.Info("ACL file reloaded", zap.String("file", g.cfg.File), zap.Int("users", t.Len()))
}

// Remoting authenticates a RocketMQ remoting request by its ACL 1.0
// signature (extFields AccessKey, Signature and optionally SecurityToken).
// With ACL off it returns nil, nil. lang is the request's language code
// name ("GO", "JAVA"): rocketmq-client-go leaves SecurityToken out of what
// it signs, so for it the signature is tried without the token too.
func (g *Guard) Remoting(peer string, ext map[string]string, body []byte, lang string) (*Principal, error) {
	if !g.Enabled() {
		return nil, nil
	}
	ak := ext[FieldAccessKey]
	if ak == "" {
		return nil, g.fail(peer, "", "no credentials: this server requires an access key and a signature (ACL is on)")
	}
	u, err := g.user(peer, ak)
	if err != nil {
		return nil, err
	}
	// Only the canonical encoding: the decoder skips line breaks, and
	// RocketMQ compares the encoded strings, so another spelling of the
	// right bytes is refused there too.
	sig, err := base64.StdEncoding.DecodeString(ext[FieldSignature])
	if err != nil || len(sig) == 0 || base64.StdEncoding.EncodeToString(sig) != ext[FieldSignature] {
		return nil, g.fail(peer, ak, "the request carries no valid Signature")
	}
	ok := hmac.Equal(sig, mac(u.secret, RemotingContent(ext, body)))
	if !ok && ext[FieldSecurityToken] != "" && lang == "GO" {
		ok = hmac.Equal(sig, mac(u.secret, RemotingContent(ext, body, FieldSecurityToken)))
	}
	if !ok {
		return nil, g.fail(peer, ak, "signature check failed for access key "+ak)
	}
	return &Principal{AccessKey: ak, Admin: u.Admin}, nil
}

// Header authenticates a call by its authorization and x-mq-date-time
// values (RocketMQ 5's gRPC protocol; bolide.v1's gRPC and frames). With
// ACL off it returns nil, nil. An empty authorization is no credentials.
func (g *Guard) Header(peer, authorization, date string) (*Principal, error) {
	if !g.Enabled() {
		return nil, nil
	}
	if authorization == "" {
		return nil, g.fail(peer, "", "no credentials: this server requires an authorization header (ACL is on)")
	}
	a, err := ParseAuthorization(authorization)
	if err != nil {
		return nil, g.fail(peer, "", err.Error())
	}
	u, err := g.user(peer, a.AccessKey)
	if err != nil {
		return nil, err
	}
	if date == "" {
		return nil, g.fail(peer, a.AccessKey, "no "+HeaderDate+" header")
	}
	if !hmac.Equal(a.Signature, mac(u.secret, []byte(date))) {
		return nil, g.fail(peer, a.AccessKey, "signature check failed for access key "+a.AccessKey)
	}
	now := time.Now()
	if g.cfg.MaxSkew > 0 {
		t, err := ParseDate(date)
		if err != nil {
			return nil, g.fail(peer, a.AccessKey, err.Error())
		}
		if d := now.Sub(t); d > g.cfg.MaxSkew || d < -g.cfg.MaxSkew {
			return nil, g.fail(peer, a.AccessKey, fmt.Sprintf("%s %s is %s from the server's clock (at most %s): expired, or the client's clock is wrong",
				HeaderDate, date, d.Round(time.Second), g.cfg.MaxSkew))
		}
	}
	if !g.replay.admit(a.AccessKey, a.Signature, peer, now, g.replayWindow()) {
		return nil, g.fail(peer, a.AccessKey, "replayed credentials: this signed "+HeaderDate+" was first used by another connection")
	}
	return &Principal{AccessKey: a.AccessKey, Admin: u.Admin}, nil
}

func (g *Guard) replayWindow() time.Duration {
	w := g.cfg.MaxSkew
	if w <= 0 || w < DefaultMaxSkew {
		w = DefaultMaxSkew
	}
	return 2*w + time.Minute
}

// user is the user of ak, usable from peer.
func (g *Guard) user(peer, ak string) (*User, error) {
	u, ok := g.current().Lookup(ak)
	if !ok {
		return nil, g.fail(peer, ak, "unknown access key "+ak)
	}
	if u.white != nil && !u.white.match(peer) {
		return nil, g.fail(peer, ak, "access key "+ak+" may not be used from "+PeerIP(peer))
	}
	return u, nil
}

func (g *Guard) fail(peer, ak, msg string) error {
	g.failures.Add(1)
	g.audit.note("authentication failed", peer, ak, msg)
	return errcode.Errorf(errcode.Unauthenticated, "%s", msg)
}

// Authorize checks that p holds every need. With ACL off it allows all;
// with it on a nil principal is refused. An admin holds every permission.
func (g *Guard) Authorize(p *Principal, peer string, needs ...Need) error {
	if !g.Enabled() {
		return nil
	}
	if p == nil {
		return g.fail(peer, "", "no credentials: this server requires an access key (ACL is on)")
	}
	if p.Admin {
		return nil
	}
	u, ok := g.current().Lookup(p.AccessKey)
	if !ok {
		return g.fail(peer, p.AccessKey, "unknown access key "+p.AccessKey)
	}
	for _, n := range needs {
		if !permits(n.Perm, u.Perm(n.Kind, n.Name)) {
			return g.deny(peer, p.AccessKey, "access key "+p.AccessKey+" may not "+n.String())
		}
	}
	return nil
}

// Admin checks an administrative request (topic and group changes, offset
// resets, promotions, ACL management): with ACL on p must be an admin;
// with it off the caller must be on loopback unless AllowRemoteAdmin.
// what names the operation in the error.
func (g *Guard) Admin(p *Principal, peer, what string) error {
	if !g.Enabled() {
		if g == nil || g.cfg.AllowRemoteAdmin || IsLoopback(peer) {
			return nil
		}
		return g.deny(peer, "", fmt.Sprintf("%s is administrative: while ACL is off it is accepted only from loopback, not from %s (turn ACL on with an admin user, or start the daemon with --allow-remote-admin)", what, PeerIP(peer)))
	}
	if p == nil {
		return g.fail(peer, "", "no credentials: "+what+" needs an admin user (ACL is on)")
	}
	if !p.Admin {
		return g.deny(peer, p.AccessKey, "access key "+p.AccessKey+" is not an admin: "+what+" needs one")
	}
	if _, ok := g.current().Lookup(p.AccessKey); !ok {
		return g.fail(peer, p.AccessKey, "unknown access key "+p.AccessKey)
	}
	return nil
}

// Internal checks a call between daemons (registration, heartbeats to
// the controller, replication, metadata): with ACL on it needs an admin
// user (the daemons' --access-key); with it off anyone may make it.
func (g *Guard) Internal(p *Principal, peer, what string) error {
	if !g.Enabled() {
		return nil
	}
	return g.Admin(p, peer, what)
}

// Authenticated checks that p is known when ACL is on (reads that need
// no particular permission: routes, cluster and broker status).
func (g *Guard) Authenticated(p *Principal, peer string) error {
	if !g.Enabled() || p != nil {
		return nil
	}
	return g.fail(peer, "", "no credentials: this server requires an access key (ACL is on)")
}

func (g *Guard) deny(peer, ak, msg string) error {
	if g != nil {
		g.denials.Add(1)
		g.audit.note("permission denied", peer, ak, msg)
	}
	return errcode.Errorf(errcode.NoPermission, "%s", msg)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext is the principal ctx carries, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
