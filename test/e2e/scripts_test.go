//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/testutil"
)

// localSegmentSize is the CommitLog segment size the local scripts give
// brokers, instead of the broker's 1 GiB default.
const localSegmentSize = 64 << 20

func binDir(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("BOLIDE_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot(), "bin")
	}
	for _, b := range []string{"bolide", "bolide-nameserver", "bolide-broker"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%s: %v (run 'make e2e', or 'make build' first)", filepath.Join(bin, b), err)
		}
	}
	return bin
}

// runScript is scripts/run.sh (what `make run` starts) running in the
// background.
type runScript struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// startRunScript starts scripts/run.sh with data under dataDir and the
// extra environment, and waits until it says Bolide is running.
func startRunScript(t *testing.T, dataDir string, env ...string) *runScript {
	t.Helper()
	bin := binDir(t)
	r := &runScript{out: &lockedBuffer{}, exited: make(chan struct{})}
	r.cmd = exec.Command(filepath.Join(repoRoot(), "scripts", "run.sh"))
	r.cmd.Env = cleanEnv(append([]string{"BIN=" + bin, "DATA_DIR=" + dataDir}, env...)...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-r.exited:
			case <-time.After(60 * time.Second):
				t.Errorf("run.sh still running 60s after SIGTERM: killed")
				_ = r.cmd.Process.Kill()
			}
		}
		killDaemonsOf(t, dataDir)
		if t.Failed() {
			t.Logf("run.sh output:\n%s", r.out.String())
		}
	})
	testutil.WaitFor(t, 60*time.Second, "run.sh to start both daemons", func() error {
		select {
		case <-r.exited:
			t.Fatalf("run.sh exited: %v\n%s", r.err, r.out.String())
		default:
		}
		if !strings.Contains(r.out.String(), "run: Bolide is running") {
			return errors.New("not running yet")
		}
		return nil
	})
	return r
}

// stop sends SIGTERM (Ctrl-C) and wants run.sh to stop both daemons and
// exit 0.
func (r *runScript) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("run.sh still running 60s after SIGTERM")
	}
	if r.err != nil {
		t.Fatalf("run.sh: %v\n%s", r.err, r.out.String())
	}
}

// killDaemonsOf SIGKILLs any process whose command line names dir (a test
// temp dir: only daemons this test started), reporting it as an error.
func killDaemonsOf(t *testing.T, dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		t.Errorf("pid %d (%s) still running: killed", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestRunScript: `make run` (scripts/run.sh) on ports of its own, with
// small segments, and no warning on a fresh store.
func TestRunScript(t *testing.T) {
	nsPort, brokerPort := freePort(t, 1, 2), freePort(t, 1, 2, 3)
	data := t.TempDir()
	r := startRunScript(t, data, fmt.Sprintf("NAMESRV_PORT=%d", nsPort), fmt.Sprintf("BROKER_PORT=%d", brokerPort))
	namesrv := fmt.Sprintf("127.0.0.1:%d", nsPort)
	if got := readTrim(t, filepath.Join(data, "run", "namesrv.addr")); got != namesrv {
		t.Errorf("NameServer on %s, want %s", got, namesrv)
	}
	if got, want := readTrim(t, filepath.Join(data, "run", "broker.addr")), fmt.Sprintf("127.0.0.1:%d", brokerPort); got != want {
		t.Errorf("broker on %s, want %s", got, want)
	}

	c := &cluster{t: t, bin: binDir(t), namesrv: namesrv}
	c.ok("topic", "create", "run-demo", "--queues", "2")
	c.ok("send", "--topic", "run-demo", "hello")
	seg := filepath.Join(data, "broker-a", "store", "commitlog", "00000000000000000000")
	st, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != localSegmentSize {
		t.Errorf("segment of %d bytes, want %d", st.Size(), localSegmentSize)
	}
	r.stop(t)
	out := r.out.String()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "\tWARN\t") || strings.Contains(l, "\tERROR\t") {
			t.Errorf("a fresh run logs: %s", l)
		}
	}
	if !strings.Contains(out, "new store") {
		t.Errorf("no \"new store\" line:\n%s", out)
	}

	// Started again on that store, the message is still there.
	r = startRunScript(t, data, fmt.Sprintf("NAMESRV_PORT=%d", nsPort), fmt.Sprintf("BROKER_PORT=%d", brokerPort))
	if got := c.ok("consume", "--topic", "run-demo", "--group", "g", "--timeout", "5s"); !strings.Contains(got.stdout, "hello") {
		t.Errorf("after a restart: %v", got)
	}
	r.stop(t)
}

// TestRunScriptKeepsSegmentSize: a store made with other segments (an
// older `make run` used 1 GiB ones) keeps them: the broker cannot open it
// with another size.
func TestRunScriptKeepsSegmentSize(t *testing.T) {
	nsPort, brokerPort := freePort(t, 1, 2), freePort(t, 1, 2, 3)
	data := t.TempDir()
	const older = 128 << 20
	dir := filepath.Join(data, "broker-a", "store", "commitlog")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "00000000000000000000"), older); err != nil {
		t.Fatal(err)
	}
	r := startRunScript(t, data, fmt.Sprintf("NAMESRV_PORT=%d", nsPort), fmt.Sprintf("BROKER_PORT=%d", brokerPort))
	r.stop(t)
	if want := fmt.Sprintf(`"segmentSize": %d`, older); !strings.Contains(r.out.String(), want) {
		t.Errorf("the broker did not open the store with %s", want)
	}
}

// TestClusterUpSegmentSize: scripts/cluster-up.sh gives its brokers the
// local segment size too (secured as the suite is: suiteSecurity).
func TestClusterUpSegmentSize(t *testing.T) {
	bin := binDir(t)
	ns, ba, bb := freePort(t, 1, 2), freePort(t, 1, 2, 3), freePort(t, 1, 2, 3)
	base := t.TempDir()
	dir := filepath.Join(base, "cluster")
	env := cleanEnv(append([]string{"CLUSTER_DIR=" + dir, fmt.Sprintf("NAMESRV_PORTS=%d", ns), fmt.Sprintf("BROKER_A_PORT=%d", ba),
		fmt.Sprintf("BROKER_B_PORT=%d", bb), "BIN=" + bin, "UP_TIMEOUT=60", "STOP_TIMEOUT=40"},
		suiteSecurity(t, base).scriptEnv()...)...)
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(repoRoot(), "scripts", "cluster-down.sh"))
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("cluster-down: %v\n%s", err, out)
		}
		killLeftovers(t, dir)
	})
	cmd := exec.Command(filepath.Join(repoRoot(), "scripts", "cluster-up.sh"))
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cluster-up: %v\n%s", err, out)
	}
	for _, b := range []string{"broker-a", "broker-b"} {
		log := readTrim(t, filepath.Join(dir, b+".log"))
		if want := fmt.Sprintf(`"segmentSize": %d`, localSegmentSize); !strings.Contains(log, want) {
			t.Errorf("%s does not log %s", b, want)
		}
	}
}
