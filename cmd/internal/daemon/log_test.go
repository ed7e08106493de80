package daemon

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	lg, err := newLogger(&buf, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	lg.Info("dropped")
	lg.Warn("kept", zap.String("k", "v"))
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	if line["msg"] != "kept" || line["level"] != "warn" || line["k"] != "v" {
		t.Fatalf("line %v", line)
	}

	buf.Reset()
	lg, err = newLogger(&buf, "debug", "console")
	if err != nil {
		t.Fatal(err)
	}
	lg.Debug("hello")
	if !strings.Contains(buf.String(), "DEBUG") || !strings.Contains(buf.String(), "hello") {
		t.Fatalf("console line %q", buf.String())
	}

	if _, err := NewLogger("loud", "json"); err == nil || !strings.Contains(err.Error(), "loud") {
		t.Fatalf("bad level: %v", err)
	}
	if _, err := NewLogger("info", "xml"); err == nil || !strings.Contains(err.Error(), "xml") {
		t.Fatalf("bad format: %v", err)
	}
}

func TestAddrFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "addr")
	if err := WriteAddrFile(p, "127.0.0.1:1234"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "127.0.0.1:1234\n" {
		t.Fatalf("%q %v", b, err)
	}
	if err := RemoveAddrFile(p); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAddrFile(p); err != nil {
		t.Fatalf("second remove: %v", err)
	}
}
