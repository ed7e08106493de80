// Package testutil holds small helpers shared by the tests of several
// packages. Only test files import it.
package testutil

import (
	"testing"
	"time"
)

// WaitFor polls cond every 5 ms until it returns nil, and fails the test
// with cond's last error (naming what was awaited) when d passes first.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
