package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/cmd/internal/daemon"
	"github.com/bolide-mq/bolide/internal/freeport"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buildBinaries builds bolide-broker and bolide-nameserver into a
// temporary directory.
func buildBinaries(t *testing.T) (broker, nameserver string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), ".", "../bolide-nameserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "bolide-broker"), filepath.Join(dir, "bolide-nameserver")
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

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a daemon running as a child process.
type proc struct {
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{log: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, append(args, "--log-format", "json")...)
	p.cmd.Env = cleanEnv()
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", filepath.Base(bin), p.log.String())
		}
	})
	return p
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// exitCode waits for the process to exit and returns its status.
func (p *proc) exitCode(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		t.Fatalf("still running %v after the signal", d)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// readAddr waits for an address file and returns the address in it.
func readAddr(t *testing.T, p *proc, path string) string {
	t.Helper()
	var addr string
	waitFor(t, 60*time.Second, "address file "+filepath.Base(path), func() error {
		select {
		case <-p.exited:
			t.Fatalf("exited: %v\n%s", p.err, p.log.String())
		default:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		addr = strings.TrimSpace(string(b))
		return nil
	})
	return addr
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitStatus polls url until it answers code.
func waitStatus(t *testing.T, url string, code int) string {
	t.Helper()
	var body string
	waitFor(t, 60*time.Second, url+" = "+strconv.Itoa(code), func() error {
		c, b, err := httpGet(url)
		if err != nil {
			return err
		}
		if body = b; c != code {
			return fmt.Errorf("status %d: %s", c, b)
		}
		return nil
	})
	return body
}

// metric sums the samples of a metric whose labels include want (a
// Prometheus text exposition); ok is false when there are none.
func metric(exposition, name string, want map[string]string) (sum float64, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(exposition))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		match := true
		for k, v := range want {
			if !strings.Contains(line, k+`="`+v+`"`) {
				match = false
			}
		}
		if !match {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		sum += v
		ok = true
	}
	return sum, ok
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func brokerArgs(dir, namesrv string, extra ...string) []string {
	return append([]string{"--listen", "127.0.0.1:0", "--ha-listen", "127.0.0.1:0", "--gossip", "off",
		"--namesrv", namesrv, "--store-dir", filepath.Join(dir, "store"), "--segment-size", "8388608",
		"--register-interval", "100ms", "--auto-create-topic", "--admin-listen", "127.0.0.1:0",
		"--addr-file", filepath.Join(dir, "addr"), "--admin-addr-file", filepath.Join(dir, "admin")}, extra...)
}

func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	brokerBin, nsBin := buildBinaries(t)
	t.Run("metrics, readiness and SIGTERM", func(t *testing.T) { testMetricsReadinessStop(t, brokerBin, nsBin) })
	t.Run("second SIGTERM forces exit", func(t *testing.T) { testSecondSignal(t, brokerBin) })
	t.Run("bad config exits 2 naming the key", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			env  string
			want []string
		}{
			{[]string{"--listen", "127.0.0.1:0"}, "BOLIDE_BROKER_SEGMENT_SIZE=0", []string{"segment-size", "BOLIDE_BROKER_SEGMENT_SIZE"}},
			{[]string{"--admin-listen", "everywhere"}, "", []string{"admin-listen"}},
			{[]string{"--register-timeout", "-1s"}, "", []string{"register-timeout"}},
		} {
			cmd := exec.Command(brokerBin, append(c.args, "--store-dir", t.TempDir())...)
			cmd.Env = cleanEnv(c.env)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitConfig {
				t.Fatalf("%v %s: exit %v, want %d\n%s", c.args, c.env, err, exitConfig, out)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("%v %s: output does not name %s:\n%s", c.args, c.env, w, out)
				}
			}
		}
	})
}

// testMetricsReadinessStop: the broker is not ready while its NameServer
// is unreachable and ready once it registers; sends and pulls move the
// per-topic counters and the latency histogram; SIGTERM during sends
// unregisters, keeps every acknowledged message, flushes and exits 0.
func testMetricsReadinessStop(t *testing.T, brokerBin, nsBin string) {
	dir, nsDir := t.TempDir(), t.TempDir()
	nsAddr := freeAddr(t)
	br := startProc(t, brokerBin, brokerArgs(dir, nsAddr)...)
	brAdmin := "http://" + readAddr(t, br, filepath.Join(dir, "admin"))
	if code, body, err := httpGet(brAdmin + "/readyz"); err != nil || code != http.StatusServiceUnavailable ||
		!strings.Contains(body, "not registered") {
		t.Fatalf("readyz without a NameServer: %d %q %v", code, body, err)
	}
	if code, _, err := httpGet(brAdmin + "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("healthz: %d %v", code, err)
	}

	ns := startProc(t, nsBin, "--listen", nsAddr, "--gossip", "off", "--admin-listen", "127.0.0.1:0",
		"--admin-addr-file", filepath.Join(nsDir, "admin"))
	nsAdmin := "http://" + readAddr(t, ns, filepath.Join(nsDir, "admin"))
	waitStatus(t, nsAdmin+"/readyz", http.StatusOK)
	waitStatus(t, brAdmin+"/readyz", http.StatusOK)

	const topic, group, n = "OpsTopic", "ops-group", 5
	brAddr := readAddr(t, br, filepath.Join(dir, "addr"))
	bc := pb.NewBrokerClient(dial(t, brAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bodyBytes := 0
	for i := range n {
		body := []byte(fmt.Sprintf("hello-%d", i))
		bodyBytes += len(body)
		resp, err := bc.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: topic, Body: body}}})
		if err != nil || wire.FromStatus(resp.Status) != nil {
			t.Fatalf("send: %v %v", err, resp.GetStatus())
		}
	}
	got, offset := 0, int64(0)
	for got < n {
		resp, err := bc.Pull(ctx, &pb.PullRequest{Group: group, Topic: topic, Offset: offset, MaxMessages: 32,
			SuspendTimeoutMs: 2000, CommitOffset: 0})
		if err != nil || wire.FromStatus(resp.Status) != nil {
			t.Fatalf("pull: %v %v", err, resp.GetStatus())
		}
		got += len(resp.Records)
		offset = resp.NextOffset
	}

	_, m, err := httpGet(brAdmin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64 // < 0: at least -want
	}{
		{"rocketmq_messages_in_total", map[string]string{"topic": topic}, n},
		{"rocketmq_throughput_in_total", map[string]string{"topic": topic}, float64(bodyBytes)},
		{"rocketmq_messages_out_total", map[string]string{"topic": topic, "consumer_group": group}, n},
		{"rocketmq_throughput_out_total", map[string]string{"topic": topic, "consumer_group": group}, -float64(bodyBytes)},
		{"rocketmq_rpc_latency_count", map[string]string{"request_code": "send", "response_code": "OK"}, n},
		{"rocketmq_rpc_latency_count", map[string]string{"request_code": "pull", "response_code": "OK"}, -1},
		{"rocketmq_message_size_count", nil, n},
		{"rocketmq_consumer_lag_messages", map[string]string{"topic": topic, "consumer_group": group}, n},
		{"rocketmq_storage_size", nil, -1},
		{"bolide_broker_ready", nil, 1},
		{"bolide_broker_role", map[string]string{"role": "MASTER"}, 1},
		{"bolide_delay_level_pending_messages", map[string]string{"level": "1"}, 0},
		{"rocketmq_half_messages", nil, 0},
		{"go_goroutines", nil, -1},
	} {
		v, ok := metric(m, c.name, c.labels)
		switch {
		case !ok:
			t.Errorf("no %s%v", c.name, c.labels)
		case c.want >= 0 && v != c.want, c.want < 0 && v < -c.want:
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	_, nm, err := httpGet(nsAdmin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := metric(nm, "bolide_nameserver_brokers", map[string]string{"cluster": "DefaultCluster"}); v != 1 {
		t.Errorf("nameserver lists %v brokers\n%s", v, nm)
	}
	if v, _ := metric(nm, "rocketmq_rpc_latency_count", map[string]string{"request_code": "RegisterBroker", "response_code": "OK"}); v < 1 {
		t.Errorf("nameserver counted %v registrations", v)
	}
	if code, _, err := httpGet(brAdmin + "/debug/pprof/"); err != nil || code != http.StatusOK {
		t.Errorf("pprof: %d %v", code, err)
	}

	// A producer keeps sending while the broker stops: every send it got
	// an OK for must survive.
	var acked atomic.Int64
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		for ctx.Err() == nil {
			resp, err := bc.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: topic, Body: []byte("during-stop")}}})
			if err != nil || wire.FromStatus(resp.Status) != nil {
				return // the broker stopped accepting
			}
			acked.Add(1)
		}
	}()
	waitFor(t, 60*time.Second, "sends before the stop", func() error {
		if acked.Load() == 0 {
			return errors.New("none acknowledged yet")
		}
		return nil
	})
	br.signal(t, syscall.SIGTERM)
	if code := br.exitCode(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	<-senderDone
	for _, f := range []string{"addr", "admin"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s file left behind: %v", f, err)
		}
	}
	nc := pb.NewNameServerClient(dial(t, nsAddr))
	ci, err := nc.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
	if err != nil || wire.FromStatus(ci.Status) != nil {
		t.Fatalf("cluster info: %v %v", err, ci.GetStatus())
	}
	if len(ci.Live) != 0 {
		t.Errorf("broker still registered after a clean stop: %v", ci.Live)
	}

	// What was acknowledged is on disk: a restart on the same store finds it.
	br = startProc(t, brokerBin, brokerArgs(dir, nsAddr)...)
	brAddr = readAddr(t, br, filepath.Join(dir, "addr"))
	qo, err := pb.NewBrokerClient(dial(t, brAddr)).GetQueueOffsets(ctx, &pb.GetQueueOffsetsRequest{Topic: topic, QueueId: 0})
	if err != nil || wire.FromStatus(qo.Status) != nil || qo.MaxOffset < n+acked.Load() {
		t.Fatalf("after restart: max offset %d, want at least %d sent + %d acknowledged during the stop; %v %v",
			qo.GetMaxOffset(), n, acked.Load(), err, qo.GetStatus())
	}
	t.Logf("%d sends acknowledged while stopping; %d messages after restart", acked.Load(), qo.MaxOffset)
	if !strings.Contains(br.log.String(), `"cleanShutdown":true`) {
		t.Errorf("the restart did not find a clean shutdown:\n%s", br.log.String())
	}
	br.signal(t, syscall.SIGTERM)
	if code := br.exitCode(t, 60*time.Second); code != 0 {
		t.Fatalf("restarted broker: exit %d", code)
	}
	ns.signal(t, syscall.SIGTERM)
	if code := ns.exitCode(t, 60*time.Second); code != 0 {
		t.Fatalf("nameserver: exit %d", code)
	}
}

// stuckNameServer registers brokers but holds every unregistration until
// released, so a broker's drain cannot finish.
type stuckNameServer struct {
	pb.UnimplementedNameServerServer
	unregistering chan struct{} // closed at the first unregistration
	once          sync.Once
	release       chan struct{}
}

func (s *stuckNameServer) RegisterBroker(context.Context, *pb.RegisterBrokerRequest) (*pb.RegisterBrokerResponse, error) {
	return &pb.RegisterBrokerResponse{Status: wire.OK}, nil
}

func (s *stuckNameServer) UnregisterBroker(ctx context.Context, _ *pb.UnregisterBrokerRequest) (*pb.UnregisterBrokerResponse, error) {
	s.once.Do(func() { close(s.unregistering) })
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return &pb.UnregisterBrokerResponse{Status: wire.OK}, nil
}

// testSecondSignal: a second SIGTERM during a drain exits at once, with a
// non-zero status.
func testSecondSignal(t *testing.T, brokerBin string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &stuckNameServer{unregistering: make(chan struct{}), release: make(chan struct{})}
	srv := grpc.NewServer()
	pb.RegisterNameServerServer(srv, fake)
	served := make(chan struct{})
	go func() { _ = srv.Serve(l); close(served) }()
	t.Cleanup(func() { close(fake.release); srv.Stop(); <-served })

	dir := t.TempDir()
	br := startProc(t, brokerBin, brokerArgs(dir, l.Addr().String(), "--register-timeout", "10m")...)
	waitStatus(t, "http://"+readAddr(t, br, filepath.Join(dir, "admin"))+"/readyz", http.StatusOK)
	br.signal(t, syscall.SIGTERM)
	select {
	case <-fake.unregistering:
	case <-br.exited:
		t.Fatalf("exited before unregistering: %v", br.err)
	case <-time.After(60 * time.Second):
		t.Fatal("no unregistration 60s after SIGTERM")
	}
	br.signal(t, syscall.SIGTERM)
	if code := br.exitCode(t, 60*time.Second); code == 0 {
		t.Fatal("exit 0 after a forced stop")
	}
	if log := br.log.String(); !strings.Contains(log, "second signal") {
		t.Errorf("log does not report the second signal:\n%s", log)
	}
}

// TestConfigValidation: bad values are refused before anything starts,
// naming the key and where the value came from.
func TestConfigValidation(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "BOLIDE_") {
			t.Setenv(k, "")
		}
	}
	cases := []struct {
		name string
		file string
		env  [2]string
		args []string
		want []string
	}{
		{"zero in file", "segment-size: 0\n", [2]string{}, nil, []string{"segment-size", "config file"}},
		{"negative in env", "", [2]string{"BOLIDE_BROKER_REGISTER_INTERVAL", "-1s"}, nil, []string{"register-interval", "BOLIDE_BROKER_REGISTER_INTERVAL"}},
		{"zero flag", "", [2]string{}, []string{"--default-queues", "0"}, []string{"default-queues", "--default-queues"}},
		{"bad admin address", "admin-listen: everywhere\n", [2]string{}, nil, []string{"admin-listen", "everywhere"}},
		{"bad flush mode", "flush: sometimes\n", [2]string{}, nil, []string{"flush", "sometimes"}},
		{"body larger than a segment", "segment-size: 1048576\n", [2]string{}, nil, []string{"max-message-size", "segment-size"}},
		{"unknown key", "admin-listn: off\n", [2]string{}, nil, []string{`"admin-listn"`}},
		{"bad duration", "drain-timeout: soon\n", [2]string{}, nil, []string{`"drain-timeout"`}},
		// A bad listen address is the listen setting's fault, not the
		// admin listener's (derived from it).
		{"bad listen flag", "", [2]string{}, []string{"--listen", "banana"}, []string{`"--listen"`, "banana", "not host:port"}},
		{"bad listen in file", "listen: banana\n", [2]string{}, nil, []string{`key "listen"`, "banana"}},
		{"bad flush flag", "", [2]string{}, []string{"--flush", "banana"}, []string{`"--flush"`, "banana"}},
		{"bad flush in env", "", [2]string{"BOLIDE_BROKER_FLUSH", "banana"}, nil, []string{`BOLIDE_BROKER_FLUSH="banana"`, "flush"}},
		{"bad flush in file", "flush: banana\n", [2]string{}, nil, []string{`key "flush"`, "banana"}},
		{"bad log level in env", "", [2]string{"BOLIDE_BROKER_LOG_LEVEL", "loud"}, nil, []string{`BOLIDE_BROKER_LOG_LEVEL="loud"`, "log-level"}},
		{"one key twice", "broker_name: a\nbroker-name: b\n", [2]string{}, nil, []string{`"broker-name" and "broker_name"`}},
		{"TLS key without certificate", "", [2]string{"BOLIDE_BROKER_TLS_KEY", "/etc/bolide/tls.key"}, nil, []string{"tls-cert", "tls-key"}},
		{"controller mode with broker id 0", "", [2]string{}, []string{"--controller-addr", "127.0.0.1:9876"}, []string{"controller mode", "replica id"}},
		{"controller mode with a master HA address", "", [2]string{}, []string{"--controller-addr", "127.0.0.1:9876", "--broker-id", "2",
			"--master-ha-addr", "127.0.0.1:10912"}, []string{"controller mode", "master HA address"}},
		{"zero controller heartbeat", "", [2]string{}, []string{"--controller-heartbeat", "0s"}, []string{"controller-heartbeat"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			args := append([]string{"--store-dir", t.TempDir()}, c.args...)
			if c.file != "" {
				p := filepath.Join(t.TempDir(), "broker.yaml")
				if err := os.WriteFile(p, []byte(c.file), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", p)
			}
			code := 0
			cmd, f := newCommand(&code)
			err := cmd.ParseFlags(args)
			if err == nil {
				_, _, err = loadOptions(cmd, f)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.HasPrefix(c.name, "bad listen") && strings.Contains(err.Error(), "admin-listen") {
				t.Errorf("error %q blames admin-listen", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}

	// The defaults load, and admin-listen auto derives listen port + 2.
	code := 0
	cmd, f := newCommand(&code)
	if err := cmd.ParseFlags([]string{"--store-dir", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	opts, _, err := loadOptions(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	if addr, derived, err := daemon.ResolveAdminAddr(f.adminListen, opts.ListenAddr); err != nil || !derived || addr != "127.0.0.1:10913" {
		t.Fatalf("admin address %q %v %v", addr, derived, err)
	}
	if !f.v5 || f.tlsCert != "" || f.tlsKey != "" {
		t.Fatalf("defaults: v5 %v, tls-cert %q, tls-key %q; want v5 on, no files", f.v5, f.tlsCert, f.tlsKey)
	}
	if opts.Replication.ControllerMode() || opts.Replication.ControllerHeartbeat != 500*time.Millisecond {
		t.Fatalf("controller defaults: %v every %v", opts.Replication.ControllerAddrs, opts.Replication.ControllerHeartbeat)
	}

	// Controller mode: the addresses, heartbeat and priority reach the
	// options.
	cmd, f = newCommand(&code)
	if err := cmd.ParseFlags([]string{"--store-dir", t.TempDir(), "--broker-id", "3", "--controller-addr", "127.0.0.1:9876, 127.0.0.1:9886;127.0.0.1:9896",
		"--controller-heartbeat", "200ms", "--election-priority", "2"}); err != nil {
		t.Fatal(err)
	}
	if opts, _, err = loadOptions(cmd, f); err != nil {
		t.Fatal(err)
	}
	if r := opts.Replication; len(r.ControllerAddrs) != 3 || r.ControllerAddrs[1] != "127.0.0.1:9886" || r.ControllerHeartbeat != 200*time.Millisecond ||
		r.ElectionPriority != 2 || opts.BrokerID != 3 {
		t.Fatalf("controller options %+v, broker id %d", r, opts.BrokerID)
	}

	// The v5 and TLS settings come from the environment like the others.
	t.Setenv("BOLIDE_BROKER_V5", "false")
	t.Setenv("BOLIDE_BROKER_TLS_CERT", "/etc/bolide/tls.crt")
	t.Setenv("BOLIDE_BROKER_TLS_KEY", "/etc/bolide/tls.key")
	cmd, f = newCommand(&code)
	if err := cmd.ParseFlags([]string{"--store-dir", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadOptions(cmd, f); err != nil {
		t.Fatal(err)
	}
	if f.v5 || f.tlsCert != "/etc/bolide/tls.crt" || f.tlsKey != "/etc/bolide/tls.key" {
		t.Fatalf("from the environment: v5 %v, tls-cert %q, tls-key %q", f.v5, f.tlsCert, f.tlsKey)
	}
}

// TestEnvPrefix: the broker reads BOLIDE_BROKER_*, so the NameServer's
// variables and the names both daemons once shared (BOLIDE_LISTEN) do not
// reach it; the latter are reported.
func TestEnvPrefix(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "BOLIDE_") {
			t.Setenv(k, "")
		}
	}
	t.Setenv("BOLIDE_NAMESRV_LISTEN", "127.0.0.1:19876")
	t.Setenv("BOLIDE_BROKER_LISTEN", "127.0.0.1:20911")
	t.Setenv("BOLIDE_BROKER_NAMESRV", "127.0.0.1:19876")
	t.Setenv("BOLIDE_BROKER_BROKER_NAME", "broker-x")
	t.Setenv("BOLIDE_LISTEN", "127.0.0.1:30911")
	t.Setenv("BOLIDE_FLUSH", "banana")
	t.Setenv("BOLIDE_NAMESRV", "127.0.0.1:9876") // the CLI's: set in the same shell, not reported
	code := 0
	cmd, f := newCommand(&code)
	if err := cmd.ParseFlags([]string{"--store-dir", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	opts, cfg, err := loadOptions(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	if opts.ListenAddr != "127.0.0.1:20911" || opts.BrokerName != "broker-x" ||
		len(opts.NameServers) != 1 || opts.NameServers[0] != "127.0.0.1:19876" {
		t.Fatalf("listen %s, broker %s, name servers %v", opts.ListenAddr, opts.BrokerName, opts.NameServers)
	}
	want := []string{"BOLIDE_FLUSH (use BOLIDE_BROKER_FLUSH)", "BOLIDE_LISTEN (use BOLIDE_BROKER_LISTEN)"}
	if got := cfg.IgnoredEnv(); !slices.Equal(got, want) {
		t.Errorf("ignored %q, want %q", got, want)
	}
}

// TestConfigDoc fails when docs/config.md does not list every setting with
// its default and environment variable; BOLIDE_UPDATE_CONFIG_DOC=1
// rewrites the table.
func TestConfigDoc(t *testing.T) {
	code := 0
	cmd, _ := newCommand(&code)
	table := daemon.BindCommand(cmd, daemon.BrokerEnvPrefix).DocTable()
	err := daemon.SyncDocTable("../../docs/config.md", "bolide-broker", table, os.Getenv("BOLIDE_UPDATE_CONFIG_DOC") == "1")
	if err != nil {
		t.Fatalf("%v: run BOLIDE_UPDATE_CONFIG_DOC=1 go test -run TestConfigDoc ./cmd/bolide-broker/", err)
	}
}
