package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/internal/freeport"
)

// runCLI runs one command line in process.
func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// checkOneLineError checks the failure contract: nothing on stdout, one
// line "bolide: ..." on stderr.
func checkOneLineError(t *testing.T, args []string, code int, stdout, stderr string, wantCode int, want string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, wantCode, stderr)
	}
	if stdout != "" {
		t.Errorf("%q: stdout %q, want nothing", args, stdout)
	}
	if !strings.HasPrefix(stderr, "bolide: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("%q: stderr %q is not one line \"bolide: ...\"", args, stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("%q: stderr %q does not contain %q", args, stderr, want)
	}
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, s := range c.Commands() {
		walk(s, fn)
	}
}

func TestEveryCommandHasHelpWithExample(t *testing.T) {
	root := newRootCmd(newApp(context.Background(), nil, nil, nil))
	n := 0
	walk(root, func(c *cobra.Command) {
		n++
		path := strings.Fields(c.CommandPath())[1:]
		code, out, errb := runCLI(t, "", append(path, "--help")...)
		if code != 0 || errb != "" {
			t.Errorf("%s --help: exit %d, stderr %q", c.CommandPath(), code, errb)
		}
		if c.Example == "" || !strings.Contains(out, "Examples:\n  bolide") {
			t.Errorf("%s --help has no example:\n%s", c.CommandPath(), out)
		}
		if c.Short == "" {
			t.Errorf("%s has no short description", c.CommandPath())
		}
	})
	if n < 20 {
		t.Fatalf("only %d commands", n)
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"topic", "list", "--bogus"}, "unknown flag: --bogus (see 'bolide topic list --help')"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"topc"}, `unknown command "topc" for "bolide" (did you mean "topic"?)`},
		{[]string{"topic", "nope"}, `unknown command "nope" for "bolide topic"`},
		{[]string{"topic", "create"}, "needs a TOPIC"},
		{[]string{"topic", "create", "a", "b"}, "needs a TOPIC"},
		{[]string{"topic", "create", "bad/name"}, "illegal"},
		{[]string{"topic", "create", "t", "--queues", "0"}, "--queues must be in 1..1024"},
		{[]string{"topic", "create", "t", "--perm", "x"}, "--perm"},
		{[]string{"topic", "create", "t", "--queues", "many"}, `invalid argument "many"`},
		{[]string{"-o", "yaml", "topic", "list"}, `-o/--output must be "table" or "json"`},
		{[]string{"--timeout", "0s", "topic", "list"}, "--timeout must be positive"},
		{[]string{"-n", "", "topic", "list"}, "--namesrv is empty"},
		{[]string{"-n", "localhost", "topic", "list"}, "is not host:port"},
		{[]string{"send", "hello"}, "--topic is required"},
		{[]string{"send", "--topic", "t"}, "give a BODY"},
		{[]string{"send", "--topic", "t", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"send", "--topic", "t", "--count", "0", "x"}, "--count must be positive"},
		{[]string{"send", "--topic", "t", "--property", "novalue", "x"}, "want key=value"},
		{[]string{"consume", "--topic", "t"}, "--topic and --group are required"},
		{[]string{"consume", "--topic", "t", "--group", "g", "--from", "whenever"}, "--from"},
		{[]string{"msg", "query", "--topic", "t"}, "--topic and --key are required"},
		{[]string{"msg", "query", "--topic", "t", "--key", "k", "--since", "1h", "--begin", "2h"}, "not both"},
		{[]string{"msg", "query", "--topic", "t", "--key", "k", "--since", "1767366245"}, "looks like seconds"},
		{[]string{"msg", "at", "--topic", "t", "--queue", "1"}, "--topic, --queue and --offset are required"},
		{[]string{"msg", "get"}, "needs an ID"},
		{[]string{"offset", "reset", "--group", "g", "--topic", "t"}, "exactly one of"},
		{[]string{"offset", "reset", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"}, "exactly one of"},
		{[]string{"offset", "reset", "--group", "g", "--topic", "t", "--to-time", "later"}, "--to-time"},
		{[]string{"group", "lag"}, "needs a GROUP"},
		{[]string{"bench", "produce"}, "--topic is required"},
		{[]string{"bench", "produce", "--topic", "t", "--size", "0"}, "--size"},
		{[]string{"bench", "consume", "--topic", "t", "--consumers", "0"}, "--consumers"},
		{[]string{"completion", "tcsh"}, "unknown shell"},
		{[]string{"help", "nothing"}, "unknown help topic"},
	}
	for _, c := range cases {
		// -o json must not change the contract.
		for _, extra := range [][]string{nil, {"-o", "json"}} {
			args := append(append([]string{}, c.args...), extra...)
			if c.args[0] == "-o" && extra != nil {
				continue
			}
			code, out, errb := runCLI(t, "", args...)
			checkOneLineError(t, args, code, out, errb, exitUsage, c.want)
		}
	}
}

func TestUnreachableNameServer(t *testing.T) {
	// A port nothing listens on: refused at once.
	closed, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"topic", "list"},
		{"topic", "create", "orders"},
		{"send", "--topic", "orders", "hello"},
		{"consume", "--topic", "orders", "--group", "g"},
		{"cluster", "list", "-o", "json"},
		{"group", "lag", "g"},
		{"msg", "get", "C0A8000100002A9F0000000000000001"}, // a msg id (unique id): looked up through the topics
		{"bench", "produce", "--topic", "orders"},
	} {
		args = append(args, "-n", closed)
		start := time.Now()
		code, out, errb := runCLI(t, "", args...)
		checkOneLineError(t, args, code, out, errb, exitFailed, "cannot reach the NameServer at "+closed+": connection refused")
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%q took %v", args, d)
		}
	}

	// A NameServer that accepts connections and never answers: the
	// command gives up after --timeout.
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for _, args := range [][]string{{"topic", "list"}, {"consume", "--topic", "orders", "--group", "g"}} {
		args = append(args, "-n", hole.Addr().String(), "--timeout", "500ms")
		start := time.Now()
		code, out, errb := runCLI(t, "", args...)
		d := time.Since(start)
		checkOneLineError(t, args, code, out, errb, exitFailed, "did not answer within")
		if d > 5*time.Second {
			t.Errorf("%q took %v with --timeout 500ms", args, d)
		}
	}
}

func TestVersionAndCompletion(t *testing.T) {
	code, out, errb := runCLI(t, "", "--version")
	if code != 0 || out != "bolide dev\n" || errb != "" {
		t.Errorf("--version: %d %q %q", code, out, errb)
	}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errb := runCLI(t, "", "completion", sh)
		if code != 0 || errb != "" || !strings.Contains(out, "bolide") || len(out) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", sh, code, len(out), errb)
		}
	}
	// Flag values complete from fixed lists.
	code, out, _ = runCLI(t, "", "__complete", "topic", "list", "-o", "")
	if code != 0 || !strings.Contains(out, "table\njson\n") {
		t.Errorf("completing -o: %d %q", code, out)
	}
}

func TestNameServerFromEnvironment(t *testing.T) {
	t.Setenv(envNameServer, "127.0.0.1:1;127.0.0.1:2")
	code, out, errb := runCLI(t, "", "topic", "list")
	checkOneLineError(t, []string{"topic", "list"}, code, out, errb, exitFailed, "127.0.0.1:1;127.0.0.1:2")
	// The flag wins over the environment.
	code, out, errb = runCLI(t, "", "topic", "list", "--namesrv", "127.0.0.1:3")
	checkOneLineError(t, []string{"topic", "list"}, code, out, errb, exitFailed, "NameServer at 127.0.0.1:3:")
}
