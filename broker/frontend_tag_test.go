package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestWithFrontend: a context labelled with a front end's name reports it,
// from many goroutines labelling with many names at once, and a context
// never labelled reports "core".
func TestWithFrontend(t *testing.T) {
	if got := frontendOf(context.Background()); got != "core" {
		t.Fatalf("unlabelled context: %q, want core", got)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				name := fmt.Sprintf("fe-%d", (g*7+i)%13)
				if got := frontendOf(WithFrontend(context.Background(), name)); got != name {
					t.Errorf("labelled %q, reports %q", name, got)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestWithFrontendAllocatesOnlyTheContext: labelling a request's context
// with a name seen before allocates the context and nothing else (the name
// made an interface value would be a second allocation on every request).
func TestWithFrontendAllocatesOnlyTheContext(t *testing.T) {
	ctx := context.Background()
	name := string([]byte("framed-test")) // not a constant: boxing it would allocate
	WithFrontend(ctx, name)
	if n := testing.AllocsPerRun(100, func() { WithFrontend(ctx, name) }); n != 1 {
		t.Fatalf("%.0f allocations a call, want 1", n)
	}
}
