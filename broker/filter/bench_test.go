package filter

import "testing"

const benchExpr = "region = 'eu' AND amount > 100 AND kind IN ('a','b')"

func benchEvaluate(b *testing.B, e *Expression, props map[string]string, want bool) {
	lookup := mapLookup(props)
	if e.Evaluate(lookup) != want {
		b.Fatalf("%s with %v is not %v", e, props, want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if e.Evaluate(lookup) != want {
			b.Fatal("result changed")
		}
	}
}

// BenchmarkEvaluate: a typical selective filter on a matching message (every
// term evaluated).
func BenchmarkEvaluate(b *testing.B) {
	props := map[string]string{"region": "eu", "amount": "250", "kind": "b", "TAGS": "paid", "UNIQ_KEY": "x"}
	b.Run("match", func(b *testing.B) { benchEvaluate(b, MustCompile(benchExpr), props, true) })
	b.Run("first-term-false", func(b *testing.B) {
		benchEvaluate(b, MustCompile(benchExpr), map[string]string{"region": "us", "amount": "250", "kind": "b"}, false)
	})
	b.Run("missing", func(b *testing.B) { benchEvaluate(b, MustCompile(benchExpr), map[string]string{}, false) })
	b.Run("unoptimised", func(b *testing.B) {
		benchEvaluate(b, newExpression(benchExpr, mustParse(b, benchExpr), false), props, true)
	})
	b.Run("double-between", func(b *testing.B) {
		benchEvaluate(b, MustCompile("price BETWEEN 9.5 AND 20.25 OR TAGS = 'sale'"), map[string]string{"price": "12.75"}, true)
	})
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Compile(benchExpr); err != nil {
			b.Fatal(err)
		}
	}
}
