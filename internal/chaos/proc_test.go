package chaos

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A stand-in daemon: writes its "address" to the file after --addr-file
// (its second argument) and prints a line per 20 ms.
const fakeDaemon = `echo 127.0.0.1:1 > "$2"; while :; do echo tick; sleep 0.02; done`

func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return strings.Fields(s[i+1:])[0]
}

func TestProcLifecycle(t *testing.T) {
	p := newProc("fake", "/bin/sh", t.TempDir(), "-c", fakeDaemon, "fake")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if err := p.Start(); err == nil {
		t.Fatal("second start of a running process accepted")
	}
	pid := p.Pid()
	if pid == 0 || !p.Running() {
		t.Fatalf("pid %d running %v", pid, p.Running())
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for procState(pid) != "T" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := procState(pid); st != "T" {
		t.Fatalf("state after SIGSTOP: %q", st)
	}
	if err := p.Cont(); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if p.Running() || p.Pid() != 0 {
		t.Fatal("still running after Kill")
	}
	if err := p.Cont(); err == nil {
		t.Fatal("SIGCONT to a dead process accepted")
	}
	// Restart appends to the same log.
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	p.Term(5 * time.Second)
	log, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "==== fake start"); n != 2 {
		t.Fatalf("%d start marks in the log:\n%s", n, log)
	}
	if !strings.Contains(p.Tail(3), "tick") {
		t.Fatalf("tail %q", p.Tail(3))
	}
}

func TestProcStartFailure(t *testing.T) {
	p := newProc("bad", "/bin/sh", t.TempDir(), "-c", "echo broken; exit 3", "bad")
	err := p.Start()
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("start of a failing process: %v", err)
	}
}
