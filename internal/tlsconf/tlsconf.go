package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// CheckInterval is how often, at most, configured files are looked at for
// a renewal.
const CheckInterval = time.Second

// Source yields the certificate a TLS handshake presents.
type Source struct {
	log      *zap.Logger
	certFile string
	keyFile  string
	// interval is CheckInterval (tests shorten it).
	interval time.Duration
	// config is ServerConfig's, one for all connections (session tickets
	// resume across them).
	config *tls.Config

	mu        sync.Mutex
	cert      *tls.Certificate
	certInfo  os.FileInfo // of the files cert was loaded from
	keyInfo   os.FileInfo
	lastCheck time.Time

	// clients is the client-certificate side (Open), nil without one.
	clients *clientCAs
}

// New returns the source of certFile and keyFile, loaded now, or with both
// empty the process's self-signed certificate. One of the two without the
// other is an error.
func New(certFile, keyFile string, log *zap.Logger) (*Source, error) {
	if log == nil {
		log = zap.NewNop()
	}
	return newSource(certFile, keyFile, log, nil)
}

func newSource(certFile, keyFile string, log *zap.Logger, cas *clientCAs) (*Source, error) {
	switch {
	case certFile == "" && keyFile == "":
		cert, err := selfSigned()
		if err != nil {
			return nil, err
		}
		// Info, not a warning: this is the out-of-the-box state (plain text
		// is served on the same port), as Apache's proxy in its test mode.
		log.Info("no TLS certificate configured: serving a self-signed one (test mode; clients must not verify it)",
			zap.Strings("names", cert.Leaf.DNSNames), zap.Time("not_after", cert.Leaf.NotAfter))
		s := &Source{log: log, cert: cert, clients: cas}
		s.config = s.newConfig()
		return s, nil
	case certFile == "" || keyFile == "":
		return nil, errors.New("tls: a certificate file and a key file go together: set both or neither")
	}
	s := &Source{log: log, certFile: certFile, keyFile: keyFile, interval: CheckInterval, clients: cas}
	ci, ki, err := stat(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cert, err := load(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	s.cert, s.certInfo, s.keyInfo, s.lastCheck = cert, ci, ki, time.Now()
	s.config = s.newConfig()
	log.Info("TLS certificate loaded", zap.String("cert", certFile), zap.String("key", keyFile),
		zap.Strings("names", cert.Leaf.DNSNames), zap.Time("not_after", cert.Leaf.NotAfter))
	return s, nil
}

// SelfSigned reports whether the source serves the self-signed certificate.
func (s *Source) SelfSigned() bool { return s.certFile == "" }

// Certificate is the certificate the next handshake presents, reloaded
// first when the files changed.
func (s *Source) Certificate() *tls.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.certFile != "" && time.Since(s.lastCheck) >= s.interval {
		s.lastCheck = time.Now()
		s.reloadLocked()
	}
	return s.cert
}

// reloadLocked loads the files again when they changed since the last load.
func (s *Source) reloadLocked() {
	ci, ki, err := stat(s.certFile, s.keyFile)
	if err != nil {
		s.log.Warn("TLS certificate files unreadable: keeping the loaded certificate", zap.Error(err))
		return
	}
	if fsutil.Unchanged(ci, s.certInfo) && fsutil.Unchanged(ki, s.keyInfo) {
		return
	}
	cert, err := load(s.certFile, s.keyFile)
	if err != nil {
		s.log.Warn("TLS certificate files changed but do not load: keeping the previous certificate", zap.Error(err))
		return
	}
	s.cert, s.certInfo, s.keyInfo = cert, ci, ki
	s.log.Info("TLS certificate reloaded", zap.String("cert", s.certFile),
		zap.Strings("names", cert.Leaf.DNSNames), zap.Time("not_after", cert.Leaf.NotAfter))
}

// ServerConfig is the server configuration presenting the source's current
// certificate; it must not be modified. It offers HTTP/2 by ALPN, which
// gRPC clients require, and HTTP/1.1 (the admin listener's HTTPS clients
// that do not speak HTTP/2); a client that offers no ALPN (remoting,
// frames, HA) is served all the same.
func (s *Source) ServerConfig() *tls.Config { return s.config }

func (s *Source) newConfig() *tls.Config {
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.Certificate(), nil
		},
	}
	if s.clients != nil {
		c.ClientAuth = s.clients.auth
		c.ClientCAs = s.clients.pool
		s.clients.base = c.Clone()
		// The CA bundle may change: each handshake takes the
		// configuration built from the bundle last loaded. Session ticket
		// keys stay c's (crypto/tls uses the original Config's keys when
		// the returned one sets none).
		c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.clients.current(), nil
		}
	}
	return c
}

func stat(certFile, keyFile string) (os.FileInfo, os.FileInfo, error) {
	ci, err := os.Stat(certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: certificate: %w", err)
	}
	ki, err := os.Stat(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: key: %w", err)
	}
	return ci, ki, nil
}

func load(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load %s and %s: %w", certFile, keyFile, err)
	}
	if cert.Leaf == nil { // GODEBUG=x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: parse %s: %w", certFile, err)
		}
	}
	return &cert, nil
}

var (
	selfOnce sync.Once
	selfCert *tls.Certificate
	selfErr  error
)

// selfSigned makes the process's self-signed certificate once.
func selfSigned() (*tls.Certificate, error) {
	selfOnce.Do(func() { selfCert, selfErr = makeSelfSigned(time.Now()) })
	return selfCert, selfErr
}

func makeSelfSigned(now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tls: self-signed key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("tls: self-signed serial: %w", err)
	}
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		names = append(names, h)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "bolide self-signed", Organization: []string{"Bolide"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              names,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("tls: self-signed certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("tls: self-signed certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
