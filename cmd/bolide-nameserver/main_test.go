package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/cmd/internal/daemon"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testVersion = "v0.0.0-test"

// buildBinary builds bolide-nameserver into a temporary directory, with
// the version set the way a release build sets it.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bolide-nameserver")
	cmd := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X github.com/bolide-mq/bolide/cmd/internal/daemon.Version="+testVersion, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// cleanEnv is the environment without BOLIDE_* variables.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BOLIDE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// waitFor polls cond until it returns nil or d passes.
var waitFor = testutil.WaitFor

func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)

	t.Run("serves until SIGTERM and exits 0", func(t *testing.T) {
		dir := t.TempDir()
		addrFile := filepath.Join(dir, "addr")
		if err := os.WriteFile(addrFile, []byte("stale\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--log-format", "json")
		cmd.Env = cleanEnv("BOLIDE_NAMESRV_GOSSIP_PROFILE=fast")
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				<-exited
			}
		})

		var addr string
		waitFor(t, 10*time.Second, "address file", func() error {
			b, err := os.ReadFile(addrFile)
			if err != nil {
				return err
			}
			if addr = strings.TrimSpace(string(b)); addr == "stale" || addr == "" {
				return errors.New("stale address file")
			}
			return nil
		})
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := pb.NewNameServerClient(cc).GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
		_ = cc.Close()
		if err != nil || wire.FromStatus(resp.Status) != nil {
			t.Fatalf("GetClusterInfo: %v %v", err, resp.GetStatus())
		}

		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("exit: %v\n%s", err, stderr.String())
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("still running 15s after SIGTERM\n%s", stderr.String())
		}
		if _, err := os.Stat(addrFile); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("address file left behind: %v", err)
		}
		logs := stderr.String()
		for _, want := range []string{`"msg":"bolide-nameserver starting"`, `"gossip-profile":"fast"`, `"gossip-profile":"env"`, `"version":"` + testVersion + `"`} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs lack %s:\n%s", want, logs)
			}
		}
	})

	t.Run("version", func(t *testing.T) {
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), testVersion) {
			t.Fatalf("--version: %v %q", err, out)
		}
	})

	t.Run("bad config exits 2 naming the key", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "ns.yaml")
		if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nbroker-timout: 1m\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			args []string
			env  []string
			want string
		}{
			{[]string{"--config", cfg}, nil, "broker-timout"},
			{[]string{"--listen", "127.0.0.1:0"}, []string{"BOLIDE_NAMESRV_SCAN_INTERVAL=often"}, "BOLIDE_NAMESRV_SCAN_INTERVAL"},
			{[]string{"--listen", "127.0.0.1:0", "--gossip-profile", "wan"}, nil, "gossip_profile"},
		} {
			cmd := exec.Command(bin, c.args...)
			cmd.Env = cleanEnv(c.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitConfig {
				t.Fatalf("%v: exit %v, want %d\n%s", c.args, err, exitConfig, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("%v: output does not name %s:\n%s", c.args, c.want, out)
			}
		}
	})

	t.Run("port in use exits 1", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cmd := exec.Command(bin, "--listen", l.Addr().String(), "--gossip", "off")
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitFailed || !strings.Contains(string(out), "address already in use") {
			t.Fatalf("exit %v, want %d\n%s", err, exitFailed, out)
		}
	})
}

// TestConfigPrecedence resolves the real command's flags in-process:
// flag > BOLIDE_NAMESRV_* env > YAML file > default.
func TestConfigPrecedence(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "BOLIDE_") {
			t.Setenv(k, "")
		}
	}
	cfg := filepath.Join(t.TempDir(), "ns.yaml")
	body := `
listen: 10.0.0.1:9876
gossip: 10.0.0.1:7000
gossip_seeds: [10.0.0.2:7000, 10.0.0.3:7000]
scan-interval: 5s
broker-timeout: 1m
`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BOLIDE_NAMESRV_LISTEN", "10.0.0.9:9876")
	t.Setenv("BOLIDE_NAMESRV_BROKER_TIMEOUT", "90s")
	// The broker's variables, and the names both daemons once shared, are
	// not the NameServer's.
	t.Setenv("BOLIDE_BROKER_SCAN_INTERVAL", "1h")
	t.Setenv("BOLIDE_BROKER_LISTEN", "10.0.0.8:10911")
	t.Setenv("BOLIDE_GOSSIP", "10.0.0.7:7000")

	code := 0
	cmd, f := newCommand(&code)
	if err := cmd.ParseFlags([]string{"--config", cfg, "--listen", "127.0.0.1:19876"}); err != nil {
		t.Fatal(err)
	}
	opts, c, err := loadOptions(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	if opts.ListenAddr != "127.0.0.1:19876" || opts.BrokerTimeout != 90*time.Second || opts.ScanInterval != 5*time.Second ||
		opts.GossipAddr != "10.0.0.1:7000" || !reflect.DeepEqual(opts.GossipSeeds, []string{"10.0.0.2:7000", "10.0.0.3:7000"}) ||
		opts.GossipProfile != "lan" || !opts.Remoting {
		t.Fatalf("options %+v", opts)
	}
	for name, src := range map[string]string{"listen": "flag", "broker-timeout": "env", "scan-interval": "file", "gossip-profile": "default"} {
		if got := c.Source(name); got != src {
			t.Errorf("source of %s: %s, want %s", name, got, src)
		}
	}
	if got, want := c.IgnoredEnv(), []string{"BOLIDE_GOSSIP (use BOLIDE_NAMESRV_GOSSIP)"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ignored %q, want %q", got, want)
	}

	// An invalid value or an unknown key fails, naming it.
	if err := os.WriteFile(cfg, []byte("scan-interval: -1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, f = newCommand(&code)
	_ = cmd.ParseFlags([]string{"--config", cfg})
	if _, _, err := loadOptions(cmd, f); err == nil || !strings.Contains(err.Error(), "scan-interval") {
		t.Fatalf("negative scan interval: %v", err)
	}
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nlisten-addr: 127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, f = newCommand(&code)
	_ = cmd.ParseFlags([]string{"--config", cfg})
	if _, _, err := loadOptions(cmd, f); err == nil || !strings.Contains(err.Error(), `"listen-addr"`) {
		t.Fatalf("unknown key: %v", err)
	}

	// A bad listen address names listen, not the admin listener derived
	// from it.
	cmd, _ = newCommand(&code)
	if err := cmd.ParseFlags([]string{"--listen", "banana"}); err == nil || !strings.Contains(err.Error(), `"--listen"`) ||
		strings.Contains(err.Error(), "admin-listen") {
		t.Fatalf("bad listen: %v", err)
	}
}

func TestRemotingFlag(t *testing.T) {
	code := 0
	t.Setenv("BOLIDE_NAMESRV_REMOTING", "false")
	cmd, f := newCommand(&code)
	if err := cmd.ParseFlags([]string{"--listen", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	opts, _, err := loadOptions(cmd, f)
	if err != nil || opts.Remoting {
		t.Fatalf("BOLIDE_NAMESRV_REMOTING=false: remoting %v, %v", opts.Remoting, err)
	}
	cmd, f = newCommand(&code)
	if err := cmd.ParseFlags([]string{"--listen", "127.0.0.1:0", "--remoting=true"}); err != nil {
		t.Fatal(err)
	}
	if opts, _, err = loadOptions(cmd, f); err != nil || !opts.Remoting {
		t.Fatalf("--remoting=true over the environment: remoting %v, %v", opts.Remoting, err)
	}
}

func TestTLSFlags(t *testing.T) {
	code := 0
	t.Setenv("BOLIDE_NAMESRV_TLS_CERT", "/etc/bolide/tls.crt")
	cmd, f := newCommand(&code)
	if err := cmd.ParseFlags([]string{"--listen", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadOptions(cmd, f); err == nil || !strings.Contains(err.Error(), "tls_cert and tls_key") {
		t.Fatalf("a certificate without a key: %v", err)
	}
	cmd, f = newCommand(&code)
	if err := cmd.ParseFlags([]string{"--listen", "127.0.0.1:0", "--tls-key", "/etc/bolide/tls.key"}); err != nil {
		t.Fatal(err)
	}
	opts, _, err := loadOptions(cmd, f)
	if err != nil || opts.TLSCertFile != "/etc/bolide/tls.crt" || opts.TLSKeyFile != "/etc/bolide/tls.key" {
		t.Fatalf("tls files %q %q, %v", opts.TLSCertFile, opts.TLSKeyFile, err)
	}
}

// TestConfigDoc fails when docs/config.md does not list every setting with
// its default and environment variable; BOLIDE_UPDATE_CONFIG_DOC=1
// rewrites the table.
func TestConfigDoc(t *testing.T) {
	code := 0
	cmd, _ := newCommand(&code)
	table := daemon.BindCommand(cmd, daemon.NameServerEnvPrefix).DocTable()
	err := daemon.SyncDocTable("../../docs/config.md", "bolide-nameserver", table, os.Getenv("BOLIDE_UPDATE_CONFIG_DOC") == "1")
	if err != nil {
		t.Fatalf("%v: run BOLIDE_UPDATE_CONFIG_DOC=1 go test -run TestConfigDoc ./cmd/bolide-nameserver/", err)
	}
}

func TestControllerFlags(t *testing.T) {
	code := 0
	cmd, f := newCommand(&code)
	if err := cmd.ParseFlags([]string{"--listen", "127.0.0.1:19876"}); err != nil {
		t.Fatal(err)
	}
	opts, _, err := loadOptions(cmd, f)
	if err != nil || opts.Controller != nil {
		t.Fatalf("controller off by default: %+v %v", opts.Controller, err)
	}
	dir := t.TempDir()
	cmd, f = newCommand(&code)
	if err := cmd.ParseFlags([]string{"--listen", "127.0.0.1:19876", "--controller", "--controller-id", "n1",
		"--controller-peers", "n0=127.0.0.1:7000,n1=127.0.0.1:7001,n2=127.0.0.1:7002", "--controller-dir", dir,
		"--controller-broker-timeout", "5s", "--lease", "3s", "--unclean-election",
		"--raft-heartbeat", "300ms", "--raft-election-timeout", "400ms"}); err != nil {
		t.Fatal(err)
	}
	opts, _, err = loadOptions(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	co := opts.Controller
	if co == nil || co.ID != "n1" || len(co.Peers) != 3 || co.Peers[1].RaftAddr != "127.0.0.1:7001" || co.Dir != dir ||
		co.BrokerTimeout != 5*time.Second || co.Lease != 3*time.Second || !co.UncleanElection ||
		co.RaftHeartbeat != 300*time.Millisecond || co.RaftElectionTimeout != 400*time.Millisecond || co.RaftListen != "" {
		t.Fatalf("controller options %+v", co)
	}
	for _, bad := range [][]string{
		{"--controller", "--controller-peers", "n0=nope"},
		{"--controller", "--controller-peers", "n1=127.0.0.1:7001", "--controller-dir", dir}, // n0 not among them
		{"--controller", "--lease", "5s", "--controller-dir", dir},                           // lease >= broker timeout
	} {
		cmd, f = newCommand(&code)
		if err := cmd.ParseFlags(append([]string{"--listen", "127.0.0.1:19876"}, bad...)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := loadOptions(cmd, f); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
