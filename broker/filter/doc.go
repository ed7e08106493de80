// Package filter is the SQL92 message filter language of RocketMQ: a lexer,
// a parser to a syntax tree with positioned errors, and a compiled
// Expression evaluated against a message's properties.
//
//	e, err := filter.Compile("region = 'eu' AND amount > 100 AND kind IN ('a','b')")
//	// err is a *filter.SyntaxError: byte offset + what was expected there
//	ok := e.Evaluate(func(key string) (string, bool) { v, ok := props[key]; return v, ok })
//
// The language, its checks and its evaluation follow Apache RocketMQ's filter
// module (SelectorParser.jj and the org.apache.rocketmq.filter.expression
// classes) as the broker uses it, and were checked case by case against that
// module (TestAgainstRocketMQ; the table test cites RocketMQ's own tests).
// The package is pure: no I/O, no logging, no goroutines. An Expression is
// immutable and safe for concurrent use; Evaluate does not allocate.
//
// # Lexical structure
//
//   - White space: space, tab, \n, \r, \f. Comments: "/* ... */", and "--" up
//     to a line break (without a line break, "--" is two minus signs).
//   - Keywords, in any letter case: NOT AND OR BETWEEN IN TRUE FALSE NULL IS
//     CONTAINS STARTSWITH ENDSWITH. They cannot be property names.
//   - Property names: [A-Za-z_$][A-Za-z0-9_$]* (ASCII only), case-sensitive.
//     TAGS is the message tag (RocketMQ keeps it as the property TAGS; the
//     lookup must answer it, see TagsProperty). "now" is an ordinary name.
//   - Strings: in single quotes, a quote inside written twice, no other
//     escapes, any character including line breaks.
//   - Integers: 0 | [1-9][0-9]* with an optional l/L suffix. An integer that
//     fits 32 bits is a Java int, a larger one a long; one beyond 64 bits is
//     an error. Leading zeros are not part of an integer ("01" is 0 then 1,
//     an error), but 007.5 is a decimal.
//   - Decimals (Java double): 1.5, 1., .5, 1e3, 1.5E-2; one overflowing to
//     infinity is an error. No sign: -5 is negation applied to 5.
//   - Operators: = <> < <= > >= ( ) , + -. There is no != and no ==.
//
// # Grammar
//
// Lowest precedence first; every binary level is left-associative:
//
//	selector   = or                       (must be a condition)
//	or         = and { OR and }
//	and        = equality { AND equality }
//	equality   = compare { ("=" | "<>") compare | IS [NOT] NULL }
//	compare    = unary { (">" | ">=" | "<" | "<=") unary
//	                   | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
//	                   | [NOT] BETWEEN unary AND unary
//	                   | [NOT] IN "(" string { "," string } ")" }
//	unary      = "+" unary | "-" unary | NOT unary | primary
//	primary    = string | integer | decimal | TRUE | FALSE | NULL
//	           | property | "(" or ")"
//
// Consequences worth knowing, all as in RocketMQ:
//
//   - NOT binds tighter than any comparison: "NOT a = 'x'" is
//     "(NOT a) = 'x'" (a boolean compared with a string: never matches) and
//     "NOT a > 1" is refused. Write NOT (a = 'x').
//   - = and <> bind looser than < <= > >=: "a > 1 = TRUE" is
//     "(a > 1) = TRUE". IS NULL is at the level of =.
//   - AND binds tighter than OR.
//
// # Checks at compile time
//
// Besides syntax, these are refused (with the offset of the operand at
// fault), as RocketMQ refuses them when it compiles a subscription:
//
//   - a condition that is not boolean: "'x'", "5", "a AND 1", "NOT -a"
//     (a bare property is accepted as a condition, see below);
//   - ordering (< <= > >= BETWEEN) a string, TRUE/FALSE/NULL literal or a
//     condition: "a > 'x'", "a > (b = 1)";
//   - NULL with = or <>: "a = NULL" (use IS NULL);
//   - TRUE/FALSE on the left of = or <> with a literal of another type on
//     the right: "TRUE = 'x'";
//   - BETWEEN with two literal bounds that are NULL, not numbers, or in
//     decreasing order: "a BETWEEN 10 AND 0" (NOT BETWEEN is not checked);
//   - IN on anything but a property: "'x' IN ('x')"; IN lists and the right
//     side of CONTAINS/STARTSWITH/ENDSWITH are string literals only.
//
// # Evaluation
//
// Every property value is a string, or missing. Evaluation uses SQL's
// three-valued logic: a condition is TRUE, FALSE or unknown, and a message
// matches only when the whole expression is TRUE. On top of that an
// evaluation can fail (RocketMQ throws); a failure anywhere ends the
// evaluation and the message does not match, whatever the rest says — but
// AND and OR evaluate left to right and stop as soon as the result is known,
// so "b = 'x' OR a > 5" matches when b is 'x' even if a is not a number,
// while "a > 5 OR b = 'x'" does not.
//
// Missing properties:
//
//   - a comparison (= <> < <= > >= BETWEEN) with a missing operand is
//     unknown, so "a <> 'x'" and "NOT (a = 'x')" do not match a message
//     without a; NOT unknown is unknown, unknown AND FALSE is FALSE,
//     unknown OR TRUE is TRUE;
//   - IN and NOT IN on a missing property are unknown;
//   - CONTAINS, STARTSWITH, ENDSWITH and their NOT forms are FALSE (not
//     unknown) on a missing property, so "NOT (a CONTAINS 'x')" matches a
//     message without a while "a NOT CONTAINS 'x'" does not; an empty pattern
//     makes all six FALSE;
//   - IS NULL is TRUE exactly when the property is missing (an empty value is
//     present); IS NOT NULL the reverse; neither is ever unknown;
//   - = quirks of RocketMQ's null handling: two missing properties are equal
//     ("a = b" is TRUE), and a present property compared with a missing one
//     is FALSE when the missing one is on the right ("a <> b" is then TRUE)
//     but unknown when it is on the left;
//   - a bare property used as a condition ("a", "NOT a", "a AND b") is
//     unknown when missing and FALSE when present (a string is not a
//     boolean), so "NOT a" means "a is present".
//
// Types: literals have Java types (string, int, long, double, boolean); a
// property is a string. Comparing a string with a number or a boolean
// converts the string to the other side's type (RocketMQ's
// ComparisonExpression):
//
//   - string property vs int literal: the property is parsed as a Java int
//     (Integer.valueOf: optional sign, decimal digits of any script, no
//     spaces, no decimal point, within 32 bits); vs long literal as a long;
//     vs decimal literal as a Java double (Double.valueOf: surrounding blanks
//     ignored, exponents, NaN, Infinity, hexadecimal, f/d suffix). A property
//     that does not parse is an evaluation failure, so "a > 5" fails on
//     "10.5" and on "3000000000" (write "a > 5.0"), and "a = 5" fails on
//     "abc";
//   - two string properties ordered with < <= > >= are both parsed as
//     doubles (failure if either is not a number); compared with = or <>
//     they are compared as strings ("3.14" <> "3.140");
//   - a string literal against a property compares strings, byte for byte;
//     IN compares strings too ("a IN ('1')" does not match "1.0");
//   - a string against TRUE/FALSE: the string is TRUE when it is "true" in
//     any letter case and FALSE otherwise, so "a = FALSE" matches "yes"; a
//     TRUE/FALSE (or a condition) on the left of a string is a failure;
//   - int and long widen to long, either to double; doubles order with NaN
//     above everything and -0.0 below 0.0 (Double.compare);
//   - a boolean against a number is simply not equal;
//   - "-" negates a number (Java wrap-around) and gives unknown for anything
//     else, so "-a > 5" is never TRUE.
//
// # Deviations from RocketMQ
//
// Both only make Bolide refuse or accept an expression RocketMQ would
// accept or refuse; what an accepted expression means is the same.
//
//   - RocketMQ stops parsing at the first token that cannot continue the
//     expression and ignores the rest, so "a = 1 b = 2" or "a = 1 )" are
//     accepted there as "a = 1". Bolide refuses them, pointing at the first
//     token left over.
//   - RocketMQ refuses decimal literals below Double.MIN_VALUE, which by
//     accident refuses every zero (0.0, .0, 0e5). Bolide accepts them.
//
// Bolide also refuses expressions nested deeper than MaxDepth, where
// RocketMQ would overflow its stack.
//
// # Cost
//
// Compile once per subscription. Evaluate walks a small tree without
// interfaces or allocation; comparisons of a property with a literal (the
// common case) are specialised nodes, AND/OR chains are flat lists, IN lists
// longer than eight are hashed, and properties are looked up only when the
// evaluation reaches them. Properties lists the names an expression reads,
// for callers that pre-filter with per-message property digests.
package filter
