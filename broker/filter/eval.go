package filter

import (
	"sort"
	"strings"
)

// TagsProperty is the pseudo-property holding a message's tag: the lookup
// given to Evaluate must answer it with the tag (RocketMQ stores the tag as
// the property TAGS).
const TagsProperty = "TAGS"

// Expression is a compiled filter, safe for concurrent use.
type Expression struct {
	src   string
	root  *prog
	props []string
}

// Compile parses expr and prepares it for evaluation. Errors are
// *SyntaxError with the byte offset of the problem.
func Compile(expr string) (*Expression, error) {
	n, err := Parse(expr)
	if err != nil {
		return nil, err
	}
	return newExpression(expr, n, true), nil
}

// MustCompile is Compile for expressions known to be valid; it panics on an
// invalid one.
func MustCompile(expr string) *Expression {
	e, err := Compile(expr)
	if err != nil {
		panic(err)
	}
	return e
}

func newExpression(src string, n Node, optimize bool) *Expression {
	c := compiler{optimize: optimize, seen: map[string]bool{}}
	e := &Expression{src: src, root: c.compile(n, true)}
	for p := range c.seen {
		e.props = append(e.props, p)
	}
	sort.Strings(e.props)
	return e
}

// String returns the source text.
func (e *Expression) String() string { return e.src }

// Properties returns the names of the properties the expression reads,
// sorted (TAGS included when used).
func (e *Expression) Properties() []string { return append([]string(nil), e.props...) }

// Evaluate reports whether a message whose properties lookup answers matches
// the expression: true only when RocketMQ's evaluation yields TRUE; unknown
// (a missing property) and evaluation errors (a property that does not
// convert to the compared literal's type) do not match. lookup returns a
// property's value and whether it is present; it is called only for
// properties the expression reads, at most a few times each.
func (e *Expression) Evaluate(lookup func(key string) (string, bool)) bool {
	v := e.root.eval(lookup)
	return v.k == kBool && v.b
}

// kind is the type of a value during evaluation: Java's types as RocketMQ's
// filter sees them, plus an error that aborts the evaluation.
type kind uint8

const (
	kNull kind = iota
	kBool
	kStr
	kInt  // java.lang.Integer
	kLong // java.lang.Long
	kDouble
	kErr // an exception in RocketMQ: the whole expression does not match
)

type value struct {
	k kind
	b bool
	i int64
	f float64
	s string
}

var (
	vNull  = value{k: kNull}
	vTrue  = value{k: kBool, b: true}
	vFalse = value{k: kBool}
	vErr   = value{k: kErr}
)

func boolValue(b bool) value {
	if b {
		return vTrue
	}
	return vFalse
}

func literalValue(l *Literal) value {
	switch l.Kind {
	case LitString:
		return value{k: kStr, s: l.Str}
	case LitInt:
		return value{k: kInt, i: l.Int}
	case LitLong:
		return value{k: kLong, i: l.Int}
	case LitDouble:
		return value{k: kDouble, f: l.Double}
	case LitBool:
		return boolValue(l.Bool)
	}
	return vNull
}

func isNumber(k kind) bool { return k == kInt || k == kLong || k == kDouble }

func (v value) float() float64 {
	if v.k == kDouble {
		return v.f
	}
	return float64(v.i)
}

// compareValues orders two non-null values as RocketMQ's
// ComparisonExpression.__compare does: values of different types are
// converted to the right operand's type (a string property is parsed as the
// literal's Integer, Long, Double or Boolean; Integer and Long widen to Long,
// either to Double); a failed parse is an error. Incomparable types give -1;
// a boolean on the left of a string is an error (a ClassCastException in
// RocketMQ).
func compareValues(l, r value) (int, bool) {
	if l.k == r.k {
		switch l.k {
		case kStr:
			return strings.Compare(l.s, r.s), true
		case kInt, kLong:
			return compareInt(l.i, r.i), true
		case kDouble:
			return compareDouble(l.f, r.f), true
		case kBool:
			return compareBool(l.b, r.b), true
		}
		return -1, true
	}
	switch l.k {
	case kBool:
		if r.k == kStr {
			return 0, false
		}
		return -1, true
	case kInt, kLong, kDouble:
		switch r.k {
		case kInt, kLong, kDouble:
			if l.k == kDouble || r.k == kDouble {
				return compareDouble(l.float(), r.float()), true
			}
			return compareInt(l.i, r.i), true
		case kStr:
			rv, ok := parseAs(r.s, l.k)
			if !ok {
				return 0, false
			}
			return compareValues(l, rv)
		}
		return -1, true
	case kStr:
		switch r.k {
		case kBool:
			return compareBool(javaBool(l.s), r.b), true
		case kInt, kLong, kDouble:
			lv, ok := parseAs(l.s, r.k)
			if !ok {
				return 0, false
			}
			return compareValues(lv, r)
		}
	}
	return -1, true
}

// parseAs converts a string to a number of kind k as Integer.valueOf,
// Long.valueOf or Double.valueOf would.
func parseAs(s string, k kind) (value, bool) {
	switch k {
	case kInt:
		i, ok := parseJavaInt(s, 32)
		return value{k: kInt, i: i}, ok
	case kLong:
		i, ok := parseJavaInt(s, 64)
		return value{k: kLong, i: i}, ok
	default:
		f, ok := parseJavaDouble(s)
		return value{k: kDouble, f: f}, ok
	}
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// cmpOp is a comparison after = and <> and BETWEEN were rewritten.
type cmpOp uint8

const (
	cmpEq cmpOp = iota
	cmpGt
	cmpGe
	cmpLt
	cmpLe
)

func (c cmpOp) holds(r int) bool {
	switch c {
	case cmpEq:
		return r == 0
	case cmpGt:
		return r > 0
	case cmpGe:
		return r >= 0
	case cmpLt:
		return r < 0
	}
	return r <= 0
}

// opcode is what a prog node does.
type opcode uint8

const (
	opLit       opcode = iota // lit
	opProp                    // the property name as a string, or null
	opCast                    // the property name used as a condition: FALSE when present (a string is not a boolean), else null
	opNeg                     // -x: numbers negated, anything else null
	opNot                     // NOT x in three-valued logic
	opAnd                     // kids left to right, stops at the first FALSE
	opOr                      // kids left to right, stops at the first TRUE
	opEq                      // x = y
	opOrder                   // x cmp y for > >= < <=
	opIsNull                  // x IS [NOT] NULL
	opIn                      // name [NOT] IN set
	opMatch                   // x [NOT] CONTAINS|STARTSWITH|ENDSWITH pattern
	opPropEqStr               // name = 'lit': a string equality
	opPropCmp                 // name cmp number literal
)

// prog is one node of a compiled expression.
type prog struct {
	op      opcode
	cmp     cmpOp
	not     bool
	match   MatchOp
	name    string
	lit     value
	x, y    *prog
	kids    []*prog
	set     []string
	bigSet  map[string]struct{}
	pattern string
}

// eval runs the node. It is written without interfaces or closures so that
// lookup does not escape and evaluation does not allocate.
func (n *prog) eval(lookup func(string) (string, bool)) value {
	switch n.op {
	case opLit:
		return n.lit
	case opProp:
		s, ok := lookup(n.name)
		if !ok {
			return vNull
		}
		return value{k: kStr, s: s}
	case opCast:
		if _, ok := lookup(n.name); ok {
			return vFalse
		}
		return vNull
	case opNeg:
		v := n.x.eval(lookup)
		switch v.k {
		case kErr:
			return v
		case kInt:
			return value{k: kInt, i: int64(-int32(v.i))} // Java int arithmetic wraps
		case kLong:
			return value{k: kLong, i: -v.i}
		case kDouble:
			return value{k: kDouble, f: -v.f}
		}
		return vNull
	case opNot:
		v := n.x.eval(lookup)
		if v.k == kBool {
			return boolValue(!v.b)
		}
		return v // null or error
	case opAnd, opOr:
		stop := n.op == opOr // the value that decides the result at once
		unknown := false
		for _, k := range n.kids {
			v := k.eval(lookup)
			switch {
			case v.k == kErr:
				return v
			case v.k == kBool && v.b == stop:
				return v
			case v.k != kBool:
				unknown = true
			}
		}
		if unknown {
			return vNull
		}
		return boolValue(!stop)
	case opEq:
		l := n.x.eval(lookup)
		if l.k == kErr {
			return l
		}
		r := n.y.eval(lookup)
		if r.k == kErr {
			return r
		}
		switch {
		case l.k == kNull && r.k == kNull:
			return vTrue
		case l.k == kNull:
			return vNull
		case r.k == kNull:
			return vFalse
		}
		c, ok := compareValues(l, r)
		if !ok {
			return vErr
		}
		return boolValue(c == 0)
	case opOrder:
		l := n.x.eval(lookup)
		if l.k == kNull || l.k == kErr {
			return l
		}
		r := n.y.eval(lookup)
		if r.k == kNull || r.k == kErr {
			return r
		}
		if l.k == kStr && r.k == kStr {
			// Two strings are ordered as doubles or not at all.
			lf, ok1 := parseJavaDouble(l.s)
			rf, ok2 := parseJavaDouble(r.s)
			if !ok1 || !ok2 {
				return vErr
			}
			return boolValue(n.cmp.holds(compareDouble(lf, rf)))
		}
		c, ok := compareValues(l, r)
		if !ok {
			return vErr
		}
		return boolValue(n.cmp.holds(c))
	case opIsNull:
		v := n.x.eval(lookup)
		if v.k == kErr {
			return v
		}
		return boolValue((v.k == kNull) != n.not)
	case opIn:
		s, ok := lookup(n.name)
		if !ok {
			return vNull
		}
		found := false
		if n.bigSet != nil {
			_, found = n.bigSet[s]
		} else {
			for _, e := range n.set {
				if e == s {
					found = true
					break
				}
			}
		}
		return boolValue(found != n.not)
	case opMatch:
		if n.pattern == "" {
			return vFalse
		}
		v := n.x.eval(lookup)
		switch v.k {
		case kErr:
			return v
		case kStr:
		default:
			return vFalse
		}
		var hit bool
		switch n.match {
		case OpContains:
			hit = strings.Contains(v.s, n.pattern)
		case OpStartsWith:
			hit = strings.HasPrefix(v.s, n.pattern)
		default:
			hit = strings.HasSuffix(v.s, n.pattern)
		}
		return boolValue(hit != n.not)
	case opPropEqStr:
		s, ok := lookup(n.name)
		if !ok {
			return vNull
		}
		return boolValue(s == n.lit.s)
	case opPropCmp:
		s, ok := lookup(n.name)
		if !ok {
			return vNull
		}
		var c int
		if n.lit.k == kDouble {
			f, ok := parseJavaDouble(s)
			if !ok {
				return vErr
			}
			c = compareDouble(f, n.lit.f)
		} else {
			bits := 64
			if n.lit.k == kInt {
				bits = 32
			}
			i, ok := parseJavaInt(s, bits)
			if !ok {
				return vErr
			}
			c = compareInt(i, n.lit.i)
		}
		return boolValue(n.cmp.holds(c))
	}
	return vErr
}

// compiler turns a syntax tree into prog nodes. With optimize it folds
// negated numeric literals, flattens AND/OR chains and uses the specialised
// property-versus-literal nodes; without it the nodes mirror RocketMQ's
// expression objects one for one (the reference the fuzz test compares
// against).
type compiler struct {
	optimize bool
	seen     map[string]bool
}

// compile translates n; cond says n is used as a condition, where a bare
// property is RocketMQ's boolean cast.
func (c *compiler) compile(n Node, cond bool) *prog {
	switch n := n.(type) {
	case *Property:
		c.seen[n.Name] = true
		if cond {
			return &prog{op: opCast, name: n.Name}
		}
		return &prog{op: opProp, name: n.Name}
	case *Literal:
		return &prog{op: opLit, lit: literalValue(n)}
	case *Unary:
		if n.Op == OpNot {
			return &prog{op: opNot, x: c.compile(n.X, true)}
		}
		x := c.compile(n.X, false)
		if c.optimize && x.op == opLit && isNumber(x.lit.k) {
			return &prog{op: opLit, lit: (&prog{op: opNeg, x: x}).eval(nil)}
		}
		return &prog{op: opNeg, x: x}
	case *Binary:
		switch n.Op {
		case OpAnd, OpOr:
			op := opAnd
			if n.Op == OpOr {
				op = opOr
			}
			if !c.optimize {
				return &prog{op: op, kids: []*prog{c.compile(n.X, true), c.compile(n.Y, true)}}
			}
			// Flatten the left-deep chain a AND b AND c: same order, same
			// short-circuit, same three-valued result, less recursion.
			var rights []Node
			left := Node(n)
			for {
				b, ok := left.(*Binary)
				if !ok || b.Op != n.Op {
					break
				}
				rights = append(rights, b.Y)
				left = b.X
			}
			p := &prog{op: op, kids: []*prog{c.compile(left, true)}}
			for i := len(rights) - 1; i >= 0; i-- {
				k := c.compile(rights[i], true)
				if k.op == op { // a parenthesised chain of the same operator
					p.kids = append(p.kids, k.kids...)
				} else {
					p.kids = append(p.kids, k)
				}
			}
			return p
		case OpEq, OpNe:
			p := c.comparison(cmpEq, n.X, n.Y)
			if n.Op == OpNe {
				return &prog{op: opNot, x: p}
			}
			return p
		default:
			return c.comparison(map[BinaryOp]cmpOp{OpGt: cmpGt, OpGe: cmpGe, OpLt: cmpLt, OpLe: cmpLe}[n.Op], n.X, n.Y)
		}
	case *IsNull:
		return &prog{op: opIsNull, not: n.Not, x: c.compile(n.X, false)}
	case *Between:
		// BETWEEN is x >= lo AND x <= hi; NOT BETWEEN is x < lo OR x > hi.
		if n.Not {
			return &prog{op: opOr, kids: []*prog{c.comparison(cmpLt, n.X, n.Lo), c.comparison(cmpGt, n.X, n.Hi)}}
		}
		return &prog{op: opAnd, kids: []*prog{c.comparison(cmpGe, n.X, n.Lo), c.comparison(cmpLe, n.X, n.Hi)}}
	case *In:
		c.seen[n.X.Name] = true
		p := &prog{op: opIn, name: n.X.Name, not: n.Not, set: n.Values}
		if c.optimize && len(n.Values) > 8 {
			p.bigSet = make(map[string]struct{}, len(n.Values))
			for _, v := range n.Values {
				p.bigSet[v] = struct{}{}
			}
		}
		return p
	case *Match:
		return &prog{op: opMatch, match: n.Op, not: n.Not, pattern: n.Pattern, x: c.compile(n.X, false)}
	}
	panic("filter: unknown node")
}

func (c *compiler) comparison(cmp cmpOp, xn, yn Node) *prog {
	x, y := c.compile(xn, false), c.compile(yn, false)
	if c.optimize && x.op == opProp && y.op == opLit {
		switch {
		case cmp == cmpEq && y.lit.k == kStr:
			return &prog{op: opPropEqStr, name: x.name, lit: y.lit}
		case isNumber(y.lit.k):
			return &prog{op: opPropCmp, cmp: cmp, name: x.name, lit: y.lit}
		}
	}
	op := opOrder
	if cmp == cmpEq {
		op = opEq
	}
	return &prog{op: op, cmp: cmp, x: x, y: y}
}
