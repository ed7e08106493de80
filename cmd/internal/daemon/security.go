package daemon

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// secretSettings are never written to the log, only whether they are set.
var secretSettings = map[string]bool{"secret-key": true, "gossip-key": true}

// Security holds the flags both daemons share for access control, TLS and
// gossip encryption (docs/security.md).
type Security struct {
	acl              bool
	aclFile          string
	maxSkew          time.Duration
	allowRemoteAdmin bool
	accessKey        string
	secretKey        string
	tlsMode          string
	tlsClientCA      string
	tlsClientAuth    string
	tlsDial          bool
	tlsCA            string
	tlsServerName    string
	gossipKey        string
	gossipKeyFile    string
}

// Register adds the flags to fs. aclFileDefault is the daemon's default
// ACL file.
func (s *Security) Register(fs *pflag.FlagSet, aclFileDefault string) {
	fs.BoolVar(&s.acl, "acl", false, "authenticate and authorize every request on every protocol with the users of --acl-file (off: administrative requests are accepted from loopback only)")
	fs.StringVar(&s.aclFile, "acl-file", aclFileDefault, "users and permissions, RocketMQ's plain_acl.yml format, reloaded when it changes (bolide acl manages it)")
	fs.DurationVar(&s.maxSkew, "auth-max-skew", auth.DefaultMaxSkew, "how far a signed date (RocketMQ 5 and bolide gRPC credentials) may be from this clock; 0 turns the check off")
	fs.BoolVar(&s.allowRemoteAdmin, "allow-remote-admin", false, "with --acl off, accept administrative requests from any address, not only loopback")
	fs.StringVar(&s.accessKey, "access-key", "", "access key this daemon signs its calls to other daemons with (an admin user of theirs when their ACL is on)")
	fs.StringVar(&s.secretKey, "secret-key", "", "secret key of --access-key")
	CheckedStringVar(fs, &s.tlsMode, "tls-mode", "permissive", "TLS on every listener (client port, HA, admin HTTP): off, permissive (TLS and plain text on one port) or enforcing (TLS only)", checkTLSMode)
	fs.StringVar(&s.tlsClientCA, "tls-client-ca", "", "PEM CA bundle that signs client certificates")
	CheckedStringVar(fs, &s.tlsClientAuth, "tls-client-auth", "none", "client certificates: none, optional (verified when presented) or require (needs --tls-client-ca)", checkTLSClientAuth)
	fs.BoolVar(&s.tlsDial, "tls-dial", false, "use TLS for this daemon's own connections to other daemons (always on with --tls-mode enforcing)")
	fs.StringVar(&s.tlsCA, "tls-ca", "", "PEM CA bundle to verify the daemons this one dials (default: not verified, as RocketMQ's clients)")
	fs.StringVar(&s.tlsServerName, "tls-server-name", "", "name verified in the certificates of the daemons dialled (default: their host)")
	fs.StringVar(&s.gossipKey, "gossip-key", "", "base64 AES key (16, 24 or 32 bytes) that encrypts and authenticates gossip; every member needs the same")
	fs.StringVar(&s.gossipKeyFile, "gossip-key-file", "", "file holding --gossip-key")
}

func checkTLSMode(v string) error {
	_, err := tlsconf.ParseMode(v)
	return err
}

func checkTLSClientAuth(v string) error {
	_, err := tlsconf.ParseClientAuth(v)
	return err
}

// Applied is what the security flags resolve to.
type Applied struct {
	Auth        auth.Config
	Credentials auth.Credentials
	TLS         tlsconf.Config // CertFile and KeyFile are the caller's
	GossipKey   []byte
}

// Apply checks the flags and resolves them.
func (s *Security) Apply() (Applied, error) {
	var a Applied
	a.Auth = auth.Config{Enabled: s.acl, File: s.aclFile, MaxSkew: s.maxSkew, AllowRemoteAdmin: s.allowRemoteAdmin}
	if s.acl && s.aclFile == "" {
		return a, fmt.Errorf("acl: --acl-file is required (create one with bolide acl init)")
	}
	if s.maxSkew < 0 {
		return a, fmt.Errorf("auth-max-skew must be >= 0, not %v", s.maxSkew)
	}
	if (s.accessKey == "") != (s.secretKey == "") {
		return a, fmt.Errorf("access-key and secret-key go together: set both or neither")
	}
	a.Credentials = auth.Credentials{AccessKey: s.accessKey, SecretKey: s.secretKey}
	var err error
	if a.TLS.Mode, err = tlsconf.ParseMode(s.tlsMode); err != nil {
		return a, err
	}
	if a.TLS.ClientAuth, err = tlsconf.ParseClientAuth(s.tlsClientAuth); err != nil {
		return a, err
	}
	if a.TLS.ClientAuth == tlsconf.ClientCertRequire && s.tlsClientCA == "" {
		return a, fmt.Errorf("tls-client-auth require needs --tls-client-ca")
	}
	if a.TLS.Mode == tlsconf.Off && a.TLS.ClientAuth != tlsconf.ClientCertNone {
		return a, fmt.Errorf("tls-client-auth %s needs TLS: --tls-mode is off", a.TLS.ClientAuth)
	}
	a.TLS.ClientCAFile = s.tlsClientCA
	a.TLS.Dial = s.tlsDial || a.TLS.Mode == tlsconf.Enforcing
	a.TLS.CAFile = s.tlsCA
	a.TLS.ServerName = s.tlsServerName
	key := s.gossipKey
	if s.gossipKeyFile != "" {
		if key != "" {
			return a, fmt.Errorf("gossip-key and gossip-key-file: set one")
		}
		raw, err := os.ReadFile(s.gossipKeyFile)
		if err != nil {
			return a, fmt.Errorf("gossip-key-file: %w", err)
		}
		key = strings.TrimSpace(string(raw))
	}
	if key != "" {
		if a.GossipKey, err = base64.StdEncoding.DecodeString(key); err != nil {
			return a, fmt.Errorf("gossip-key: not base64: %w", err)
		}
		if n := len(a.GossipKey); n != 16 && n != 24 && n != 32 {
			return a, fmt.Errorf("gossip-key: %d bytes; want 16, 24 or 32", n)
		}
	}
	return a, nil
}

// Announce logs, once at start, what the security settings leave open.
func (a Applied) Announce(lg *zap.Logger) {
	switch {
	case !a.Auth.Enabled && a.Auth.AllowRemoteAdmin:
		lg.Warn("ACL is off and --allow-remote-admin is set: anyone who reaches this daemon may administer it")
	case !a.Auth.Enabled:
		lg.Info("ACL is off: administrative requests are accepted from loopback only; data requests from anyone (turn on --acl to require credentials)")
	case a.TLS.Mode != tlsconf.Enforcing:
		lg.Warn("ACL is on over plain text: credentials travel unencrypted and signed headers can be replayed within their window; use --tls-mode enforcing", zap.String("tls_mode", a.TLS.Mode.String()))
	default:
		lg.Info("ACL is on, TLS enforcing", zap.String("acl_file", a.Auth.File))
	}
	if a.TLS.Dial && a.TLS.CAFile == "" {
		lg.Warn("TLS to other daemons without --tls-ca: their certificates are not verified")
	}
	if len(a.GossipKey) == 0 {
		lg.Info("gossip is not encrypted (set --gossip-key)")
	}
}
