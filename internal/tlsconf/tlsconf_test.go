package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writePair writes a fresh self-signed certificate for cn and its key as
// PEM files, each replaced atomically (temp file, rename) as renewal tools do.
func writePair(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	replace(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	replace(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	return certFile, keyFile
}

func replace(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// serve accepts TLS connections with src's configuration until the test
// ends; each completes its handshake and is closed.
func serve(t *testing.T, src *Source) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", src.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
			_ = nc.(*tls.Conn).Handshake()
			_, _ = io.Copy(io.Discard, nc)
			_ = nc.Close()
		}
	}()
	t.Cleanup(func() { _ = lis.Close(); wg.Wait() })
	return lis.Addr().String()
}

// peerName dials addr and returns the common name the server presented.
func peerName(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func TestReloadPicksUpARenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writePair(t, dir, "first.example")
	src, err := New(certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	src.interval = 0 // look at the files on every handshake
	if src.SelfSigned() {
		t.Fatal("configured files reported as self-signed")
	}
	addr := serve(t, src)
	insecure := &tls.Config{InsecureSkipVerify: true}
	if got := peerName(t, addr, insecure); got != "first.example" {
		t.Fatalf("presented %q, want first.example", got)
	}

	writePair(t, dir, "second.example")
	if got := peerName(t, addr, insecure); got != "second.example" {
		t.Fatalf("after renewal presented %q, want second.example", got)
	}

	// A broken renewal keeps the previous certificate.
	replace(t, keyFile, []byte("not a key"))
	if got := peerName(t, addr, insecure); got != "second.example" {
		t.Fatalf("after a broken renewal presented %q, want second.example", got)
	}
	// ... until the pair is whole again.
	writePair(t, dir, "third.example")
	if got := peerName(t, addr, insecure); got != "third.example" {
		t.Fatalf("after the fix presented %q, want third.example", got)
	}
}

func TestSelfSignedWhenNothingIsConfigured(t *testing.T) {
	a, err := New("", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New("", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !a.SelfSigned() || a.Certificate() != b.Certificate() {
		t.Fatal("want one self-signed certificate per process")
	}
	// It verifies as itself for localhost and 127.0.0.1.
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificate().Leaf)
	addr := serve(t, a)
	for _, name := range []string{"localhost", "127.0.0.1"} {
		peerName(t, addr, &tls.Config{RootCAs: roots, ServerName: name})
	}
}

func TestHalfAConfigurationIsRefused(t *testing.T) {
	if _, err := New("cert.pem", "", nil); err == nil {
		t.Fatal("a certificate without a key was accepted")
	}
	_, err := New(filepath.Join(t.TempDir(), "missing.crt"), filepath.Join(t.TempDir(), "missing.key"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing files: got %v, want ErrNotExist", err)
	}
}
