package delay

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultLevels are RocketMQ's messageDelayLevel: level n (1-based) waits
// the n-th duration.
const DefaultLevels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

// MaxLevels bounds how many levels a broker may configure (each is a queue
// of SCHEDULE_TOPIC_XXXX with its own delivery goroutine).
const MaxLevels = 64

// Levels are the delays of the delay levels; Levels[0] is level 1.
type Levels []time.Duration

// ParseLevels parses RocketMQ's messageDelayLevel syntax: durations
// separated by spaces, each a positive integer followed by ms, s, m, h or d
// ("1s 5s 10s 30s 1m ... 2h").
func ParseLevels(s string) (Levels, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, fmt.Errorf("delay levels: none given")
	}
	if len(fields) > MaxLevels {
		return nil, fmt.Errorf("delay levels: %d given, at most %d", len(fields), MaxLevels)
	}
	out := make(Levels, 0, len(fields))
	for i, f := range fields {
		d, err := parseLevel(f)
		if err != nil {
			return nil, fmt.Errorf("delay levels: level %d %q: %w", i+1, f, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func parseLevel(f string) (time.Duration, error) {
	units := []struct {
		suffix string
		d      time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	for _, u := range units {
		num, ok := strings.CutSuffix(f, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("want a positive integer and a unit (ms, s, m, h, d)")
		}
		if n > int64(400*24*time.Hour/u.d) {
			return 0, fmt.Errorf("longer than 400 days")
		}
		return time.Duration(n) * u.d, nil
	}
	return 0, fmt.Errorf("want a positive integer and a unit (ms, s, m, h, d)")
}

// Max is the highest level.
func (l Levels) Max() int { return len(l) }

// Cap returns level capped to 1..Max (0 for a level ≤ 0: no delay).
func (l Levels) Cap(level int) int {
	switch {
	case level <= 0:
		return 0
	case level > len(l):
		return len(l)
	}
	return level
}

// Delay returns the delay of a level (capped; 0 for a level ≤ 0).
func (l Levels) Delay(level int) time.Duration {
	level = l.Cap(level)
	if level == 0 {
		return 0
	}
	return l[level-1]
}

// String formats the levels in the syntax ParseLevels reads.
func (l Levels) String() string {
	parts := make([]string, len(l))
	for i, d := range l {
		switch {
		case d%(24*time.Hour) == 0:
			parts[i] = fmt.Sprintf("%dd", d/(24*time.Hour))
		case d%time.Hour == 0:
			parts[i] = fmt.Sprintf("%dh", d/time.Hour)
		case d%time.Minute == 0:
			parts[i] = fmt.Sprintf("%dm", d/time.Minute)
		case d%time.Second == 0:
			parts[i] = fmt.Sprintf("%ds", d/time.Second)
		default:
			parts[i] = fmt.Sprintf("%dms", d/time.Millisecond)
		}
	}
	return strings.Join(parts, " ")
}
