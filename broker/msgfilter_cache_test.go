package broker

import (
	"errors"
	"strconv"
	"testing"

	"github.com/bolide-mq/bolide/message"
)

// TestExprCache: an expression is parsed once however often it is asked
// for, and what is returned is that one parse; one that fails to parse is
// not kept (asked again, it is parsed again); past maxCachedExprs the
// cache starts again empty.
func TestExprCache(t *testing.T) {
	var c tagCache
	parses := 0
	parse := func(s string) (*message.TagExpression, error) {
		parses++
		return message.ParseTagExpression(s)
	}
	first, err := c.get("a || b", parse)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := c.get("a || b", parse)
		if err != nil || again != first {
			t.Fatalf("get again: %p, %v; want the first parse %p", again, err, first)
		}
	}
	if parses != 1 {
		t.Fatalf("parsed %d times, want 1", parses)
	}
	if !first.MatchCode(message.TagsHash("b")) || first.MatchCode(message.TagsHash("c")) {
		t.Fatal("the cached expression does not filter as parsed")
	}
	for range 2 {
		if _, err := c.get("a | b", parse); !errors.Is(err, message.ErrBadTagExpression) {
			t.Fatalf("bad expression: %v, want ErrBadTagExpression", err)
		}
	}
	if parses != 3 {
		t.Fatalf("after two bad gets parsed %d times, want 3: a failed parse must not be kept", parses)
	}
	for i := range maxCachedExprs {
		if _, err := c.get("t"+strconv.Itoa(i), parse); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.m); n > maxCachedExprs {
		t.Fatalf("cache holds %d expressions, bound %d", n, maxCachedExprs)
	}
}
