package proccluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// DefaultBinaries are the daemons every cluster needs.
var DefaultBinaries = []string{"bolide-nameserver", "bolide-broker"}

// Binaries returns a directory holding the named commands of cmd/
// (DefaultBinaries when none are named): $BOLIDE_BIN when set (each must be
// there), else a temporary directory they are built into from the
// repository root, which cleanup removes.
func Binaries(names ...string) (dir string, cleanup func(), err error) {
	if len(names) == 0 {
		names = DefaultBinaries
	}
	if dir := os.Getenv("BOLIDE_BIN"); dir != "" {
		for _, b := range names {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				return "", nil, fmt.Errorf("BOLIDE_BIN: %w", err)
			}
		}
		return dir, func() {}, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", nil, err
	}
	dir, err = os.MkdirTemp("", "bolide-proc-bin-")
	if err != nil {
		return "", nil, fmt.Errorf("binaries: %w", err)
	}
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build in %s: %w\n%s", root, err, out)
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

const modulePath = "github.com/bolide-mq/bolide"

// RepoRoot returns the main module's root directory: the directory two
// levels above this source file when it is there, else the first directory
// at or above the working directory whose go.mod declares the module.
func RepoRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		if isMainModule(root) {
			return root, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repository root: %w", err)
	}
	for {
		if isMainModule(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root: no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

func isMainModule(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}
