// Package archtest checks the import rules of docs/ARCHITECTURE.md with the
// go tool itself: the broker core speaks no protocol, and the storage
// packages stay independent of each other.
package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/bolide-mq/bolide/"

// edge lists the packages allowed to speak a protocol: the front ends, the
// broker's calls to other daemons, and the assembly of both.
var edge = []string{
	"broker/frontend",
	"broker/remote",
	"broker/server",
}

// protocols may be imported only at the edge. (google.golang.org/protobuf
// itself is not among them: the Prometheus client depends on it.)
var protocols = []string{
	module + "proto/bolidev1",
	module + "internal/wire",
	module + "internal/frame",
	module + "internal/hotwire",
	module + "internal/remoting",
	"google.golang.org/grpc",
	"github.com/apache/rocketmq-clients/golang/v5/protocol/v2", // RocketMQ 5's apache.rocketmq.v2
}

type pkg struct {
	ImportPath string
	Deps       []string
}

// list runs go list -deps -json on patterns and returns the named packages
// (not their dependencies) with their dependency lists.
func list(t *testing.T, patterns ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Deps"}, patterns...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", patterns, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func atEdge(path string) bool {
	rel := strings.TrimPrefix(path, module)
	for _, e := range edge {
		if rel == e || strings.HasPrefix(rel, e+"/") {
			return true
		}
	}
	return false
}

func TestBrokerCoreSpeaksNoProtocol(t *testing.T) {
	core := 0
	for _, p := range list(t, "./broker/...", "./commitlog/...", "./consumequeue/...", "./indexfile/...", "./ha/...", "./message/...") {
		if atEdge(p.ImportPath) {
			continue
		}
		core++
		for _, proto := range protocols {
			for _, d := range p.Deps {
				if d == proto || strings.HasPrefix(d, proto+"/") {
					t.Errorf("%s (core) depends on %s: protocols belong in a front end (broker/frontend/...)", p.ImportPath, proto)
					break
				}
			}
		}
	}
	if core < 5 {
		t.Fatalf("only %d core packages listed: the pattern list is stale", core)
	}
}

func TestStoragePackagesStayApart(t *testing.T) {
	storage := []string{module + "commitlog", module + "consumequeue", module + "indexfile", module + "ha"}
	for _, p := range list(t, "./commitlog", "./consumequeue", "./indexfile", "./ha") {
		for _, d := range p.Deps {
			for _, s := range storage {
				if d == s && d != p.ImportPath {
					t.Errorf("%s imports %s: the storage packages never import each other", p.ImportPath, d)
				}
			}
		}
	}
}

// The port multiplexer is shared by the broker and the NameServer: it
// knows connections and their first bytes, nothing of the project but
// internal/ratelog (its rate-limited WARN) and internal/rawconn (the
// sockets it accepts), which, like internal/acceptq, import nothing of the
// project.
func TestPortMuxStandsAlone(t *testing.T) {
	allowed := map[string]bool{module + "internal/ratelog": true, module + "internal/rawconn": true}
	for _, p := range list(t, "./internal/portmux") {
		for _, d := range p.Deps {
			if strings.HasPrefix(d, module) && !allowed[d] {
				t.Errorf("%s imports %s: the port multiplexer imports nothing of the project but internal/ratelog and internal/rawconn", p.ImportPath, d)
			}
		}
	}
	for _, p := range list(t, "./internal/ratelog", "./internal/rawconn", "./internal/acceptq") {
		for _, d := range p.Deps {
			if strings.HasPrefix(d, module) {
				t.Errorf("%s imports %s: it imports nothing of the project", p.ImportPath, d)
			}
		}
	}
}

// The failover controller (embedded in NameServers) decides for brokers
// over its gRPC service and knows them only through it: it may import
// proto, internal/* and ha (epoch entries), never a broker package, nor
// the NameServer that embeds it, nor the client SDK.
func TestControllerImportsNoBroker(t *testing.T) {
	forbidden := []string{module + "broker", module + "nameserver", module + "client"}
	pkgs := list(t, "./controller/...")
	if len(pkgs) == 0 {
		t.Fatal("no controller package listed")
	}
	for _, p := range pkgs {
		for _, d := range p.Deps {
			for _, f := range forbidden {
				if d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("%s depends on %s: the controller speaks to brokers only over its gRPC service", p.ImportPath, d)
				}
			}
		}
	}
}

// TestDaemonsRunNoCommand keeps process execution out of everything the
// daemons and the CLI are built from (CVE-2023-33246 was a broker setting
// that reached a shell): no package of the module linked into them
// imports os/exec. The harnesses that start real binaries in tests are not
// linked into them.
func TestDaemonsRunNoCommand(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`,
		"./cmd/bolide-broker", "./cmd/bolide-nameserver", "./cmd/bolide")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], module) {
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			if imp == "os/exec" {
				t.Errorf("%s imports os/exec: the daemons and the CLI run no command", fields[0])
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d packages of the module listed", checked)
	}
}
