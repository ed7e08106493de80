package filter

import (
	"strconv"
	"strings"
)

// Node is a node of the syntax tree Parse returns. Parentheses leave no node
// of their own (as in RocketMQ, where "(a)" is the property a itself).
type Node interface {
	// Pos is the byte offset in the source where the node starts.
	Pos() int
	// String renders the node back to an expression that parses to the same
	// tree; every operator is parenthesised.
	String() string
	node()
}

// Property is a message property read by name (case-sensitive). TAGS is the
// message's tag.
type Property struct {
	Name   string
	Offset int
}

// LitKind is the type of a literal, with Java's types for numbers: an integer
// literal that fits 32 bits is an Int, a larger one a Long.
type LitKind uint8

// Literal kinds.
const (
	LitString LitKind = iota + 1
	LitInt
	LitLong
	LitDouble
	LitBool
	LitNull
)

// Literal is a constant.
type Literal struct {
	Kind   LitKind
	Str    string  // LitString: the decoded text
	Int    int64   // LitInt, LitLong
	Double float64 // LitDouble
	Bool   bool    // LitBool
	Offset int
}

// UnaryOp is a prefix operator.
type UnaryOp uint8

// Prefix operators.
const (
	OpNeg UnaryOp = iota + 1 // -x
	OpNot                    // NOT x
)

// Unary is -x or NOT x. A unary plus leaves no node.
type Unary struct {
	Op     UnaryOp
	X      Node
	Offset int
}

// BinaryOp is an infix operator.
type BinaryOp uint8

// Infix operators.
const (
	OpOr BinaryOp = iota + 1
	OpAnd
	OpEq // =
	OpNe // <>
	OpGt // >
	OpGe // >=
	OpLt // <
	OpLe // <=
)

var binaryText = [...]string{OpOr: "OR", OpAnd: "AND", OpEq: "=", OpNe: "<>", OpGt: ">", OpGe: ">=", OpLt: "<", OpLe: "<="}

func (op BinaryOp) String() string { return binaryText[op] }

// Binary is x op y.
type Binary struct {
	Op     BinaryOp
	X, Y   Node
	Offset int
}

// IsNull is x IS [NOT] NULL.
type IsNull struct {
	X      Node
	Not    bool
	Offset int
}

// Between is x [NOT] BETWEEN lo AND hi.
type Between struct {
	X, Lo, Hi Node
	Not       bool
	Offset    int
}

// In is property [NOT] IN ('v1', 'v2', ...).
type In struct {
	X      *Property
	Values []string
	Not    bool
	Offset int
}

// MatchOp is a string-matching operator of RocketMQ 5.
type MatchOp uint8

// String-matching operators.
const (
	OpContains MatchOp = iota + 1
	OpStartsWith
	OpEndsWith
)

var matchText = [...]string{OpContains: "CONTAINS", OpStartsWith: "STARTSWITH", OpEndsWith: "ENDSWITH"}

func (op MatchOp) String() string { return matchText[op] }

// Match is x [NOT] CONTAINS|STARTSWITH|ENDSWITH 'text'.
type Match struct {
	Op      MatchOp
	X       Node
	Pattern string
	Not     bool
	Offset  int
}

// Pos implementations.
func (n *Property) Pos() int { return n.Offset }
func (n *Literal) Pos() int  { return n.Offset }
func (n *Unary) Pos() int    { return n.Offset }
func (n *Binary) Pos() int   { return n.Offset }
func (n *IsNull) Pos() int   { return n.Offset }
func (n *Between) Pos() int  { return n.Offset }
func (n *In) Pos() int       { return n.Offset }
func (n *Match) Pos() int    { return n.Offset }

func (*Property) node() {}
func (*Literal) node()  {}
func (*Unary) node()    {}
func (*Binary) node()   {}
func (*IsNull) node()   {}
func (*Between) node()  {}
func (*In) node()       {}
func (*Match) node()    {}

func (n *Property) String() string { return n.Name }

func (n *Literal) String() string {
	switch n.Kind {
	case LitString:
		return quoteString(n.Str)
	case LitInt, LitLong:
		return strconv.FormatInt(n.Int, 10)
	case LitDouble:
		s := strconv.FormatFloat(n.Double, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	case LitBool:
		if n.Bool {
			return "TRUE"
		}
		return "FALSE"
	default:
		return "NULL"
	}
}

func (n *Unary) String() string {
	if n.Op == OpNeg {
		return "(-" + n.X.String() + ")"
	}
	return "(NOT " + n.X.String() + ")"
}

func (n *Binary) String() string {
	return "(" + n.X.String() + " " + n.Op.String() + " " + n.Y.String() + ")"
}

func (n *IsNull) String() string {
	if n.Not {
		return "(" + n.X.String() + " IS NOT NULL)"
	}
	return "(" + n.X.String() + " IS NULL)"
}

func (n *Between) String() string {
	not := ""
	if n.Not {
		not = "NOT "
	}
	return "(" + n.X.String() + " " + not + "BETWEEN " + n.Lo.String() + " AND " + n.Hi.String() + ")"
}

func (n *In) String() string {
	var b strings.Builder
	b.WriteString("(")
	b.WriteString(n.X.Name)
	if n.Not {
		b.WriteString(" NOT")
	}
	b.WriteString(" IN (")
	for i, v := range n.Values {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteString(v))
	}
	b.WriteString("))")
	return b.String()
}

func (n *Match) String() string {
	not := ""
	if n.Not {
		not = "NOT "
	}
	return "(" + n.X.String() + " " + not + n.Op.String() + " " + quoteString(n.Pattern) + ")"
}

// quoteString renders s as a string literal: in single quotes, a quote
// doubled.
func quoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// isBooleanNode reports whether n always yields a boolean (or unknown): what
// RocketMQ calls a BooleanExpression. TRUE, FALSE and NULL literals are;
// other literals, properties and negations are not.
func isBooleanNode(n Node) bool {
	switch n := n.(type) {
	case *Literal:
		return n.Kind == LitBool || n.Kind == LitNull
	case *Unary:
		return n.Op == OpNot
	case *Property:
		return false
	default:
		return true
	}
}
