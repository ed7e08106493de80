package message

import (
	"errors"
	"testing"
)

func TestParseTagExpression(t *testing.T) {
	tests := []struct {
		expr    string
		all     bool
		norm    string
		match   []string
		nomatch []string
		err     bool
	}{
		{expr: "", all: true, norm: "*", match: []string{"", "a", "anything"}},
		{expr: "*", all: true, norm: "*", match: []string{"", "x"}},
		{expr: "  *  ", all: true, norm: "*", match: []string{"x"}},
		{expr: "a", norm: "a", match: []string{"a"}, nomatch: []string{"", "b", "A", "a "}},
		{expr: "a || b", norm: "a||b", match: []string{"a", "b"}, nomatch: []string{"c", "a || b", ""}},
		{expr: "a||b||a", norm: "a||b", match: []string{"a", "b"}},
		{expr: " paid ||refunded ", norm: "paid||refunded", match: []string{"paid", "refunded"}, nomatch: []string{"paid "}},
		{expr: "TagA||tagA", norm: "TagA||tagA", match: []string{"TagA", "tagA"}, nomatch: []string{"taga"}},
		{expr: "a ||", err: true},
		{expr: "|| a", err: true},
		{expr: "a || || b", err: true},
		{expr: "a | b", err: true},
		{expr: "a ||| b", err: true},
		{expr: "a || *", err: true},
		{expr: "a b", err: true},
		{expr: "a\tb || c", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			f, err := ParseTagExpression(tt.expr)
			if tt.err {
				if !errors.Is(err, ErrBadTagExpression) {
					t.Fatalf("parse(%q) = %v, want ErrBadTagExpression", tt.expr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tt.expr, err)
			}
			if f.All() != tt.all || f.String() != tt.norm {
				t.Fatalf("parse(%q) = all %v expr %q, want all %v expr %q", tt.expr, f.All(), f.String(), tt.all, tt.norm)
			}
			for _, tag := range tt.match {
				if !f.Match(tag) {
					t.Errorf("%q does not match tag %q", tt.expr, tag)
				}
			}
			for _, tag := range tt.nomatch {
				if f.Match(tag) {
					t.Errorf("%q matches tag %q", tt.expr, tag)
				}
			}
		})
	}
}

// The broker filters by hash only: two tags with the same Java hash code
// ("Aa" and "BB") pass its filter, and the exact check must tell them apart.
func TestTagFilterRejectsHashCollisions(t *testing.T) {
	f, err := ParseTagExpression("Aa")
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match("Aa") || f.Match("BB") {
		t.Fatalf("exact tag check failed on a hash collision")
	}
	if !f.MatchCode(TagsHash("BB")) || f.MatchCode(TagsHash("b")) || f.CodeFilter() == nil {
		t.Fatalf("the code filter must pass the colliding hash and no other")
	}
}
