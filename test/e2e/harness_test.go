//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/freeport"
)

// cluster is a local cluster started by scripts/cluster-up.sh, and the
// way to run bin/bolide against it.
type cluster struct {
	t       *testing.T
	root    string // repository root
	bin     string // directory of the binaries
	dir     string // CLUSTER_DIR
	namesrv string // "127.0.0.1:p1;127.0.0.1:p2"
	nsAddrs []string
	cliEnv  []string // for bin/bolide: TLS and credentials (security.cliEnv)
}

// result is one finished bolide run.
type result struct {
	args   []string
	code   int
	stdout string
	stderr string
	took   time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("bolide %s: exit %d after %v\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code,
		r.took.Round(time.Millisecond), truncate(r.stdout, 2000), truncate(r.stderr, 2000))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// cleanEnv is the environment without BOLIDE_* settings (the daemons and
// the CLI read them) plus extra.
func cleanEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BOLIDE_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// freePort returns a port that is free, for TCP and UDP (memberlist binds
// both), together with port+off for each offset (the derived gossip
// ports), none handed out before (freeport.Pick).
func freePort(t *testing.T, offsets ...int) int {
	t.Helper()
	p, err := freeport.Pick(offsets...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startCluster runs scripts/cluster-up.sh with two NameServers and two
// broker groups on free ports, secured as the environment asks
// (suiteSecurity); cleanup runs scripts/cluster-down.sh, checks that every
// daemon exited 0, and kills whatever is left.
func startCluster(t *testing.T) *cluster {
	base := e2eDir(t)
	return startClusterWith(t, base, "cluster", 2, suiteSecurity(t, base))
}

// e2eDir is BOLIDE_E2E_DIR, else a test temp dir.
func e2eDir(t *testing.T) string {
	if dir := os.Getenv("BOLIDE_E2E_DIR"); dir != "" {
		return dir
	}
	return t.TempDir()
}

// startClusterWith runs scripts/cluster-up.sh with nameServers (1 or 2)
// NameServers and two broker groups in base/name, secured by sec.
func startClusterWith(t *testing.T, base, name string, nameServers int, sec *security) *cluster {
	root := repoRoot()
	bin := os.Getenv("BOLIDE_BIN")
	if bin == "" {
		bin = filepath.Join(root, "bin")
	}
	for _, b := range []string{"bolide", "bolide-nameserver", "bolide-broker"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%s: %v (run 'make e2e', or 'make build' first)", filepath.Join(bin, b), err)
		}
	}
	// A port found free may still be taken (by another process picking
	// one) before the daemon binds it: then cluster-up stops what it
	// started and the cluster is tried again on other ports, in a fresh
	// directory.
	for attempt := 0; ; attempt++ {
		dir := filepath.Join(base, name)
		if attempt > 0 {
			dir = filepath.Join(base, fmt.Sprintf("%s-retry%d", name, attempt))
		}
		c, out, err := upOnce(t, root, bin, dir, nameServers, sec)
		if err == nil {
			return c
		}
		if attempt < 5 && strings.Contains(out, "address already in use") {
			t.Logf("cluster-up (%v): a port was taken meanwhile, trying other ports:\n%s", sec, out)
			continue
		}
		t.Fatalf("cluster-up (%v): %v\n%s", sec, err, out)
	}
}

// upOnce runs cluster-up once on fresh ports in dir. On success the
// cluster is stopped when the test ends.
func upOnce(t *testing.T, root, bin, dir string, nameServers int, sec *security) (*cluster, string, error) {
	var nsPorts []string
	c := &cluster{t: t, root: root, bin: bin, dir: dir, cliEnv: sec.cliEnv()}
	for range nameServers {
		p := freePort(t, 1)
		nsPorts = append(nsPorts, fmt.Sprint(p))
		c.nsAddrs = append(c.nsAddrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	ba, bb := freePort(t, 3), freePort(t, 3)
	c.namesrv = strings.Join(c.nsAddrs, ";")
	scriptEnv := cleanEnv(append([]string{"CLUSTER_DIR=" + dir, "NAMESRV_PORTS=" + strings.Join(nsPorts, " "),
		fmt.Sprintf("BROKER_A_PORT=%d", ba), fmt.Sprintf("BROKER_B_PORT=%d", bb),
		"SEGMENT_SIZE=16777216", "BIN=" + bin, "UP_TIMEOUT=60", "STOP_TIMEOUT=40"}, sec.scriptEnv()...)...)

	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "scripts", "cluster-up.sh"))
	cmd.Env = scriptEnv
	out, err := cmd.CombinedOutput()
	if err != nil {
		killLeftovers(t, dir)
		return nil, string(out), err
	}
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(root, "scripts", "cluster-down.sh"))
		cmd.Env = scriptEnv
		out, err := cmd.CombinedOutput()
		t.Logf("cluster-down:\n%s", out)
		if err != nil {
			t.Errorf("cluster-down: %v (not every daemon exited 0)", err)
		}
		killLeftovers(t, dir)
	})
	t.Logf("cluster-up (%v) in %v:\n%s", sec, time.Since(start).Round(time.Millisecond), out)
	return c, string(out), nil
}

// killLeftovers SIGKILLs any daemon whose pid file is still there.
func killLeftovers(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("%s (pid %d) still running after cluster-down: killed", filepath.Base(f), pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (c *cluster) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "bolide"), args...)
	cmd.Env = cleanEnv(append([]string{"BOLIDE_NAMESRV=" + c.namesrv}, c.cliEnv...)...)
	// If the test binary dies (go test -timeout), its bolide processes die
	// with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// run runs bolide to the end (at most two minutes) with stdin.
func (c *cluster) runIn(stdin string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		c.t.Fatalf("bolide %s: %v", strings.Join(args, " "), err)
	}
	if isJSON(args) {
		checkJSONLines(c.t, r)
	}
	return r
}

func (c *cluster) run(args ...string) result {
	c.t.Helper()
	return c.runIn("", args...)
}

// ok runs bolide and fails the test unless it exits 0 with nothing on
// stderr (table output may print a summary line there).
func (c *cluster) ok(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("unexpected failure: %v", r)
	}
	if isJSON(args) && r.stderr != "" {
		c.t.Fatalf("stderr with -o json: %v", r)
	}
	return r
}

// okJSON runs bolide -o json and returns its lines, decoded.
func (c *cluster) okJSON(args ...string) []map[string]any {
	c.t.Helper()
	return decodeLines(c.t, c.ok(append(args, "-o", "json")...).stdout)
}

func isJSON(args []string) bool {
	for i, a := range args {
		if a == "-ojson" || a == "--output=json" || a == "-o=json" || (a == "-o" || a == "--output") && i+1 < len(args) && args[i+1] == "json" {
			return true
		}
	}
	return false
}

// checkJSONLines checks the -o json contract: every line of stdout is one
// JSON object.
func checkJSONLines(t *testing.T, r result) {
	t.Helper()
	if r.stdout == "" {
		return
	}
	if !strings.HasSuffix(r.stdout, "\n") {
		t.Errorf("-o json output does not end with a newline: %v", r)
	}
	for i, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("-o json: line %d is not a JSON object (%v): %q\n%v", i+1, err, truncate(line, 300), r)
		}
	}
}

func decodeLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var res []map[string]any
	if out == "" {
		return nil
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		res = append(res, m)
	}
	return res
}

// checkFails checks the failure contract: exit code, nothing on stdout,
// one line "bolide: ..." on stderr containing want.
func checkFails(t *testing.T, r result, code int, want string) {
	t.Helper()
	if r.code != code || r.stdout != "" || !strings.HasPrefix(r.stderr, "bolide: ") ||
		strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("want exit %d, empty stdout and one line \"bolide: ...%s...\" on stderr; got %v", code, want, r)
	}
}

// lockedBuffer is a bytes.Buffer a running process writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// background is a bolide command running in the background.
type background struct {
	args   []string
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan struct{}
	code   int
}

// start starts bolide in the background; cleanup kills it if still
// running.
func (c *cluster) start(args ...string) *background {
	c.t.Helper()
	b := &background{args: args, done: make(chan struct{})}
	b.cmd = c.command(context.Background(), args...)
	b.cmd.Stdout, b.cmd.Stderr = &b.stdout, &b.stderr
	if err := b.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		err := b.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			b.code = ee.ExitCode()
		} else if err != nil {
			b.code = -1
		}
		close(b.done)
	}()
	c.t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// stop sends SIGINT (Ctrl-C) and waits for the exit.
func (b *background) stop(t *testing.T) result {
	t.Helper()
	_ = b.cmd.Process.Signal(os.Interrupt)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
		t.Fatalf("bolide %s did not stop within 30s of SIGINT", strings.Join(b.args, " "))
	}
	return result{args: b.args, code: b.code, stdout: b.stdout.String(), stderr: b.stderr.String()}
}

var assignedRE = regexp.MustCompile(`(?m)^bolide: assigned (\d+) queues: ?(.*)$`)

// assignment is the last assignment a consume -v reported.
func (b *background) assignment() []string {
	ms := assignedRE.FindAllStringSubmatch(b.stderr.String(), -1)
	if len(ms) == 0 {
		return nil
	}
	return strings.Fields(ms[len(ms)-1][2])
}

func str(m map[string]any, k string) string {
	v, _ := m[k].(string)
	return v
}

func num(t *testing.T, m map[string]any, k string) int64 {
	t.Helper()
	n, ok := m[k].(json.Number)
	if !ok {
		t.Fatalf("field %q of %v is not a number", k, m)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("field %q of %v: %v", k, m, err)
	}
	return i
}

func strs(m map[string]any, k string) []string {
	var out []string
	l, _ := m[k].([]any)
	for _, v := range l {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}
