package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a daemon run as a child process: started, killed, stopped and
// continued by the scenarios. Its output is appended to a log file that
// survives restarts.
type Proc struct {
	Name    string
	bin     string
	args    []string
	LogPath string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	stopped  bool // SIGSTOP sent and no SIGCONT since
	starts   int
	addrFile string
}

func newProc(name, bin, dir string, args ...string) *Proc {
	return &Proc{Name: name, bin: bin, args: args, LogPath: filepath.Join(dir, name+".log"),
		addrFile: filepath.Join(dir, name+".addr")}
}

// Start runs the process and waits up to 20 s until it writes its address
// file (it serves).
func (p *Proc) Start() error {
	p.mu.Lock()
	if p.cmd != nil && !p.exitedLocked() {
		p.mu.Unlock()
		return fmt.Errorf("%s: already running", p.Name)
	}
	_ = os.Remove(p.addrFile)
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.starts++
	fmt.Fprintf(logf, "==== %s start %d at %s\n", p.Name, p.starts, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, append(append([]string{}, p.args...), "--addr-file", p.addrFile, "--log-format", "console")...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		p.mu.Unlock()
		return fmt.Errorf("%s: start: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.stopped = cmd, done, false
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	p.mu.Unlock()

	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited while starting: %s", p.Name, p.Tail(20))
		default:
		}
		if b, err := os.ReadFile(p.addrFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve within 20 s: %s", p.Name, p.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *Proc) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Running reports whether the process is alive (stopped counts as alive).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked()
}

// Pid is the process id (0 when not running).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill sends SIGKILL and waits for the process to die.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	p.mu.Lock()
	p.stopped = false
	p.mu.Unlock()
}

// Term sends SIGTERM and waits up to d, then kills.
func (p *Proc) Term(d time.Duration) {
	p.mu.Lock()
	cmd, done, stopped := p.cmd, p.done, p.stopped
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if stopped {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(d):
		p.Kill()
	}
}

// Stop freezes the process (SIGSTOP).
func (p *Proc) Stop() error { return p.signal(syscall.SIGSTOP, true) }

// Cont resumes a frozen process (SIGCONT).
func (p *Proc) Cont() error { return p.signal(syscall.SIGCONT, false) }

func (p *Proc) signal(sig syscall.Signal, stopped bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedLocked() {
		return errors.New(p.Name + ": not running")
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %v: %w", p.Name, sig, err)
	}
	p.stopped = stopped
	return nil
}

// Tail returns the last n lines of the log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
