package filter

import (
	"strings"
)

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tokEOF tokKind = iota
	tokIdent
	tokString  // 'text' with '' for a quote
	tokInteger // DECIMAL_LITERAL: 0 | [1-9][0-9]*[lL]?
	tokFloat   // FLOATING_POINT_LITERAL
	tokEq      // =
	tokNe      // <>
	tokGt      // >
	tokGe      // >=
	tokLt      // <
	tokLe      // <=
	tokLParen
	tokRParen
	tokComma
	tokPlus
	tokMinus
	// keywords, matched without regard to letter case
	tokNot
	tokAnd
	tokOr
	tokBetween
	tokIn
	tokTrue
	tokFalse
	tokNull
	tokIs
	tokContains
	tokStartsWith
	tokEndsWith
)

var keywords = [...]struct {
	word string
	kind tokKind
}{
	{"NOT", tokNot}, {"AND", tokAnd}, {"OR", tokOr}, {"BETWEEN", tokBetween},
	{"IN", tokIn}, {"TRUE", tokTrue}, {"FALSE", tokFalse}, {"NULL", tokNull},
	{"IS", tokIs}, {"CONTAINS", tokContains}, {"STARTSWITH", tokStartsWith},
	{"ENDSWITH", tokEndsWith},
}

var tokNames = [...]string{
	tokEOF: "end of expression", tokIdent: "property name", tokString: "string literal",
	tokInteger: "integer literal", tokFloat: "decimal literal",
	tokEq: `"="`, tokNe: `"<>"`, tokGt: `">"`, tokGe: `">="`, tokLt: `"<"`, tokLe: `"<="`,
	tokLParen: `"("`, tokRParen: `")"`, tokComma: `","`, tokPlus: `"+"`, tokMinus: `"-"`,
	tokNot: "NOT", tokAnd: "AND", tokOr: "OR", tokBetween: "BETWEEN", tokIn: "IN",
	tokTrue: "TRUE", tokFalse: "FALSE", tokNull: "NULL", tokIs: "IS",
	tokContains: "CONTAINS", tokStartsWith: "STARTSWITH", tokEndsWith: "ENDSWITH",
}

func (k tokKind) String() string { return tokNames[k] }

// token is one lexical token; text is the source slice it came from.
type token struct {
	kind tokKind
	pos  int // byte offset of the first character
	text string
}

// describe names a token for an error message: its kind and its text.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of expression"
	case tokIdent, tokInteger, tokFloat:
		return t.kind.String() + " " + quoteShort(t.text)
	case tokString:
		return "string literal " + shorten(t.text)
	default:
		return t.kind.String()
	}
}

func quoteShort(s string) string { return `"` + shorten(s) + `"` }

func shorten(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// lexer splits an expression into tokens the way RocketMQ's JavaCC token
// manager does: longest match, keywords before identifiers of the same
// length, white space " \t\n\r\f", "--" comments ended by a line break and
// "/* */" comments skipped.
type lexer struct {
	src string
	pos int
}

// next returns the next token or a syntax error for a character no token can
// start with.
func (lx *lexer) next() (token, error) {
	if err := lx.skip(); err != nil {
		return token{}, err
	}
	s, start := lx.src, lx.pos
	if start >= len(s) {
		return token{kind: tokEOF, pos: start}, nil
	}
	c := s[start]
	one := func(k tokKind) (token, error) {
		lx.pos++
		return token{kind: k, pos: start, text: s[start:lx.pos]}, nil
	}
	two := func(k tokKind) (token, error) {
		lx.pos += 2
		return token{kind: k, pos: start, text: s[start:lx.pos]}, nil
	}
	next := byte(0)
	if start+1 < len(s) {
		next = s[start+1]
	}
	switch {
	case c == '=':
		return one(tokEq)
	case c == '<':
		switch next {
		case '>':
			return two(tokNe)
		case '=':
			return two(tokLe)
		}
		return one(tokLt)
	case c == '>':
		if next == '=' {
			return two(tokGe)
		}
		return one(tokGt)
	case c == '(':
		return one(tokLParen)
	case c == ')':
		return one(tokRParen)
	case c == ',':
		return one(tokComma)
	case c == '+':
		return one(tokPlus)
	case c == '-':
		return one(tokMinus)
	case c == '\'':
		return lx.stringLit()
	case isDigit(c) || (c == '.' && isDigit(next)):
		return lx.number()
	case isIdentStart(c):
		i := start + 1
		for i < len(s) && isIdentPart(s[i]) {
			i++
		}
		lx.pos = i
		word := s[start:i]
		for _, kw := range keywords {
			if strings.EqualFold(word, kw.word) {
				return token{kind: kw.kind, pos: start, text: word}, nil
			}
		}
		return token{kind: tokIdent, pos: start, text: word}, nil
	}
	if c == '!' && next == '=' {
		return token{}, errorf(start, `"!=" is not an operator here, use "<>"`)
	}
	return token{}, errorf(start, "unexpected character %q", runeAt(s, start))
}

// skip passes white space and comments.
func (lx *lexer) skip() error {
	s := lx.src
	for lx.pos < len(s) {
		switch c := s[lx.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			lx.pos++
		case c == '-' && strings.HasPrefix(s[lx.pos:], "--"):
			// A line comment must end with a line break; at the end of the
			// input "--" is two minus signs, as in RocketMQ's grammar.
			nl := strings.IndexAny(s[lx.pos+2:], "\n\r")
			if nl < 0 {
				return nil
			}
			lx.pos += 2 + nl + 1
		case c == '/' && strings.HasPrefix(s[lx.pos:], "/*"):
			end := strings.Index(s[lx.pos+2:], "*/")
			if end < 0 {
				return errorf(lx.pos, `unterminated comment: expected "*/"`)
			}
			lx.pos += 2 + end + 2
		default:
			return nil
		}
	}
	return nil
}

func (lx *lexer) stringLit() (token, error) {
	s, start := lx.src, lx.pos
	i, end := start+1, -1
	for {
		q := strings.IndexByte(s[i:], '\'')
		if q < 0 {
			break
		}
		i += q + 1
		end = i // the literal can end here ...
		if i < len(s) && s[i] == '\'' {
			i++ // ... or go on, '' standing for one quote
			continue
		}
		break
	}
	if end < 0 {
		return token{}, errorf(start, "unterminated string literal: expected a closing quote")
	}
	// Longest complete match, as a generated lexer does: in 'ab'' with
	// nothing after, the literal is 'ab' and a lone quote follows.
	i = end
	lx.pos = i
	return token{kind: tokString, pos: start, text: s[start:i]}, nil
}

// number scans DECIMAL_LITERAL or FLOATING_POINT_LITERAL, whichever is
// longer:
//
//	DECIMAL  0 | [1-9][0-9]*[lL]?
//	FLOAT    [0-9]+ "." [0-9]* EXP? | "." [0-9]+ EXP? | [0-9]+ EXP
//	EXP      [eE][+-]?[0-9]+
func (lx *lexer) number() (token, error) {
	s, start := lx.src, lx.pos
	digitsEnd := func(i int) int {
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		return i
	}
	expEnd := func(i int) int { // end of EXP at i, or i when there is none
		j := i
		if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
			j++
			if j < len(s) && (s[j] == '+' || s[j] == '-') {
				j++
			}
			if k := digitsEnd(j); k > j {
				return k
			}
		}
		return i
	}
	// Longest FLOAT.
	floatEnd := -1
	intEnd := digitsEnd(start)
	if intEnd < len(s) && s[intEnd] == '.' {
		floatEnd = expEnd(digitsEnd(intEnd + 1)) // covers ".5" too (intEnd == start)
	} else if e := expEnd(intEnd); e > intEnd {
		floatEnd = e
	}
	// Longest DECIMAL.
	decEnd := -1
	if s[start] == '0' {
		decEnd = start + 1
	} else if s[start] != '.' {
		decEnd = intEnd
		if decEnd < len(s) && (s[decEnd] == 'l' || s[decEnd] == 'L') {
			decEnd++
		}
	}
	if floatEnd > decEnd {
		lx.pos = floatEnd
		return token{kind: tokFloat, pos: start, text: s[start:floatEnd]}, nil
	}
	lx.pos = decEnd
	return token{kind: tokInteger, pos: start, text: s[start:decEnd]}, nil
}

func isIdentStart(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }

func runeAt(s string, i int) rune {
	for _, r := range s[i:] {
		return r
	}
	return 0
}
