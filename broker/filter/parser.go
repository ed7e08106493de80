package filter

import (
	"fmt"
	"strconv"
)

// SyntaxError is why an expression was refused: the byte offset in the
// expression where the problem was found and what was expected there.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("filter: invalid SQL92 expression at offset %d: %s", e.Offset, e.Msg)
}

func errorf(offset int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Offset: offset, Msg: fmt.Sprintf(format, args...)}
}

// MaxDepth bounds the nesting of parentheses and prefix operators, so a
// hostile expression cannot exhaust the stack.
const MaxDepth = 500

// Parse parses a RocketMQ SQL92 filter expression into its syntax tree,
// applying every check RocketMQ applies when it compiles one (for instance
// "a > 'x'" or "a BETWEEN 5 AND 1" are refused). Errors are *SyntaxError.
func Parse(expr string) (Node, error) {
	p := &parser{lx: lexer{src: expr}}
	n, err := p.parseSelector()
	if err != nil {
		return nil, err
	}
	if err := checkDepth(n, 1); err != nil {
		return nil, err
	}
	return n, nil
}

// checkDepth refuses trees deeper than MaxDepth (chains such as a = b = c
// nest without parentheses). AND and OR chains do not count: they are
// evaluated as flat lists.
func checkDepth(n Node, d int) error {
	if d > MaxDepth {
		return errorf(n.Pos(), "expression nested deeper than %d levels", MaxDepth)
	}
	switch n := n.(type) {
	case *Unary:
		return checkDepth(n.X, d+1)
	case *Binary:
		if n.Op == OpAnd || n.Op == OpOr {
			var left Node = n
			for {
				b, ok := left.(*Binary)
				if !ok || b.Op != n.Op {
					break
				}
				if err := checkDepth(b.Y, d+1); err != nil {
					return err
				}
				left = b.X
			}
			return checkDepth(left, d+1)
		}
		if err := checkDepth(n.X, d+1); err != nil {
			return err
		}
		return checkDepth(n.Y, d+1)
	case *IsNull:
		return checkDepth(n.X, d+1)
	case *Between:
		for _, k := range []Node{n.X, n.Lo, n.Hi} {
			if err := checkDepth(k, d+1); err != nil {
				return err
			}
		}
	case *Match:
		return checkDepth(n.X, d+1)
	}
	return nil
}

type parser struct {
	lx    lexer
	buf   [2]token // lookahead
	nbuf  int
	depth int
}

func (p *parser) peekN(i int) (token, error) {
	for p.nbuf <= i {
		t, err := p.lx.next()
		if err != nil {
			return token{}, err
		}
		p.buf[p.nbuf] = t
		p.nbuf++
	}
	return p.buf[i], nil
}

func (p *parser) peek() (token, error) { return p.peekN(0) }

func (p *parser) advance() token {
	t := p.buf[0]
	p.buf[0] = p.buf[1]
	p.nbuf--
	return t
}

// expect consumes a token of kind k or fails naming what was expected.
func (p *parser) expect(k tokKind, what string) (token, error) {
	t, err := p.peek()
	if err != nil {
		return token{}, err
	}
	if t.kind != k {
		return token{}, errorf(t.pos, "expected %s, found %s", what, t.describe())
	}
	return p.advance(), nil
}

func (p *parser) parseSelector() (Node, error) {
	n, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	t, err := p.peek()
	if err != nil {
		return nil, err
	}
	if t.kind != tokEOF {
		return nil, errorf(t.pos, "expected an operator (AND, OR, =, <>, <, <=, >, >=, IS, BETWEEN, IN, CONTAINS, STARTSWITH, ENDSWITH) or the end of the expression, found %s", t.describe())
	}
	return asBoolean(n)
}

// asBoolean is where RocketMQ needs a boolean: a property is read as one
// (RocketMQ's boolean cast), any other non-boolean operand is refused.
func asBoolean(n Node) (Node, error) {
	if isBooleanNode(n) {
		return n, nil
	}
	if _, ok := n.(*Property); ok {
		return n, nil
	}
	return nil, errorf(n.Pos(), "expected a condition, found %s, which is not a boolean value", n.String())
}

func (p *parser) parseOr() (Node, error) {
	x, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for {
		t, err := p.peek()
		if err != nil {
			return nil, err
		}
		if t.kind != tokOr {
			return x, nil
		}
		p.advance()
		y, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		if x, err = logical(OpOr, x, y); err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseAnd() (Node, error) {
	x, err := p.parseEquality()
	if err != nil {
		return nil, err
	}
	for {
		t, err := p.peek()
		if err != nil {
			return nil, err
		}
		if t.kind != tokAnd {
			return x, nil
		}
		p.advance()
		y, err := p.parseEquality()
		if err != nil {
			return nil, err
		}
		if x, err = logical(OpAnd, x, y); err != nil {
			return nil, err
		}
	}
}

func logical(op BinaryOp, x, y Node) (Node, error) {
	x, err := asBoolean(x)
	if err != nil {
		return nil, err
	}
	if y, err = asBoolean(y); err != nil {
		return nil, err
	}
	return &Binary{Op: op, X: x, Y: y, Offset: x.Pos()}, nil
}

func (p *parser) parseEquality() (Node, error) {
	x, err := p.parseComparison()
	if err != nil {
		return nil, err
	}
	for {
		t, err := p.peek()
		if err != nil {
			return nil, err
		}
		switch t.kind {
		case tokEq, tokNe:
			p.advance()
			y, err := p.parseComparison()
			if err != nil {
				return nil, err
			}
			if err := checkEqualOperands(x, y); err != nil {
				return nil, err
			}
			op := OpEq
			if t.kind == tokNe {
				op = OpNe
			}
			x = &Binary{Op: op, X: x, Y: y, Offset: x.Pos()}
		case tokIs:
			p.advance()
			t2, err := p.peek()
			if err != nil {
				return nil, err
			}
			not := false
			if t2.kind == tokNot {
				p.advance()
				not = true
			}
			if _, err := p.expect(tokNull, expectAfterIs(not)); err != nil {
				return nil, err
			}
			x = &IsNull{X: x, Not: not, Offset: x.Pos()}
		default:
			return x, nil
		}
	}
}

func expectAfterIs(not bool) string {
	if not {
		return "NULL after IS NOT"
	}
	return "NULL or NOT NULL after IS"
}

// checkEqualOperands: NULL cannot be compared with = or <> (IS NULL is the
// way), and a TRUE/FALSE literal cannot be compared with a literal of another
// type.
func checkEqualOperands(x, y Node) error {
	for _, n := range []Node{x, y} {
		if l, ok := n.(*Literal); ok && l.Kind == LitNull {
			return errorf(l.Offset, "NULL cannot be compared with = or <>, use IS NULL or IS NOT NULL")
		}
	}
	lx, okx := x.(*Literal)
	ly, oky := y.(*Literal)
	if okx && oky && lx.Kind == LitBool && ly.Kind != LitBool {
		return errorf(ly.Offset, "%s cannot be compared with %s", lx.String(), ly.String())
	}
	return nil
}

// checkOrderOperand: only numbers, properties and negations can be ordered.
func checkOrderOperand(n Node) error {
	if l, ok := n.(*Literal); ok {
		switch l.Kind {
		case LitInt, LitLong, LitDouble:
			return nil
		}
		return errorf(l.Offset, "expected a number or a property, found %s, which cannot be compared with <, <=, >, >= or BETWEEN", l.String())
	}
	if isBooleanNode(n) {
		return errorf(n.Pos(), "expected a number or a property, found the condition %s, which cannot be compared with <, <=, >, >= or BETWEEN", n.String())
	}
	return nil
}

func (p *parser) parseComparison() (Node, error) {
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for {
		t, err := p.peek()
		if err != nil {
			return nil, err
		}
		var op BinaryOp
		switch t.kind {
		case tokGt:
			op = OpGt
		case tokGe:
			op = OpGe
		case tokLt:
			op = OpLt
		case tokLe:
			op = OpLe
		}
		if op != 0 {
			p.advance()
			y, err := p.parseUnary()
			if err != nil {
				return nil, err
			}
			if err := checkOrderOperand(x); err != nil {
				return nil, err
			}
			if err := checkOrderOperand(y); err != nil {
				return nil, err
			}
			x = &Binary{Op: op, X: x, Y: y, Offset: x.Pos()}
			continue
		}
		not := false
		if t.kind == tokNot {
			t2, err := p.peekN(1)
			if err != nil {
				return nil, err
			}
			switch t2.kind {
			case tokContains, tokStartsWith, tokEndsWith, tokBetween, tokIn:
			default:
				return nil, errorf(t2.pos, "expected CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT, found %s", t2.describe())
			}
			p.advance()
			not = true
			t = p.buf[0]
		}
		switch t.kind {
		case tokContains, tokStartsWith, tokEndsWith:
			p.advance()
			s, err := p.parseStringLiteral("a string literal after " + t.kind.String())
			if err != nil {
				return nil, err
			}
			mop := OpContains
			switch t.kind {
			case tokStartsWith:
				mop = OpStartsWith
			case tokEndsWith:
				mop = OpEndsWith
			}
			x = &Match{Op: mop, X: x, Pattern: s, Not: not, Offset: x.Pos()}
		case tokBetween:
			p.advance()
			lo, err := p.parseUnary()
			if err != nil {
				return nil, err
			}
			if _, err := p.expect(tokAnd, "AND between the bounds of BETWEEN"); err != nil {
				return nil, err
			}
			hi, err := p.parseUnary()
			if err != nil {
				return nil, err
			}
			if err := checkBetween(x, lo, hi, not); err != nil {
				return nil, err
			}
			x = &Between{X: x, Lo: lo, Hi: hi, Not: not, Offset: x.Pos()}
		case tokIn:
			p.advance()
			if _, err := p.expect(tokLParen, `"(" after IN`); err != nil {
				return nil, err
			}
			var values []string
			for {
				s, err := p.parseStringLiteral("a string literal in the IN list")
				if err != nil {
					return nil, err
				}
				values = append(values, s)
				t, err := p.peek()
				if err != nil {
					return nil, err
				}
				if t.kind == tokComma {
					p.advance()
					continue
				}
				if _, err := p.expect(tokRParen, `"," or ")" in the IN list`); err != nil {
					return nil, err
				}
				break
			}
			prop, ok := x.(*Property)
			if !ok {
				return nil, errorf(x.Pos(), "expected a property before IN, found %s", x.String())
			}
			x = &In{X: prop, Values: values, Not: not, Offset: x.Pos()}
		default:
			return x, nil
		}
	}
}

// checkBetween applies RocketMQ's checks: every operand orderable and, for
// BETWEEN with two literal bounds, non-null bounds with low ≤ high.
func checkBetween(x, lo, hi Node, not bool) error {
	if !not {
		llo, ok1 := lo.(*Literal)
		lhi, ok2 := hi.(*Literal)
		if ok1 && ok2 {
			if llo.Kind == LitNull || lhi.Kind == LitNull {
				n := llo
				if n.Kind != LitNull {
					n = lhi
				}
				return errorf(n.Offset, "the bounds of BETWEEN cannot be NULL")
			}
			c, ok := compareValues(literalValue(lhi), literalValue(llo))
			if !ok || c < 0 {
				return errorf(llo.Offset, "the low bound of BETWEEN (%s) must be less than or equal to the high bound (%s)", llo.String(), lhi.String())
			}
		}
	}
	for _, n := range []Node{x, lo, hi} {
		if err := checkOrderOperand(n); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) parseStringLiteral(what string) (string, error) {
	t, err := p.expect(tokString, what)
	if err != nil {
		return "", err
	}
	return decodeString(t.text), nil
}

// decodeString strips the quotes and undoubles the quotes inside.
func decodeString(text string) string {
	body := text[1 : len(text)-1]
	for i := 0; i < len(body); i++ {
		if body[i] == '\'' {
			b := make([]byte, 0, len(body))
			for j := 0; j < len(body); j++ {
				b = append(b, body[j])
				if body[j] == '\'' {
					j++
				}
			}
			return string(b)
		}
	}
	return body
}

func (p *parser) parseUnary() (Node, error) {
	p.depth++
	defer func() { p.depth-- }()
	t, err := p.peek()
	if err != nil {
		return nil, err
	}
	if p.depth > MaxDepth {
		return nil, errorf(t.pos, "expression nested deeper than %d levels", MaxDepth)
	}
	switch t.kind {
	case tokPlus:
		p.advance()
		return p.parseUnary()
	case tokMinus:
		p.advance()
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return &Unary{Op: OpNeg, X: x, Offset: t.pos}, nil
	case tokNot:
		p.advance()
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		if x, err = asBoolean(x); err != nil {
			return nil, err
		}
		return &Unary{Op: OpNot, X: x, Offset: t.pos}, nil
	}
	return p.parsePrimary()
}

func (p *parser) parsePrimary() (Node, error) {
	t, err := p.peek()
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case tokString:
		p.advance()
		return &Literal{Kind: LitString, Str: decodeString(t.text), Offset: t.pos}, nil
	case tokInteger:
		p.advance()
		return integerLiteral(t)
	case tokFloat:
		p.advance()
		return floatLiteral(t)
	case tokTrue, tokFalse:
		p.advance()
		return &Literal{Kind: LitBool, Bool: t.kind == tokTrue, Offset: t.pos}, nil
	case tokNull:
		p.advance()
		return &Literal{Kind: LitNull, Offset: t.pos}, nil
	case tokIdent:
		p.advance()
		return &Property{Name: t.text, Offset: t.pos}, nil
	case tokLParen:
		p.advance()
		x, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tokRParen, `")"`); err != nil {
			return nil, err
		}
		return x, nil
	}
	return nil, errorf(t.pos, "expected a property, a literal, \"(\", NOT, \"+\" or \"-\", found %s", t.describe())
}

// integerLiteral is RocketMQ's createFromDecimal: an optional l/L suffix is
// dropped, the value must fit a Java long, and it is an int when it fits one.
func integerLiteral(t token) (Node, error) {
	text := t.text
	if n := len(text); text[n-1] == 'l' || text[n-1] == 'L' {
		text = text[:n-1]
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return nil, errorf(t.pos, "integer literal %s does not fit 64 bits", shorten(t.text))
	}
	kind := LitLong
	if v <= 1<<31-1 {
		kind = LitInt
	}
	return &Literal{Kind: kind, Int: v, Offset: t.pos}, nil
}

// floatLiteral is RocketMQ's createFloat: a Java double, refused when it
// overflows to infinity. RocketMQ also refuses a literal below
// Double.MIN_VALUE, which by accident refuses 0.0; Bolide accepts zero
// (see doc.go).
func floatLiteral(t token) (Node, error) {
	v, ok := parseJavaDouble(t.text)
	if !ok {
		return nil, errorf(t.pos, "invalid decimal literal %s", shorten(t.text))
	}
	if v > 1.7976931348623157e308 {
		return nil, errorf(t.pos, "decimal literal %s is greater than the largest double", shorten(t.text))
	}
	return &Literal{Kind: LitDouble, Double: v, Offset: t.pos}, nil
}
