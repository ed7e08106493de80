package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// TestBrokerDown: a command on a topic whose only broker is down says that
// the broker is unreachable (down or still starting), not that the topic
// does not exist.
func TestBrokerDown(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	t.Cleanup(c.Stop)
	c.CreateTopic("down", 1)
	ns := strings.Join(c.NameServerAddrs(), ",")
	c.StopBroker(0)
	for _, args := range [][]string{
		{"send", "--topic", "down", "hello"},
		{"send", "--topic", "down", "hello", "-o", "json"},
		{"bench", "produce", "--topic", "down", "--count", "1"},
	} {
		args = append(args, "--namesrv", ns)
		code, out, errb := runCLI(t, "", args...)
		checkOneLineError(t, args, code, out, errb, exitFailed, "broker unreachable")
		if !strings.Contains(errb, "down or still starting") || strings.Contains(errb, "not exist") {
			t.Errorf("%q: %q, want the broker down or starting, not the topic missing", args, errb)
		}
	}
}

// TestNoGRPCImports: the CLI tells failures apart through the SDK's
// errors, never by gRPC status codes.
func TestNoGRPCImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(path, "google.golang.org/grpc") {
				t.Errorf("%s imports %s: use the SDK's errors (client.ErrBrokerUnreachable, ...)", name, path)
			}
		}
	}
}
