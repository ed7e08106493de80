package portmux

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
)

// testSource is a port's TLS configuration: a certificate for localhost
// and 127.0.0.1 signed by a test CA (tlstest, which imports nothing of the
// project; tlsconf itself imports this package).
type testSource struct {
	cfg   *tls.Config
	roots *x509.CertPool // the CA
}

func newTestSource(t *testing.T) *testSource {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "portmux")
	pair := ca.Server(t, dir, "port", "localhost")
	return &testSource{
		cfg:   &tls.Config{Certificates: []tls.Certificate{pair.Cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12},
		roots: ca.Pool,
	}
}

func (s *testSource) ServerConfig() *tls.Config { return s.cfg }
