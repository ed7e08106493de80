package afterreply

import (
	"context"
	"slices"
	"testing"
)

func TestDeferRunsOnRun(t *testing.T) {
	if Defer(context.Background(), func() { t.Fatal("ran without a queue") }) {
		t.Fatal("Defer without a queue reported true")
	}
	var q Queue
	ctx := NewContext(context.Background(), &q)
	var got []int
	if !Defer(ctx, func() {
		got = append(got, 1)
		Defer(ctx, func() { got = append(got, 3) }) // queued while running
	}) || !Defer(ctx, func() { got = append(got, 2) }) {
		t.Fatal("Defer with a queue reported false")
	}
	if len(got) != 0 {
		t.Fatalf("ran before Run: %v", got)
	}
	q.Run()
	if !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("ran %v, want [1 2 3]", got)
	}
	q.Run()
	if len(got) != 3 {
		t.Fatalf("ran again: %v", got)
	}
}
