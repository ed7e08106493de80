package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The process harness runs the real daemons, as a user would, for tests
// that need a real kill -9.

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// repoRoot finds the module root from this source file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Binaries builds bolide-nameserver and bolide-broker once per test binary
// and returns the directory holding them.
func Binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bolide-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/bolide-nameserver", "./cmd/bolide-broker")
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("cluster: %v", buildErr)
	}
	return binDir
}

// Proc is a daemon running as a child process.
type Proc struct {
	t        testing.TB
	name     string
	bin      string
	args     []string
	addrFile string
	cmd      *exec.Cmd
	log      *bytes.Buffer
	done     chan struct{}
	mu       sync.Mutex
	// Addr is the daemon's bound gRPC address.
	Addr string
}

// StartProc starts binary name (bolide-nameserver or bolide-broker) with
// args plus --addr-file, waits until it serves, and stops it (SIGKILL) at
// cleanup if still running.
func StartProc(t testing.TB, name string, args ...string) *Proc {
	t.Helper()
	if name == "bolide-broker" && !slices.Contains(args, "--ha-listen") {
		// The derived HA port (listen port + 1) may belong to another
		// process on a busy machine.
		args = append(append([]string{}, args...), "--ha-listen", "127.0.0.1:0")
	}
	p := &Proc{t: t, name: name, bin: filepath.Join(Binaries(t), name), args: args,
		addrFile: filepath.Join(t.TempDir(), name+".addr")}
	p.start()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.Log())
		}
	})
	return p
}

func (p *Proc) start() {
	p.t.Helper()
	_ = os.Remove(p.addrFile)
	p.log = &bytes.Buffer{}
	cmd := exec.Command(p.bin, append(append([]string{}, p.args...), "--addr-file", p.addrFile, "--log-format", "console")...)
	cmd.Stdout = &lockedWriter{mu: &p.mu, w: p.log}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("cluster: start %s: %v", p.name, err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()
	err := Poll(20*time.Second, func() error {
		select {
		case <-p.done:
			return errors.New("exited")
		default:
		}
		b, err := os.ReadFile(p.addrFile)
		if err != nil || len(b) == 0 {
			return fmt.Errorf("no address yet")
		}
		p.Addr = strings.TrimSpace(string(b))
		return nil
	})
	if err != nil {
		p.t.Fatalf("cluster: %s did not start: %v\n%s", p.name, err, p.Log())
	}
}

// Restart starts the process again with the same arguments.
func (p *Proc) Restart() { p.t.Helper(); p.start() }

// Kill sends SIGKILL and waits for the process to die.
func (p *Proc) Kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to d for a clean exit; it reports the
// exit code (-1 if it had to be killed).
func (p *Proc) Stop(d time.Duration) int {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		p.Kill()
		return -1
	}
}

// Log returns what the process printed.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
