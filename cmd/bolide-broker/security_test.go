package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/tlsconf/tlstest"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// The daemon's security flags reach its port and its admin listener:
// with --tls-mode enforcing and --acl a plain-text gRPC client is told to
// use TLS, the admin listener serves HTTPS only, and its /metrics needs an
// admin user's Basic credentials.
func TestBinaryTLSEnforcingAndACL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	brokerBin, _ := buildBinaries(t)
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	srv := ca.Server(t, dir, "broker", "broker.test")
	aclFile := filepath.Join(dir, "plain_acl.yml")
	if err := auth.WriteFile(aclFile, &auth.File{Accounts: []auth.Account{
		{AccessKey: "rootadmin", SecretKey: "rootsecret", Admin: true}}}); err != nil {
		t.Fatal(err)
	}
	br := startProc(t, brokerBin, brokerArgs(dir, freeAddr(t), "--tls-mode", "enforcing", "--tls-cert", srv.CertFile,
		"--tls-key", srv.KeyFile, "--tls-ca", ca.File, "--acl", "--acl-file", aclFile)...)
	adminAddr := readAddr(t, br, filepath.Join(dir, "admin"))
	brAddr := readAddr(t, br, filepath.Join(dir, "addr"))

	// The port: plain text refused with a clear gRPC error.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := pb.NewBrokerClient(dial(t, brAddr)).GetBrokerInfo(ctx, &pb.GetBrokerInfoRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "TLS") {
		t.Fatalf("plain gRPC to an enforcing broker: %v; want FailedPrecondition naming TLS", err)
	}
	cc, err := grpc.NewClient(brAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool, ServerName: "broker.test"})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := pb.NewBrokerClient(cc).GetBrokerInfo(ctx, &pb.GetBrokerInfoRequest{}); status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.Unavailable {
		t.Fatalf("TLS gRPC to an enforcing broker: %v", err)
	}

	// The admin listener: HTTPS only, Basic auth on /metrics.
	if code, body, err := httpGet("http://" + adminAddr + "/healthz"); err != nil || code != http.StatusBadRequest || !strings.Contains(body, "TLS") {
		t.Fatalf("plain HTTP to the admin listener of an enforcing broker: %d %q, %v; want 400 naming TLS", code, body, err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: "broker.test"}, DisableKeepAlives: true}}
	get := func(path, ak, sk string) int {
		req, _ := http.NewRequest(http.MethodGet, "https://"+adminAddr+path, nil)
		if ak != "" {
			req.SetBasicAuth(ak, sk)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if code := get("/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code := get("/metrics", "", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without credentials: %d, want 401", code)
	}
	if code := get("/metrics", "rootadmin", "rootsecret"); code != http.StatusOK {
		t.Errorf("/metrics as the admin: %d, want 200", code)
	}
}
