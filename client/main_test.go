package client

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a client starts must end with Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
