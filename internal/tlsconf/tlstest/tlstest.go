// Package tlstest makes certificates for tests: a CA, and server and
// client certificates it signs, written as PEM files the daemons' flags
// (--tls-cert, --tls-key, --tls-ca, --tls-client-ca) take; and it makes a
// remoting call over TLS or plain text, for the tests of a port's TLS
// modes.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/remoting"
)

var serial atomic.Int64

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate as a PEM file (for --tls-ca,
	// --tls-client-ca).
	File string
	// Pool holds the CA certificate.
	Pool *x509.CertPool
}

// NewCA makes a CA named cn and writes its certificate to a file in dir.
func NewCA(t testing.TB, dir, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, key: key, File: filepath.Join(dir, cn+"-ca.crt"), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	Replace(t, ca.File, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Pair is a certificate and its key, in memory and as PEM files.
type Pair struct {
	Cert              tls.Certificate
	CertFile, KeyFile string
}

// Server issues a server certificate for cn valid for localhost,
// 127.0.0.1 and ::1, written to dir/<name>.crt and .key (replaced
// atomically, as renewal tools do).
func (ca *CA) Server(t testing.TB, dir, name, cn string) Pair {
	t.Helper()
	return ca.issue(t, dir, name, cn, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate for cn.
func (ca *CA) Client(t testing.TB, dir, name, cn string) Pair {
	t.Helper()
	return ca.issue(t, dir, name, cn, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(t testing.TB, dir, name, cn string, usage x509.ExtKeyUsage) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Both usages: a daemon's certificate serves its listeners and
		// is presented when it dials another daemon asking for one.
		ExtKeyUsage: []x509.ExtKeyUsage{usage, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{cn, "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	p := Pair{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	Replace(t, p.CertFile, certPEM)
	Replace(t, p.KeyFile, keyPEM)
	if p.Cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return p
}

// Replace writes data to path through a temporary file and a rename.
func Replace(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// RemotingOpaque is the request id (opaque) of RemotingCall's request,
// which an answer, even a refusal, carries back.
const RemotingOpaque = 4242

// RemotingCall sends one RocketMQ remoting request of code to addr, over
// TLS with cfg or in plain text when cfg is nil, and returns the answer.
func RemotingCall(t testing.TB, addr string, cfg *tls.Config, code int32) (*remoting.Command, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	var nc net.Conn
	var err error
	if cfg != nil {
		nc, err = tls.DialWithDialer(d, "tcp", addr, cfg)
	} else {
		nc, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	req := remoting.NewRequest(code, nil, nil)
	req.Opaque = RemotingOpaque
	if _, err := nc.Write(remoting.AppendFrame(nil, req)); err != nil {
		return nil, err
	}
	raw, err := remoting.ReadFrame(nc, 0, nil)
	if err != nil {
		return nil, err
	}
	return remoting.DecodeFrame(raw)
}
