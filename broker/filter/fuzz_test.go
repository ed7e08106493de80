package filter

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, errors are *SyntaxError inside the input,
// and an accepted expression prints to text that parses to the same tree and
// evaluates the same way.
func FuzzParse(f *testing.F) {
	for _, c := range tableCases() {
		f.Add(c.expr)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q): %v is not a *SyntaxError", s, err)
			}
			if se.Offset < 0 || se.Offset > len(s) {
				t.Fatalf("Parse(%q): offset %d outside the input", s, se.Offset)
			}
			return
		}
		printed := n.String()
		n2, err := Parse(printed)
		if err != nil {
			if strings.Contains(err.Error(), "nested deeper") {
				return // printing adds parentheses
			}
			t.Fatalf("Parse(%q) = %s, which does not parse: %v", s, printed, err)
		}
		if again := n2.String(); again != printed {
			t.Fatalf("Parse(%q) = %s, reparsed %s", s, printed, again)
		}
		e := MustCompile(s)
		none := func(string) (string, bool) { return "", false }
		all := func(k string) (string, bool) { return k, true }
		e2 := MustCompile(printed)
		if e.Evaluate(none) != e2.Evaluate(none) || e.Evaluate(all) != e2.Evaluate(all) {
			t.Fatalf("%q and its printed form %s evaluate differently", s, printed)
		}
	})
}

// FuzzEval: the optimised evaluation (specialised nodes, flattened AND/OR,
// folded literals) agrees with the unoptimised one, which mirrors RocketMQ's
// expression objects one for one, on any expression and property set. props
// is "key=value" lines.
func FuzzEval(f *testing.F) {
	for _, c := range tableCases() {
		var b strings.Builder
		for k, v := range c.props {
			b.WriteString(k + "=" + v + "\n")
		}
		f.Add(c.expr, b.String())
	}
	f.Fuzz(func(t *testing.T, expr, props string) {
		n, err := Parse(expr)
		if err != nil {
			return
		}
		m := map[string]string{}
		for _, line := range strings.Split(props, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				m[k] = v
			}
		}
		lookup := mapLookup(m)
		got := newExpression(expr, n, true).Evaluate(lookup)
		want := newExpression(expr, n, false).Evaluate(lookup)
		if got != want {
			t.Fatalf("%q with %v: optimised %v, reference %v", expr, m, got, want)
		}
	})
}
