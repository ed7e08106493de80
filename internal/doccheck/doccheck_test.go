package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	md := "# T\n\n```go\na := 1\n_ = a\n```\n\n```\nnot go\n```\n\n````go\nb := 2\n```\n_ = b\n````\n\n```bash\nls\n```\n"
	got := Extract("x.md", []byte(md))
	want := []Snippet{{File: "x.md", Line: 4, Code: "a := 1\n_ = a\n"}, {File: "x.md", Line: 13, Code: "b := 2\n```\n_ = b\n"}}
	if !slices.Equal(got, want) {
		t.Fatalf("Extract = %+v, want %+v", got, want)
	}
}

func TestProgram(t *testing.T) {
	for _, c := range []struct {
		code, want string
	}{
		{"x := 1\n_ = x\n", "package main\n\nfunc main() {\n//line d.md:10\nx := 1\n_ = x\n}\n"},
		{"import \"fmt\"\n\nfmt.Println()\n",
			"package main\n\n//line d.md:10\nimport \"fmt\"\n\n\nfunc main() {\n//line d.md:12\nfmt.Println()\n}\n"},
		{"import (\n\t\"fmt\"\n)\nfmt.Println()\n",
			"package main\n\n//line d.md:10\nimport (\n\t\"fmt\"\n)\n\nfunc main() {\n//line d.md:13\nfmt.Println()\n}\n"},
		{"// A whole file.\npackage main\n\nfunc main() {}\n", "//line d.md:10\n// A whole file.\npackage main\n\nfunc main() {}\n"},
	} {
		if got := string(Program(Snippet{File: "d.md", Line: 10, Code: c.code})); got != c.want {
			t.Errorf("Program(%q) =\n%s\nwant\n%s", c.code, got, c.want)
		}
	}
}

// TestVetReportsBySource: a source that does not compile gets its own
// diagnostics, at the position its //line directive gives.
func TestVetReportsBySource(t *testing.T) {
	diags, err := Vet(".", []Source{
		{Name: "good", Code: Program(Snippet{File: "good.md", Line: 1, Code: "x := 1\n_ = x\n"})},
		{Name: "bad", Code: Program(Snippet{File: "bad.md", Line: 7, Code: "x := 1\n"})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(diags) != 1 || !strings.Contains(diags["bad"], "bad.md:7:") || !strings.Contains(diags["bad"], "declared and not used: x") {
		t.Fatalf("diagnostics %q, want bad.md:7 declared and not used", diags)
	}
}

// TestDocSnippetsCompile: every ```go block of README.md and docs/*.md
// compiles and passes go vet against this module (see the package
// comment for how a block becomes a program).
func TestDocSnippetsCompile(t *testing.T) {
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var srcs []Source
	nonName := regexp.MustCompile(`[^a-z0-9]+`)
	for _, f := range files {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range Extract(f, md) {
			name := fmt.Sprintf("%s_%d", nonName.ReplaceAllString(strings.ToLower(filepath.Base(f)), "_"), i+1)
			srcs = append(srcs, Source{Name: name, Code: Program(s)})
		}
	}
	if len(srcs) == 0 {
		t.Fatal("no ```go block in README.md or docs/*.md: the check checks nothing")
	}
	diags, err := Vet(".", srcs)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range diags {
		t.Errorf("snippet %s:\n%s", name, strings.ReplaceAll(d, root+string(filepath.Separator), ""))
	}
	t.Logf("%d Go snippets checked", len(srcs))
}
