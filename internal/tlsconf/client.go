package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// Open returns the source of c's server side: the certificate of
// c.CertFile and c.KeyFile (New) and, when c.ClientAuth asks for client
// certificates, the CA bundle of c.ClientCAFile that verifies them,
// reloaded on change like the certificate. ClientCertRequire without a
// bundle is an error; ClientCertOptional without one verifies against the
// system roots.
func Open(c Config, log *zap.Logger) (*Source, error) {
	if log == nil {
		log = zap.NewNop()
	}
	var cas *clientCAs
	if c.ClientAuth != ClientCertNone {
		if c.ClientAuth == ClientCertRequire && c.ClientCAFile == "" {
			return nil, errors.New("tls: client certificates required but no client CA file (--tls-client-ca)")
		}
		cas = &clientCAs{log: log, file: c.ClientCAFile, interval: CheckInterval, auth: tls.VerifyClientCertIfGiven}
		if c.ClientAuth == ClientCertRequire {
			cas.auth = tls.RequireAndVerifyClientCert
		}
		if err := cas.load(); err != nil {
			return nil, err
		}
	} else if c.ClientCAFile != "" {
		log.Warn("--tls-client-ca is set but --tls-client-auth is none: client certificates are not asked for")
	}
	src, err := newSource(c.CertFile, c.KeyFile, log, cas)
	if err != nil {
		return nil, err
	}
	if cas != nil {
		log.Info("TLS client certificates", zap.String("client_auth", c.ClientAuth.String()), zap.String("client_ca", c.ClientCAFile))
	}
	return src, nil
}

// clientCAs is the CA bundle verifying client certificates, with the
// server configuration built on it.
type clientCAs struct {
	log      *zap.Logger
	file     string // "" : system roots
	interval time.Duration
	auth     tls.ClientAuthType
	base     *tls.Config // the Source's, without GetConfigForClient

	mu        sync.Mutex
	config    *tls.Config
	pool      *x509.CertPool
	info      os.FileInfo
	lastCheck time.Time
}

// load reads the bundle (first load: errors are returned).
func (c *clientCAs) load() error {
	if c.file == "" {
		return nil
	}
	info, err := os.Stat(c.file)
	if err != nil {
		return fmt.Errorf("tls: client CA: %w", err)
	}
	pool, err := readPool(c.file)
	if err != nil {
		return err
	}
	c.pool, c.info, c.lastCheck = pool, info, time.Now()
	return nil
}

// current is the configuration a handshake uses now, after a reload if the
// bundle changed.
func (c *clientCAs) current() *tls.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file != "" && c.config != nil && time.Since(c.lastCheck) >= c.interval {
		c.lastCheck = time.Now()
		c.reloadLocked()
	}
	if c.config == nil {
		c.config = c.build()
	}
	return c.config
}

func (c *clientCAs) reloadLocked() {
	info, err := os.Stat(c.file)
	if err != nil {
		c.log.Warn("TLS client CA file unreadable: keeping the loaded one", zap.Error(err))
		return
	}
	if fsutil.Unchanged(info, c.info) {
		return
	}
	pool, err := readPool(c.file)
	if err != nil {
		c.log.Warn("TLS client CA file changed but does not load: keeping the previous one", zap.Error(err))
		return
	}
	c.pool, c.info = pool, info
	c.config = c.build()
	c.log.Info("TLS client CA reloaded", zap.String("client_ca", c.file))
}

func (c *clientCAs) build() *tls.Config {
	cfg := c.base.Clone()
	cfg.GetConfigForClient = nil
	cfg.ClientAuth = c.auth
	cfg.ClientCAs = c.pool
	return cfg
}

// readPool reads a PEM bundle of CA certificates.
func readPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: CA file %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// ClientConfig is the configuration a daemon dials other daemons with
// (c.Dial): it verifies their certificates against c.CAFile (with
// c.ServerName when set), or without a CA file does not verify them (as
// RocketMQ's clients do; Announce says so at start). It presents the
// daemon's own current certificate from certs when a server asks for one
// (client certificates); certs may be nil.
func ClientConfig(c Config, certs *Source) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pool, err := readPool(c.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	} else {
		cfg.InsecureSkipVerify = true
	}
	if certs != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return certs.Certificate(), nil
		}
	}
	return cfg, nil
}
