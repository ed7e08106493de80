// Package doccheck compiles Go code that lives outside Go files — the
// ```go blocks of the Markdown documentation, and programs that must not
// compile — against the module's own packages, so that documentation and
// API cannot drift apart unnoticed.
//
// A ```go block is turned into a program by one rule:
//
//   - a block whose first code line is a package clause is a whole file;
//   - any other block is the body of func main, optionally preceded by its
//     imports (import lines or an import block), which go to the top of
//     the file. Nothing is declared for it: a snippet that uses ctx says
//     where ctx comes from, and one that declares a variable uses it.
//
// Code that is not meant to compile goes in a block without the go tag.
package doccheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
)

// Snippet is one ```go block of a Markdown file.
type Snippet struct {
	File string // the Markdown file, as given to Extract
	Line int    // the line of the block's first code line, 1-based
	Code string
}

// Extract returns the ```go blocks of md, the content of file.
func Extract(file string, md []byte) []Snippet {
	var out []Snippet
	var cur *Snippet
	var code strings.Builder
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && strings.HasPrefix(trimmed, "```"):
			fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
			info := strings.Fields(strings.TrimPrefix(trimmed, fence))
			if len(info) > 0 && info[0] == "go" {
				cur = &Snippet{File: file, Line: n + 1}
				code.Reset()
			}
		case fence != "" && strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`") == "":
			if cur != nil {
				cur.Code = code.String()
				out = append(out, *cur)
				cur = nil
			}
			fence = ""
		case cur != nil:
			code.WriteString(line)
			code.WriteByte('\n')
		}
	}
	return out
}

// Program returns the Go file of a snippet, by the package's rule, with
// //line directives so that diagnostics name the Markdown file and line.
func Program(s Snippet) []byte {
	lines := strings.Split(strings.TrimSuffix(s.Code, "\n"), "\n")
	first := 0
	for first < len(lines) && (strings.TrimSpace(lines[first]) == "" || strings.HasPrefix(strings.TrimSpace(lines[first]), "//")) {
		first++
	}
	var b bytes.Buffer
	if first < len(lines) && strings.HasPrefix(lines[first], "package ") {
		fmt.Fprintf(&b, "//line %s:%d\n%s", s.File, s.Line, s.Code)
		return b.Bytes()
	}
	// Leading imports, then the body.
	end := first
	for end < len(lines) {
		l := strings.TrimSpace(lines[end])
		switch {
		case l == "" || strings.HasPrefix(l, "//"):
			end++
			continue
		case strings.HasPrefix(l, "import ("):
			for end < len(lines) && strings.TrimSpace(lines[end]) != ")" {
				end++
			}
			end++
			continue
		case strings.HasPrefix(l, "import "):
			end++
			continue
		}
		break
	}
	b.WriteString("package main\n\n")
	if end > 0 {
		fmt.Fprintf(&b, "//line %s:%d\n%s\n\n", s.File, s.Line, strings.Join(lines[:end], "\n"))
	}
	fmt.Fprintf(&b, "func main() {\n//line %s:%d\n%s\n}\n", s.File, s.Line+end, strings.Join(lines[end:], "\n"))
	return b.Bytes()
}

// Source is one program to check.
type Source struct {
	Name string // unique among the sources of one Vet call: [a-z0-9_]
	Code []byte
}

var validName = regexp.MustCompile(`^[a-z0-9_]+$`)

// Vet writes each source as a main package of its own in a temporary
// directory under dir (a directory of the module, so that the sources
// import its packages as they are), runs go vet on all of them at once
// — offline: the modules come from the module cache — and returns the
// diagnostics of each source that failed, by name. The error reports a
// failure that is not a source's.
func Vet(dir string, srcs []Source) (map[string]string, error) {
	root, err := ModuleRoot(dir)
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(dir, "_vet-") // "_": invisible to ./... patterns
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var pkgs []string
	for _, s := range srcs {
		if !validName.MatchString(s.Name) || slices.Contains(pkgs, "./"+s.Name) {
			return nil, fmt.Errorf("doccheck: bad or repeated source name %q", s.Name)
		}
		if err := os.Mkdir(filepath.Join(tmp, s.Name), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, s.Name, "main.go"), s.Code, 0o644); err != nil {
			return nil, err
		}
		pkgs = append(pkgs, "./"+s.Name)
	}
	cmd := exec.Command(goTool(), append([]string{"vet"}, pkgs...)...)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, fmt.Errorf("doccheck: go vet: %w", err)
	}
	return splitOutput(string(out), err != nil, func(p string) string {
		// go vet prints positions relative to its directory, tmp.
		if rel, err := filepath.Rel(root, filepath.Join(tmp, p)); err == nil && !filepath.IsAbs(p) {
			return rel
		}
		return p
	})
}

// splitOutput sorts go vet's output by package: each package's lines
// follow a "# <import path>" header. path rewrites the file names of
// positions.
func splitOutput(out string, failed bool, path func(string) string) (map[string]string, error) {
	diags := make(map[string]string)
	var stray []string
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "# "):
			path := strings.Trim(strings.TrimPrefix(line, "# "), "[]")
			cur = path[strings.LastIndex(path, "/")+1:]
		case line == "":
		case cur != "":
			line = strings.TrimPrefix(line, "vet: ")
			if file, rest, ok := strings.Cut(line, ":"); ok && !strings.ContainsAny(file, " \t") {
				line = path(file) + ":" + rest
			}
			diags[cur] += line + "\n"
		default:
			stray = append(stray, line)
		}
	}
	if len(stray) > 0 || failed && len(diags) == 0 {
		return diags, fmt.Errorf("doccheck: go vet: %s", strings.Join(stray, "\n"))
	}
	return diags, nil
}

// goTool is the go command of the toolchain running the test.
func goTool() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

// ModuleRoot returns the directory of the go.mod above dir.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("doccheck: no go.mod above " + dir)
		}
		dir = parent
	}
}
