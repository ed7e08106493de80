package filter

import (
	"math/rand"
	"strings"
)

// exprGen produces random expressions, mostly well formed, over the tricky
// corners of the grammar: every operator, literal forms, keyword casing,
// comments, parentheses, type mismatches. It feeds the comparison with
// RocketMQ and the fuzz seeds.
type exprGen struct {
	r *rand.Rand
}

var (
	genProps   = []string{"a", "b", "c", "TAGS"}
	genNumbers = []string{"0", "1", "5", "10", "10L", "3l", "2147483647", "2147483648", "9223372036854775807",
		"3.5", ".5", "5.", "1e3", "1.5E-2", "3.1E10", "007.5", "1e400", "99999999999999999999"}
	genStrings = []string{"'x'", "''", "'1'", "'1.5'", "'true'", "'a''b'", "' '", "'abc'", "'tag'", "'5'"}
	// Property values that convert, half convert or do not convert.
	genValues = []string{"", "1", "5", "10", "-5", "+5", "1.5", "3.5", "abc", "x", "true", "TRUE", "false", "NaN",
		"Infinity", "-Infinity", " 5", "5 ", "1e3", "0x1p3", "5f", "5d", "2147483648", "9223372036854775808", "-0",
		"0.0", "-0.0", "\u0663", "1_0", "1.", ".5", "a'b", "tag", "'", "axb", "5L", "00012"}
)

func (g *exprGen) pick(xs []string) string { return xs[g.r.Intn(len(xs))] }

func (g *exprGen) kw(w string) string {
	switch g.r.Intn(4) {
	case 0:
		return strings.ToLower(w)
	case 1:
		return strings.ToUpper(w[:1]) + strings.ToLower(w[1:])
	}
	return w
}

func (g *exprGen) sp() string {
	switch g.r.Intn(12) {
	case 0:
		return "  "
	case 1:
		return "\n"
	case 2:
		return " /* c */ "
	case 3:
		return " -- c\n"
	case 4:
		return "\t"
	}
	return " "
}

// cond is an expression used as a condition.
func (g *exprGen) cond(d int) string {
	if d <= 0 {
		return g.leaf()
	}
	s := g.sp
	switch g.r.Intn(14) {
	case 0:
		return g.cond(d-1) + s() + g.kw("AND") + s() + g.cond(d-1)
	case 1:
		return g.cond(d-1) + s() + g.kw("OR") + s() + g.cond(d-1)
	case 2:
		return g.kw("NOT") + s() + g.cond(d-1)
	case 3:
		return "(" + g.cond(d-1) + ")"
	case 4:
		return g.operand(d-1) + s() + g.pick([]string{">", ">=", "<", "<="}) + s() + g.operand(d-1)
	case 5:
		return g.operand(d-1) + s() + g.pick([]string{"=", "<>"}) + s() + g.operand(d-1)
	case 6:
		not := ""
		if g.r.Intn(2) == 0 {
			not = g.kw("NOT") + " "
		}
		return g.operand(d-1) + s() + g.kw("IS") + s() + not + g.kw("NULL")
	case 7:
		not := ""
		if g.r.Intn(2) == 0 {
			not = g.kw("NOT") + " "
		}
		return g.operand(d-1) + s() + not + g.kw("BETWEEN") + s() + g.operand(d-1) + s() + g.kw("AND") + s() + g.operand(d-1)
	case 8:
		not := ""
		if g.r.Intn(2) == 0 {
			not = g.kw("NOT") + " "
		}
		n := 1 + g.r.Intn(4)
		if g.r.Intn(8) == 0 {
			n = 9 + g.r.Intn(4) // long enough to be hashed
		}
		vals := make([]string, n)
		for i := range vals {
			vals[i] = g.pick(genStrings)
		}
		x := g.pick(genProps)
		if g.r.Intn(10) == 0 {
			x = g.operand(d - 1)
		}
		return x + s() + not + g.kw("IN") + s() + "(" + strings.Join(vals, ","+s()) + ")"
	case 9:
		not := ""
		if g.r.Intn(2) == 0 {
			not = g.kw("NOT") + " "
		}
		return g.operand(d-1) + s() + not + g.kw(g.pick([]string{"CONTAINS", "STARTSWITH", "ENDSWITH"})) + s() + g.pick(genStrings)
	case 10:
		return g.cond(d-1) + s() + g.pick([]string{"=", "<>"}) + s() + g.cond(d-1)
	}
	return g.leaf()
}

func (g *exprGen) leaf() string {
	switch g.r.Intn(6) {
	case 0:
		return g.kw(g.pick([]string{"TRUE", "FALSE", "NULL"}))
	case 1:
		return g.pick(genProps)
	}
	return g.pick(genProps) + " " + g.pick([]string{"=", "<>", ">", ">=", "<", "<="}) + " " + g.operand(0)
}

// operand is a value: property, literal, negation, or a parenthesised one.
func (g *exprGen) operand(d int) string {
	if d > 0 {
		switch g.r.Intn(10) {
		case 0:
			return "-" + g.operand(d-1)
		case 1:
			return "+" + g.operand(d-1)
		case 2:
			return "(" + g.operand(d-1) + ")"
		case 3:
			return "(" + g.cond(d-1) + ")"
		}
	}
	switch g.r.Intn(8) {
	case 0, 1, 2:
		return g.pick(genProps)
	case 3, 4:
		return g.pick(genNumbers)
	case 5, 6:
		return g.pick(genStrings)
	}
	return g.kw(g.pick([]string{"TRUE", "FALSE", "NULL"}))
}

// props is a random property set over genProps.
func (g *exprGen) props() map[string]string {
	m := map[string]string{}
	for _, p := range genProps {
		if g.r.Intn(4) != 0 {
			m[p] = g.pick(genValues)
		}
	}
	return m
}

// mutate damages an expression to exercise the error paths.
func (g *exprGen) mutate(s string) string {
	if s == "" {
		return "'"
	}
	i := g.r.Intn(len(s))
	switch g.r.Intn(4) {
	case 0:
		return s[:i] + s[i+1:]
	case 1:
		return s[:i] + g.pick([]string{"(", ")", "'", ",", "!", "=", "NOT ", " AND ", "-", ".", "e", "1"}) + s[i:]
	case 2:
		return s[:i]
	}
	return s + " " + g.pick([]string{"x", ")", "AND", "1", "'y'"})
}
