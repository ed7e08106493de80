package subgroup

import (
	"fmt"
	"math"
	"time"
)

// Retry policy types (RocketMQ's GroupRetryPolicyType).
const (
	PolicyCustomized  = "CUSTOMIZED"
	PolicyExponential = "EXPONENTIAL"
)

// RetryPolicy is how long a group's failed messages wait before their next
// delivery: RocketMQ 5's GroupRetryPolicy, in its JSON shape. A nil policy
// or a zero one is the customized default.
type RetryPolicy struct {
	Type        string             `json:"type"`
	Exponential *ExponentialPolicy `json:"exponentialRetryPolicy,omitempty"`
	Customized  *CustomizedPolicy  `json:"customizedRetryPolicy,omitempty"`
}

// ExponentialPolicy waits Initial × Multiplier^attempt, at most Max
// (milliseconds).
type ExponentialPolicy struct {
	Initial    int64 `json:"initial"`
	Max        int64 `json:"max"`
	Multiplier int64 `json:"multiplier"`
}

// CustomizedPolicy waits Next[i] (milliseconds) before the i-th retry; the
// last value repeats.
type CustomizedPolicy struct {
	Next []int64 `json:"next"`
}

// DefaultBackoff is RocketMQ's customized default: the delay levels
// 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h.
var DefaultBackoff = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// Validate checks a policy's values.
func (p *RetryPolicy) Validate() error {
	if p == nil {
		return nil
	}
	switch p.Type {
	case "", PolicyCustomized:
		if p.Customized != nil {
			if len(p.Customized.Next) == 0 {
				return fmt.Errorf("a customized retry policy needs at least one delay")
			}
			for _, ms := range p.Customized.Next {
				if ms < 0 {
					return fmt.Errorf("retry delay %d ms is negative", ms)
				}
			}
		}
	case PolicyExponential:
		if e := p.Exponential; e != nil && (e.Initial < 0 || e.Max < e.Initial || e.Multiplier < 1) {
			return fmt.Errorf("exponential retry policy needs 0 <= initial <= max and multiplier >= 1")
		}
	default:
		return fmt.Errorf("unknown retry policy type %q (want %s or %s)", p.Type, PolicyCustomized, PolicyExponential)
	}
	return nil
}

// Backoff is how long a message that failed its reconsumeTimes-th retry
// (0 for its first delivery) waits before the next, as RocketMQ computes it:
// a customized policy reads Next[reconsumeTimes+2], the exponential one
// Initial × Multiplier^reconsumeTimes.
func (p *RetryPolicy) Backoff(reconsumeTimes int) time.Duration {
	reconsumeTimes = max(reconsumeTimes, 0)
	if p != nil && p.Type == PolicyExponential {
		e := p.Exponential
		if e == nil {
			e = &ExponentialPolicy{Initial: 5000, Max: 2 * 3600 * 1000, Multiplier: 2}
		}
		ms := float64(e.Initial) * math.Pow(float64(e.Multiplier), float64(reconsumeTimes))
		return time.Duration(min(ms, float64(e.Max))) * time.Millisecond
	}
	if p != nil && p.Customized != nil && len(p.Customized.Next) > 0 {
		next := p.Customized.Next
		return time.Duration(next[min(reconsumeTimes+2, len(next)-1)]) * time.Millisecond
	}
	return DefaultBackoff[min(reconsumeTimes+2, len(DefaultBackoff)-1)]
}

// Delays is the policy's delays for the first n retries, as a RocketMQ 5
// client is told them in its Settings.
func (p *RetryPolicy) Delays(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = p.Backoff(i)
	}
	return out
}

// Customized builds a customized policy from delays.
func Customized(delays []time.Duration) *RetryPolicy {
	next := make([]int64, len(delays))
	for i, d := range delays {
		next[i] = d.Milliseconds()
	}
	return &RetryPolicy{Type: PolicyCustomized, Customized: &CustomizedPolicy{Next: next}}
}

// MaxDeliveryAttempts is how many times a message of the group is delivered
// before it goes to the dead-letter queue: RetryMaxTimes + 1, as RocketMQ 5
// counts (the first delivery and RetryMaxTimes retries).
func (c *Config) MaxDeliveryAttempts() int { return int(c.RetryMaxTimes) + 1 }

// Fifo reports whether the group consumes in order (RocketMQ's
// consumeMessageOrderly): POP hands out the next message of a queue only
// when the previous ones are acknowledged.
func (c *Config) Fifo() bool { return c.ConsumeMessageOrderly }

// Backoff is the group's retry delay after its reconsumeTimes-th retry.
func (c *Config) Backoff(reconsumeTimes int) time.Duration {
	return c.GroupRetryPolicy.Backoff(reconsumeTimes)
}
