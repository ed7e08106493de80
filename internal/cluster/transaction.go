package cluster

import (
	"time"

	"github.com/bolide-mq/bolide/broker"
)

// TransactionTimings returns an Options.Broker function that sets the
// brokers' transaction timeout, check interval and maximum number of
// checks (tests use short ones).
func TransactionTimings(timeout, interval time.Duration, checkMax int) func(*broker.Options) {
	return func(o *broker.Options) {
		o.Transaction = broker.TransactionOptions{Timeout: timeout, CheckInterval: interval, CheckMax: checkMax}
	}
}
