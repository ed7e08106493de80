package filter

import (
	"errors"
	"strings"
	"testing"
)

type evalCase struct {
	expr  string
	props map[string]string
	want  bool
}

func kv(pairs ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

// tableCases are cases from Apache RocketMQ's filter tests
// (filter/src/test/java/org/apache/rocketmq/filter/ExpressionTest.java; the
// comment names the test method), then the corners of the semantics the
// tests leave out, each checked against RocketMQ's filter module itself
// (TestAgainstRocketMQ runs them all through it). RocketMQ's tests also pass
// Integer, Double, Boolean and Object property values; a broker only ever
// has strings, so those variants use the string forms the tests also carry
// or are left out where a string behaves differently (NOT CONTAINS on a
// Double is FALSE, on its string TRUE).
func tableCases() []evalCase {
	const (
		andExpr     = "a=3 and b<>4 And c>5 AND d<=4"
		orExpr      = "a=3 or b<>4 Or c>5 OR d<=4"
		inExpr      = "a in ('3', '4', '5')"
		notInExpr   = "a not in ('3', '4', '5')"
		betweenExpr = "a between 2 and 10"
		notBetween  = "a not between 2 and 10"
		isNull      = "a is null"
		isNotNull   = "a is not null"
		equalExpr   = "a is not null and a='hello'"
		boolExpr    = "a=TRUE OR b=FALSE"
		nullOrExpr  = "a is null OR a='hello'"
		stringHas   = "TAGS is not null and TAGS='''''tag'''''"
	)
	return []evalCase{
		// testContains_StartsWith_EndsWith_has
		{"value contains 'x'", kv("value", "axb"), true},
		{"value startswith 'ax'", kv("value", "axb"), true},
		{"value endswith 'xb'", kv("value", "axb"), true},
		// test_notContains_notStartsWith_notEndsWith_has
		{"value not contains 'x'", kv("value", "axb"), false},
		{"value not startswith 'ax'", kv("value", "axb"), false},
		{"value not endswith 'xb'", kv("value", "axb"), false},
		// testContains_StartsWith_EndsWith_has_not
		{"value contains 'x'", kv("value", "abb"), false},
		{"value startswith 'x'", kv("value", "abb"), false},
		{"value endswith 'x'", kv("value", "abb"), false},
		// test_notContains_notStartsWith_notEndsWith_has_not
		{"value not contains 'x'", kv("value", "abb"), true},
		{"value not startswith 'x'", kv("value", "abb"), true},
		{"value not endswith 'x'", kv("value", "abb"), true},
		// testContains_StartsWith_EndsWith_hasEmpty: an empty pattern never matches
		{"value contains ''", kv("value", "axb"), false},
		{"value startswith ''", kv("value", "axb"), false},
		{"value endswith ''", kv("value", "axb"), false},
		// test_notContains_notStartsWith_notEndsWith_hasEmpty: ... negated neither
		{"value not contains ''", kv("value", "axb"), false},
		{"value not startswith ''", kv("value", "axb"), false},
		{"value not endswith ''", kv("value", "axb"), false},
		// testContains_StartsWith_EndsWith_null_has_2: missing property
		{"value contains 'x'", nil, false},
		{"value startswith 'x'", nil, false},
		{"value endswith 'x'", nil, false},
		// test_notContains_notStartsWith_notEndsWith_null_has_2
		{"value not contains 'x'", nil, false},
		{"value not startswith 'x'", nil, false},
		{"value not endswith 'x'", nil, false},
		// testContains_StartsWith_EndsWith_number_has (value 1.23)
		{"value contains 'x'", kv("value", "1.23"), false},
		{"value startswith 'x'", kv("value", "1.23"), false},
		{"value endswith 'x'", kv("value", "1.23"), false},
		// testContains_StartsWith_EndsWith_boolean_has (value TRUE)
		{"value contains 'x'", kv("value", "true"), false},
		// testContains_StartsWith_EndsWith_string_has_string
		{"'axb' contains 'x'", nil, true},
		{"'axb' startswith 'ax'", nil, true},
		{"'axb' endswith 'xb'", nil, true},
		// test_notContains_notStartsWith_notEndsWith_string_has_string
		{"'axb' not contains 'x'", nil, false},
		{"'axb' not startswith 'ax'", nil, false},
		{"'axb' not endswith 'xb'", nil, false},
		// testContains_startsWith_endsWith_string_has_not_string
		{"'axb' contains 'u'", nil, false},
		{"'axb' startswith 'u'", nil, false},
		{"'axb' endswith 'u'", nil, false},
		// test_notContains_notStartsWith_notEndsWith_string_has_not_string
		{"'axb' not contains 'u'", nil, true},
		{"'axb' not startswith 'u'", nil, true},
		{"'axb' not endswith 'u'", nil, true},
		// testContains_StartsWith_EndsWith_string_has_empty
		{"'axb' contains ''", nil, false},
		{"'axb' not contains ''", nil, false},
		// testContains_StartsWith_EndsWith_string_has_space
		{"' ' contains ' '", nil, true},
		{"' ' startswith ' '", nil, true},
		{"' ' endswith ' '", nil, true},
		{"' ' not contains ' '", nil, false},
		// testContains_StartsWith_EndsWith_string_has_special_1
		{"'axb' contains '.'", nil, false},
		{"'axb' not contains '.'", nil, true},
		// testContains_StartsWith_EndsWith_string_has_special_2
		{`'s' contains '\'`, nil, false},
		{`'s' startswith '\'`, nil, false},
		{`'s' endswith '\'`, nil, false},
		// testContainsAllInOne and friends (b was the Integer 3; "3" behaves alike)
		{"a not in ('4', '4', '5') and b between 3 and 10 and c not contains 'axbc'", kv("a", "3", "b", "3", "c", "axbdc"), true},
		{"a not in ('4', '4', '5') and b between 3 and 10 and c not startswith 'axbc'", kv("a", "3", "b", "3", "c", "axbdc"), true},
		{"a not in ('4', '4', '5') and b between 3 and 10 and c not endswith 'axbc'", kv("a", "3", "b", "3", "c", "axbdc"), true},
		// testEvaluate_stringHasString: '' is a quote
		{stringHas, kv("TAGS", "''tag''"), true},
		// testEvaluate_stringCompare: strings that are not numbers are not ordered
		{"a between up and low", kv("a", "3.14"), false},
		{"a between up and low", kv("a", "3.14", "up", "up", "low", "low"), false},
		{"key is not null and key between 0 and 100", kv("key", "con"), false},
		{"a between 0 and 100", kv("a", "abc"), false},
		{"a=b", kv("a", "3.14", "b", "3.14"), true},
		{"a<>b", kv("a", "3.14", "b", "3.14"), false},
		{"a<>b", kv("a", "3.14", "b", "3.141"), true},
		// testEvaluate_exponent
		{"a > 3.1E10", kv("a", "3.1415E10"), true},
		// testEvaluate_floatNumber
		{"a > 3.14", kv("a", "3.1415"), true},
		// testEvaluate_twoVariable, testEvaluate_twoVariableGt: two numeric strings compare as numbers
		{"a > b", kv("a", "10", "b", "20"), false},
		{"a > b", kv("a", "20", "b", "10"), true},
		// testEvaluate_nullOr
		{nullOrExpr, nil, true},
		{nullOrExpr, kv("a", "hello"), true},
		{nullOrExpr, kv("a", "abc"), false},
		// testEvaluate_boolean: a string property equals TRUE when it is "true" in any case, FALSE otherwise
		{boolExpr, kv("a", "true", "b", "false"), true},
		{boolExpr, kv("a", "false", "b", "true"), false},
		// testEvaluate_equal
		{equalExpr, kv("a", "hello"), true},
		{equalExpr, nil, false},
		// testEvaluate_andTrue, testEvaluate_andFalse ("use string")
		{andExpr, kv("a", "3", "b", "5", "c", "6", "d", "1"), true},
		{andExpr, kv("a", "4", "b", "5", "c", "6", "d", "1"), false},
		// testEvaluate_orTrue, testEvaluate_orFalse (string forms of the Integers)
		{orExpr, kv("a", "3"), true},
		{orExpr, kv("a", "4", "b", "5"), true},
		{orExpr, kv("a", "4", "b", "4", "c", "6"), true},
		{orExpr, kv("a", "4", "b", "4", "c", "3", "d", "2"), true},
		{orExpr, kv("a", "4", "b", "4", "c", "3", "d", "10"), false},
		// testEvaluate_inTrue, testEvaluate_inFalse
		{inExpr, kv("a", "3"), true},
		{inExpr, kv("a", "4"), true},
		{inExpr, kv("a", "5"), true},
		{inExpr, kv("a", "8"), false},
		// testEvaluate_notInTrue, testEvaluate_notInFalse
		{notInExpr, kv("a", "8"), true},
		{notInExpr, kv("a", "3"), false},
		{notInExpr, kv("a", "4"), false},
		{notInExpr, kv("a", "5"), false},
		// testEvaluate_betweenTrue, testEvaluate_betweenFalse
		{betweenExpr, kv("a", "2"), true},
		{betweenExpr, kv("a", "10"), true},
		{betweenExpr, kv("a", "3"), true},
		{betweenExpr, kv("a", "1"), false},
		{betweenExpr, kv("a", "11"), false},
		// testEvaluate_notBetweenTrue, testEvaluate_notBetweenFalse
		{notBetween, kv("a", "1"), true},
		{notBetween, kv("a", "11"), true},
		{notBetween, kv("a", "2"), false},
		{notBetween, kv("a", "10"), false},
		{notBetween, kv("a", "3"), false},
		// testEvaluate_isNullTrue, testEvaluate_isNullFalse
		{isNull, kv("abc", "2"), true},
		{isNull, kv("a", "2"), false},
		// testEvaluate_isNotNullTrue, testEvaluate_isNotNullFalse
		{isNotNull, kv("a", "2"), true},
		{isNotNull, kv("abc", "2"), false},
		// ParserTest.testParse_valid: "a <= now" — now is a property
		{"a <= now", kv("a", "1", "now", "2"), true},

		// Beyond RocketMQ's tests: missing properties (three-valued logic).
		{"a > 1", nil, false},
		{"NOT (a > 1)", nil, false}, // NOT unknown is unknown
		{"NOT (a > 1)", kv("a", "0"), true},
		{"a <> 'x'", nil, false},       // a missing property never satisfies <>
		{"a = 'x' OR TRUE", nil, true}, // unknown OR TRUE
		{"a = 'x' AND FALSE", nil, false},
		{"NOT (a = 'x' AND TRUE)", nil, false},
		{"a NOT IN ('x')", nil, false},
		{"NOT (a IN ('x'))", nil, false},
		{"NOT (a CONTAINS 'x')", nil, true}, // CONTAINS is FALSE, not unknown, on a missing property
		{"a IS NULL", kv("a", ""), false},   // an empty value is present
		{"a = b", nil, true},                // both missing: equal (RocketMQ compares null with null)
		{"a = b", kv("a", "1"), false},      // right missing: FALSE ...
		{"a <> b", kv("a", "1"), true},      // ... so <> is TRUE
		{"a <> b", kv("b", "1"), false},     // left missing: unknown
		{"a", kv("a", "true"), false},       // a bare property is never TRUE
		{"NOT a", kv("a", "x"), true},       // ... but NOT of it is, when present
		{"NOT a", nil, false},
		// Type mismatches: the property is converted to the literal's type; a failed
		// conversion aborts the whole expression (no match), even under OR.
		{"a > 5", kv("a", "10"), true},
		{"a > 5", kv("a", "10.5"), false},       // not an int: error
		{"a > 5.0", kv("a", "10"), true},        // a double literal parses doubles
		{"a > 5", kv("a", "3000000000"), false}, // overflows an int: error
		{"a > 3000000000", kv("a", "4000000000"), true},
		{"a > 5 OR b = 'x'", kv("a", "abc", "b", "x"), false}, // the error wins
		{"b = 'x' OR a > 5", kv("a", "abc", "b", "x"), true},  // ... unless OR stopped before it
		{"a = 5", kv("a", "abc"), false},
		{"NOT (a = 5)", kv("a", "abc"), false},
		{"a = 5", kv("a", "+5"), true},
		{"a > 5", kv("a", " 10"), false},   // Integer.valueOf does not trim
		{"a > 5.0", kv("a", " 10 "), true}, // Double.valueOf does
		{"a > 5.0", kv("a", "NaN"), true},  // NaN orders above everything
		{"a = 5.0", kv("a", "5d"), true},
		{"a = 8.0", kv("a", "0x1p3"), true},
		{"a = 3", kv("a", "\u0663"), true}, // Arabic-Indic three
		{"a = 'x'", kv("a", "X"), false},
		{"a = TRUE", kv("a", "TrUe"), true},
		{"a = FALSE", kv("a", "yes"), true},
		{"TRUE = a", kv("a", "true"), false}, // boolean vs string the other way round: error
		{"'5' = 5", nil, true},
		{"5 = '5.0'", nil, false}, // Integer.valueOf("5.0") fails
		{"a > -5", kv("a", "-4"), true},
		{"-a > 5", kv("a", "-10"), false}, // negating a string gives null
		{"1 = 1.0", nil, true},
		{"a BETWEEN -5 AND -1", kv("a", "-3"), true},
		{"a NOT BETWEEN 10 AND 0", kv("a", "5"), true}, // no bound check for NOT BETWEEN
		{"a IN ('1')", kv("a", "1.0"), false},          // IN compares strings
		// Precedence: NOT binds tighter than comparisons, = and <> looser than < and >.
		{"NOT a = 'x'", kv("a", "y"), false}, // (NOT a) = 'x': boolean vs string, an error
		{"a > 1 = TRUE", kv("a", "2"), true},
		{"a = 1 OR b = 1 AND c = 1", kv("a", "1"), true},
		{"(a = 1 OR b = 1) AND c = 1", kv("a", "1"), false},
		{"TAGS = 'paid' AND amount >= 100", kv("TAGS", "paid", "amount", "100"), true},
	}
}

func TestEvaluateTable(t *testing.T) {
	for _, c := range tableCases() {
		e, err := Compile(c.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", c.expr, err)
			continue
		}
		if got := e.Evaluate(mapLookup(c.props)); got != c.want {
			t.Errorf("%q with %v = %v, want %v", c.expr, c.props, got, c.want)
		}
		ref := newExpression(c.expr, mustParse(t, c.expr), false)
		if got := ref.Evaluate(mapLookup(c.props)); got != c.want {
			t.Errorf("unoptimised %q with %v = %v, want %v", c.expr, c.props, got, c.want)
		}
	}
}

func mustParse(t testing.TB, s string) Node {
	t.Helper()
	n, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return n
}

// TestParseValid: ParserTest.testParse_valid and expressions around it.
func TestParseValid(t *testing.T) {
	for _, s := range []string{
		"a=3 and b<>4 And c>5 AND d<=4",
		"a=3 or b<>4 Or c>5 OR d<=4",
		"a in ('3', '4', '5')",
		"(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
		"(a between 2 and 10) AND (b not between 6 and 9)",
		"a is null",
		"a is not null",
		"a <= now",
		"a=3 and b contains 'xxx' and c not contains 'xxx'",
		"TRUE", "NULL", "a", "NOT a", "(a)", "(a) IN ('x')",
		"a = 1 = TRUE", "a > -5", "a > - - 5", "a > +5", "a = +'x'",
		"a > 10L", "a > 1.", "a > .5", "a > 1e3", "a > 007.5",
		"a > 9223372036854775807",
		"x$_9 = 'y'", "$a = 'b'", "_ = 'c'",
		"a = 'x' -- comment\n",
		"a /* c */ = 'x'",
		"a = 'it''s'",
		"5 BETWEEN 1 AND 10",
		"a BETWEEN 5 AND 5",
		"a NOT BETWEEN 10 AND 1",
		"a > 0.0", // refused by RocketMQ, accepted here (doc.go)
	} {
		if _, err := Parse(s); err != nil {
			t.Errorf("Parse(%q): %v", s, err)
		}
	}
}

// TestParseErrors: ParserTest.testParse_invalid, testParse_decimalOverFlow,
// testParse_floatOverFlow, testParse_illegalBetween, the "will throw parse
// exception" cases of ExpressionTest (testContains_has_not_string_1/2,
// testContains_string_has_nothing), and RocketMQ's semantic checks, with the
// offset each error names.
func TestParseErrors(t *testing.T) {
	huge := "1" + strings.Repeat("1111111111", 300) + "." + strings.Repeat("1", 30)
	for _, c := range []struct {
		expr   string
		offset int
		msg    string // a substring of the message
	}{
		{"a and between 2 and 10", 6, "expected a property, a literal"},
		{"a > 100000000000000000000000", 4, "does not fit 64 bits"},
		{"a > " + huge + "e400", 4, "greater than the largest double"},
		{" a between 10 and 0", 11, "low bound of BETWEEN (10) must be less than or equal to the high bound (0)"},
		{"value contains x", 15, "expected a string literal after CONTAINS, found property name \"x\""},
		{"value not contains x", 19, "expected a string literal after CONTAINS"},
		{"value contains 123", 15, "expected a string literal after CONTAINS, found integer literal \"123\""},
		{"'axb' contains ", 15, "found end of expression"},
		{"'axb' not contains ", 19, "found end of expression"},
		{"", 0, "expected a property, a literal"},
		{"a = ", 4, "found end of expression"},
		{"a = 1 b", 6, "or the end of the expression, found property name \"b\""},
		{"a = 1 )", 6, "or the end of the expression"},
		{"(a = 1", 6, `expected ")"`},
		{"a != 1", 2, `"!=" is not an operator here, use "<>"`},
		{"a == 1", 3, "expected a property, a literal"},
		{"a = 'x", 4, "unterminated string literal"},
		{"a = 1 /* x", 6, "unterminated comment"},
		{"a = 1 -- x", 6, "or the end of the expression"}, // a comment needs a line break
		{"a = 1 & b", 6, "unexpected character '&'"},
		{"a = é", 4, "unexpected character 'é'"},
		{"a NOT = 1", 6, "expected CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT, found \"=\""},
		{"a IS 1", 5, "expected NULL or NOT NULL after IS"},
		{"a IS NOT 1", 9, "expected NULL after IS NOT"},
		{"a IN 'x'", 5, `expected "(" after IN`},
		{"a IN ()", 6, "expected a string literal in the IN list"},
		{"a IN ('x' 'y')", 10, `expected "," or ")" in the IN list`},
		{"a IN (1)", 6, "expected a string literal in the IN list, found integer literal"},
		{"'a' IN ('x')", 0, "expected a property before IN"},
		{"a BETWEEN 1 OR 2", 12, "expected AND between the bounds of BETWEEN"},
		{"a = NULL", 4, "NULL cannot be compared"},
		{"NULL <> a", 0, "NULL cannot be compared"},
		{"TRUE = 'x'", 7, "TRUE cannot be compared with 'x'"},
		{"a > 'x'", 4, "found 'x', which cannot be compared"},
		{"a > TRUE", 4, "found TRUE, which cannot be compared"},
		{"NOT a > 1", 0, "found the condition (NOT a)"},
		{"a > (b = 1)", 5, "found the condition (b = 1)"},
		{"a BETWEEN 'a' AND 'b'", 10, "found 'a', which cannot be compared"},
		{"a BETWEEN NULL AND 1", 10, "bounds of BETWEEN cannot be NULL"},
		{"a BETWEEN 1 AND 'x'", 10, "low bound of BETWEEN"},
		{"'x'", 0, "which is not a boolean value"},
		{"1 AND a", 0, "which is not a boolean value"},
		{"a AND -b", 6, "which is not a boolean value"},
		{"NOT 5", 4, "which is not a boolean value"},
		{"a = 1L5", 6, "or the end of the expression"},
		{"a = 01", 5, "or the end of the expression"},
		{"a = 1.5e", 7, "or the end of the expression"},
		{"a = .", 4, "unexpected character '.'"},
		{"a" + strings.Repeat(" = a", MaxDepth+1), 0, "nested deeper"},
		{strings.Repeat("(", MaxDepth+1) + "a" + strings.Repeat(")", MaxDepth+1), MaxDepth, "nested deeper"},
	} {
		_, err := Parse(c.expr)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a *SyntaxError", c.expr, err)
			continue
		}
		if se.Offset != c.offset || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("Parse(%q): offset %d %q, want offset %d and %q", c.expr, se.Offset, se.Msg, c.offset, c.msg)
		}
		if _, err := Compile(c.expr); err == nil {
			t.Errorf("Compile(%q) accepted an invalid expression", c.expr)
		}
	}
}

// TestEquals follows ParserTest.testEquals: white space and keyword case do
// not change the tree.
func TestEquals(t *testing.T) {
	a := mustParse(t, "a=3 and b<>4 And c>5 AND d<=4").String()
	b := mustParse(t, "a=3  and    b<>4 And c>5 AND d<=4").String()
	c := mustParse(t, "a=3 or b<>4 Or c>5 OR d<=4").String()
	if a != b || a == c {
		t.Fatalf("%s / %s / %s", a, b, c)
	}
	if want := "((((a = 3) AND (b <> 4)) AND (c > 5)) AND (d <= 4))"; a != want {
		t.Fatalf("String() = %s, want %s", a, want)
	}
}

func TestPrecedenceTree(t *testing.T) {
	for in, want := range map[string]string{
		"a = 1 OR b = 2 AND c = 3":     "((a = 1) OR ((b = 2) AND (c = 3)))",
		"NOT a = 'x'":                  "((NOT a) = 'x')",
		"NOT (a = 'x')":                "(NOT (a = 'x'))",
		"a > 1 = TRUE":                 "((a > 1) = TRUE)",
		"a IS NULL = TRUE":             "((a IS NULL) = TRUE)",
		"a BETWEEN 1 AND 2 AND b = 1":  "((a BETWEEN 1 AND 2) AND (b = 1))",
		"a NOT IN ('x','y''z')":        "(a NOT IN ('x', 'y''z'))",
		"-a > - 2.5":                   "((-a) > (-2.5))",
		"x not startswith 'p' or TRUE": "((x NOT STARTSWITH 'p') OR TRUE)",
		"a > 1e3":                      "(a > 1000.0)",
		"a = 10L":                      "(a = 10)",
	} {
		if got := mustParse(t, in).String(); got != want {
			t.Errorf("%q → %s, want %s", in, got, want)
		}
	}
}

func TestLiteralTypes(t *testing.T) {
	for in, want := range map[string]LitKind{
		"2147483647": LitInt, "2147483648": LitLong, "10L": LitInt, "1.5": LitDouble, "1e3": LitDouble,
		"'s'": LitString, "TRUE": LitBool,
	} {
		n := mustParse(t, "a = "+in).(*Binary)
		if got := n.Y.(*Literal).Kind; got != want {
			t.Errorf("%s: kind %d, want %d", in, got, want)
		}
	}
}

func TestProperties(t *testing.T) {
	e := MustCompile("region = 'eu' AND (amount > 100 OR TAGS IN ('a')) AND region IS NOT NULL AND NOT flag")
	got := strings.Join(e.Properties(), ",")
	if got != "TAGS,amount,flag,region" {
		t.Fatalf("Properties() = %s", got)
	}
	if e.String() == "" {
		t.Fatal("String() empty")
	}
}

// TestLookupCalls: a property is looked up only when the evaluation reaches
// it; AND stops at the first FALSE.
func TestLookupCalls(t *testing.T) {
	e := MustCompile("region = 'eu' AND amount > 100")
	var asked []string
	e.Evaluate(func(k string) (string, bool) {
		asked = append(asked, k)
		return "us", true
	})
	if strings.Join(asked, ",") != "region" {
		t.Fatalf("looked up %v", asked)
	}
}

func TestJavaNumbers(t *testing.T) {
	ints := map[string]bool{"0": true, "-0": true, "+7": true, "2147483647": true, "-2147483648": true,
		"2147483648": false, "": false, "-": false, "+": false, " 1": false, "1 ": false, "1.0": false,
		"1e3": false, "0x10": false, "\u0661\u0662": true, "１２": true, "\U0001D7CE": false, "1_0": false}
	for s, ok := range ints {
		if _, got := parseJavaInt(s, 32); got != ok {
			t.Errorf("parseJavaInt(%q) ok = %v, want %v", s, got, ok)
		}
	}
	if v, _ := parseJavaInt("\u0661\u0662", 32); v != 12 {
		t.Errorf("Arabic-Indic 12 = %d", v)
	}
	if v, ok := parseJavaInt("-9223372036854775808", 64); !ok || v != -9223372036854775808 {
		t.Errorf("MinInt64 = %d %v", v, ok)
	}
	if _, ok := parseJavaInt("9223372036854775808", 64); ok {
		t.Error("MaxInt64+1 accepted")
	}
	doubles := map[string]bool{"1": true, "1.": true, ".5": true, "-.5e-3": true, "1e": false, "e1": false,
		".": false, "NaN": true, "-Infinity": true, "inf": false, "nan": false, "1f": true, "1.5D": true,
		"1ff": false, " \t1.5\n": true, "0x1p3": true, "0x1.8P-1d": true, "0x1": false, "0x.p1": false,
		"0x.8p1": true, "1_0": false, "1e400": true, "\u0661": false, "": false, "  ": false}
	for s, ok := range doubles {
		if _, got := parseJavaDouble(s); got != ok {
			t.Errorf("parseJavaDouble(%q) ok = %v, want %v", s, got, ok)
		}
	}
	if v, _ := parseJavaDouble("0x1.8P-1d"); v != 0.75 {
		t.Errorf("0x1.8P-1d = %v", v)
	}
}

// TestEvaluateAllocs: evaluation allocates nothing, whatever the path
// (match, mismatch, missing property, conversion failure, hashed IN).
func TestEvaluateAllocs(t *testing.T) {
	e := MustCompile(benchExpr + " OR x IN ('1','2','3','4','5','6','7','8','9','10') OR NOT (y > 2.5) OR z CONTAINS 'q'")
	for _, props := range []map[string]string{
		{"region": "eu", "amount": "250", "kind": "b"},
		{"region": "us"},
		{},
		{"region": "eu", "amount": "lots"},
		{"x": "9", "y": "1e1", "z": "aqb"},
	} {
		lookup := mapLookup(props)
		if n := testing.AllocsPerRun(100, func() { e.Evaluate(lookup) }); n != 0 {
			t.Errorf("%v: %v allocations per Evaluate", props, n)
		}
	}
}

// TestConcurrentEvaluate: one Expression shared by goroutines (run with -race).
func TestConcurrentEvaluate(t *testing.T) {
	e := MustCompile(benchExpr)
	done := make(chan bool)
	for g := 0; g < 4; g++ {
		go func(g int) {
			ok := true
			for i := 0; i < 1000; i++ {
				want := i%2 == 0
				kind := "c"
				if want {
					kind = "a"
				}
				props := map[string]string{"region": "eu", "amount": "101", "kind": kind}
				if e.Evaluate(mapLookup(props)) != want {
					ok = false
				}
			}
			done <- ok
		}(g)
	}
	for g := 0; g < 4; g++ {
		if !<-done {
			t.Error("wrong result under concurrency")
		}
	}
}
