package filter

import (
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// The functions in this file reproduce how the JVM turns a property string
// into a number or a boolean (Integer.valueOf, Long.valueOf, Double.valueOf,
// Boolean.valueOf) and how it orders doubles (Double.compare), because
// RocketMQ's filter compares a property with a literal by converting the
// property to the literal's Java type. None of them allocates.

// parseJavaInt parses s the way Integer.parseInt (bits 32) or Long.parseLong
// (bits 64) does: an optional '+' or '-', then one or more decimal digits of
// any script (a BMP character of Unicode category Nd), no spaces, no suffix.
func parseJavaInt(s string, bits int) (int64, bool) {
	if s == "" {
		return 0, false
	}
	neg := false
	i := 0
	switch s[0] {
	case '-':
		neg = true
		i = 1
	case '+':
		i = 1
	}
	if i == len(s) {
		return 0, false
	}
	limit := uint64(math.MaxInt64)
	if bits == 32 {
		limit = math.MaxInt32
	}
	if neg {
		limit++
	}
	var acc uint64
	for i < len(s) {
		var d int
		if c := s[i]; c < utf8.RuneSelf {
			if c < '0' || c > '9' {
				return 0, false
			}
			d = int(c - '0')
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			d = javaDigit(r)
			if d < 0 {
				return 0, false
			}
			i += size
		}
		if acc > (limit-uint64(d))/10 {
			return 0, false
		}
		acc = acc*10 + uint64(d)
	}
	if neg {
		return int64(-acc), true // acc ≤ 1<<63: the negation wraps to MinInt64 exactly
	}
	return int64(acc), true
}

// javaDigit is Character.digit(ch, 10) for a non-ASCII rune: the value of a
// decimal digit of category Nd in the Basic Multilingual Plane, else -1. A
// Java char is one UTF-16 unit, so digits outside the BMP (surrogate pairs)
// are not digits to Integer.parseInt. Unicode allocates Nd digits in runs of
// ten starting at zero, so the value is the distance from the range start
// modulo ten.
func javaDigit(r rune) int {
	if r > 0xFFFF || r == utf8.RuneError {
		return -1
	}
	for _, rg := range unicode.Nd.R16 {
		if uint16(r) < rg.Lo {
			return -1
		}
		if uint16(r) <= rg.Hi {
			if rg.Stride != 1 {
				return -1
			}
			return int(uint16(r)-rg.Lo) % 10
		}
	}
	return -1
}

// parseJavaDouble parses s the way Double.valueOf does: surrounding
// characters ≤ U+0020 are trimmed; then an optional sign and either "NaN",
// "Infinity", a decimal number (digits with an optional point, at least one
// digit, an optional exponent) or a hexadecimal one (0x, hex digits with an
// optional point, a mandatory binary exponent p±n), each optionally followed
// by one of f F d D.
func parseJavaDouble(s string) (float64, bool) {
	lo, hi := 0, len(s)
	for lo < hi && s[lo] <= ' ' {
		lo++
	}
	for hi > lo && s[hi-1] <= ' ' {
		hi--
	}
	s = s[lo:hi]
	if s == "" {
		return 0, false
	}
	i := 0
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		i = 1
	}
	rest := s[i:]
	switch rest {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	body := len(s)
	if n := len(s); n > i && (s[n-1] == 'f' || s[n-1] == 'F' || s[n-1] == 'd' || s[n-1] == 'D') {
		body = n - 1
	}
	if len(rest) >= 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X') {
		if !validJavaHexFloat(s[i+2 : body]) {
			return 0, false
		}
	} else if !validJavaDecimalFloat(s[i:body]) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s[:body], 64)
	if err != nil {
		// Only a range error gets here (the syntax was checked): Go gives
		// ±Inf or ±0 as Java does.
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	return f, true
}

// validJavaDecimalFloat: digits [ '.' digits ] [ e|E [+|-] digits ], at least
// one mantissa digit, at least one exponent digit when there is an exponent.
func validJavaDecimalFloat(s string) bool {
	i, digits := 0, 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

// validJavaHexFloat checks what follows "0x": hex digits [ '.' hex digits ]
// (at least one digit) then p|P [+|-] decimal digits.
func validJavaHexFloat(s string) bool {
	i, digits := 0, 0
	for i < len(s) && isHexDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isHexDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 || i == len(s) || (s[i] != 'p' && s[i] != 'P') {
		return false
	}
	i++
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i > start && i == len(s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHexDigit(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// javaBool is Boolean.valueOf(s): true only for "true" in any letter case.
func javaBool(s string) bool {
	return len(s) == 4 &&
		s[0]|0x20 == 't' && s[1]|0x20 == 'r' && s[2]|0x20 == 'u' && s[3]|0x20 == 'e'
}

// compareDouble is Double.compare: a total order where -0.0 < 0.0 and NaN is
// equal to itself and greater than everything else, +Inf included.
func compareDouble(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	// a == b numerically; only the zeros' signs can still differ.
	as, bs := math.Signbit(a), math.Signbit(b)
	switch {
	case as == bs:
		return 0
	case as:
		return -1
	default:
		return 1
	}
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
