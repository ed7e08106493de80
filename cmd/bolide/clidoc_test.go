package main

import (
	"bufio"
	"context"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cliDoc is docs/CLI.md, read for TestCLIReference.
type cliDoc struct {
	lines []string
	tree  []string // the commands of the command tree, "topic create", ...
}

func readCLIDoc(t *testing.T) *cliDoc {
	t.Helper()
	f, err := os.Open("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &cliDoc{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		d.lines = append(d.lines, sc.Text())
	}
	// The tree: "bolide" and then lines "├── topic create | update | ...".
	for i, l := range d.lines {
		if l != "bolide" || i+1 >= len(d.lines) || !strings.HasPrefix(d.lines[i+1], "├── ") {
			continue
		}
		for _, e := range d.lines[i+1:] {
			e, ok := strings.CutPrefix(e, "├── ")
			if !ok {
				if e, ok = strings.CutPrefix(e, "└── "); !ok {
					break
				}
			}
			parts := strings.Split(e, " | ")
			words := strings.Fields(parts[0])
			d.tree = append(d.tree, strings.Join(words, " "))
			for _, sub := range parts[1:] {
				d.tree = append(d.tree, strings.Join(append(words[:len(words)-1:len(words)-1], strings.TrimSpace(sub)), " "))
			}
		}
		break
	}
	return d
}

var headingRE = regexp.MustCompile(`^(#{2,3}) (.+)$`)

// section returns the text under the heading "## path" or "### path", up
// to the next heading of the same or a higher level; ok is false when
// there is no such heading.
func (d *cliDoc) section(path string) (string, bool) {
	for i, l := range d.lines {
		m := headingRE.FindStringSubmatch(l)
		if m == nil || m[2] != path {
			continue
		}
		end := len(d.lines)
		for j := i + 1; j < len(d.lines); j++ {
			if n := headingRE.FindStringSubmatch(d.lines[j]); n != nil && len(n[1]) <= len(m[1]) {
				end = j
				break
			}
		}
		return strings.Join(d.lines[i:end], "\n"), true
	}
	return "", false
}

// TestCLIReference checks docs/CLI.md against the real command tree: its
// command tree lists every command and no other, and each command's flags
// are named (--flag) in the command's section — the section headed by its
// path, or else by its nearest ancestor's — and the global flags under
// Conventions. Like TestConfigDoc for the daemons' configuration.
func TestCLIReference(t *testing.T) {
	d := readCLIDoc(t)
	root := newRootCmd(newApp(context.Background(), nil, nil, nil))
	var real []string
	walk(root, func(c *cobra.Command) {
		path := strings.TrimPrefix(c.CommandPath(), "bolide ")
		if c == root || c.Hidden || c.Name() == "help" || c.HasParent() && c.Parent().Name() == "completion" {
			return
		}
		if c.Runnable() && !c.HasAvailableSubCommands() || c.Name() == "completion" {
			real = append(real, path)
		}
		// Its flags, in its section or its nearest ancestor's.
		var flags []*pflag.Flag
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				flags = append(flags, f)
			}
		})
		if len(flags) == 0 && c.HasAvailableSubCommands() {
			return // a group: its commands have sections
		}
		sec, ok := "", false
		for p := c; p != root && !ok; p = p.Parent() {
			sec, ok = d.section(strings.TrimPrefix(p.CommandPath(), "bolide "))
		}
		if !ok {
			t.Errorf("docs/CLI.md has no section (## %s, or one of an ancestor)", path)
			return
		}
		for _, f := range flags {
			if !strings.Contains(sec, "--"+f.Name) {
				t.Errorf("docs/CLI.md: the section of %q does not name its flag --%s (%s)", path, f.Name, f.Usage)
			}
		}
	})
	sort.Strings(real)
	tree := slices.DeleteFunc(slices.Clone(d.tree), func(s string) bool { return s == "help" })
	sort.Strings(tree)
	for _, c := range real {
		if !slices.Contains(tree, c) {
			t.Errorf("docs/CLI.md: the command tree lacks %q", c)
		}
	}
	for _, c := range tree {
		if !slices.Contains(real, c) {
			t.Errorf("docs/CLI.md: the command tree lists %q, which does not exist", c)
		}
	}
	conv, ok := d.section("Conventions")
	if !ok {
		t.Fatal("docs/CLI.md has no Conventions section")
	}
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(conv, "--"+f.Name) {
			t.Errorf("docs/CLI.md: Conventions does not name the global flag --%s (%s)", f.Name, f.Usage)
		}
	})
	if len(real) < 20 {
		t.Fatalf("only %d commands found", len(real))
	}
}
