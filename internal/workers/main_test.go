package workers

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a pool starts must end with Close or its linger.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
