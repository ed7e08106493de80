package proccluster

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bolide-mq/bolide/internal/freeport"
)

// FreePort returns a loopback port for a daemon that keeps it across
// restarts (freeport.Pick).
func FreePort() (int, error) { return freeport.Pick() }

// Proc is a daemon running as a child process. Its output goes to a log
// file; it writes its bound address to an address file (--addr-file).
type Proc struct {
	// Bin is the binary's path; Args its flags (without --addr-file and
	// --log-format, which Start adds).
	Bin  string
	Args []string
	// LogPath receives the daemon's output (appended across restarts);
	// AddrFile its address.
	LogPath  string
	AddrFile string
	// Env, when not nil, is the daemon's environment.
	Env []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	addr string
}

// Start runs the daemon and waits until it writes its address file.
func (p *Proc) Start() error {
	_ = os.Remove(p.AddrFile)
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.Bin, err)
	}
	fmt.Fprintf(logf, "=== %s start %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.Join(p.Args, " "))
	args := append(append([]string{}, p.Args...), "--addr-file", p.AddrFile, "--log-format", "console")
	cmd := exec.Command(p.Bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = p.Env
	// Its own process group (a terminal's Ctrl-C reaches only the test),
	// and killed if the test binary dies (a go test timeout) rather than
	// left running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", filepath.Base(p.Bin), err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited at start:\n%s", filepath.Base(p.Bin), p.LogTail(30))
		default:
		}
		if b, err := os.ReadFile(p.AddrFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			p.mu.Lock()
			p.addr = strings.TrimSpace(string(b))
			p.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			p.Kill()
			return fmt.Errorf("%s did not start in 30 s:\n%s", filepath.Base(p.Bin), p.LogTail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is the address the daemon last wrote to its address file.
func (p *Proc) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Pid is the running process's id, 0 when none runs.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process was started and has not exited.
func (p *Proc) Running() bool { return p.Pid() != 0 }

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Stop sends SIGTERM and waits up to d for a clean exit, then kills.
func (p *Proc) Stop(d time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(d):
		p.Kill()
	}
}

// LogTail returns the last n lines of the daemon's log.
func (p *Proc) LogTail(n int) string { return FileTail(p.LogPath, n) }

// FileTail returns the last n lines of a text file (or the error reading
// it).
func FileTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
