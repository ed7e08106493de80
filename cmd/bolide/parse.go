package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/client"
)

// splitList splits a ";"- or ","-separated list (NameServers, keys),
// trimming spaces and dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' }) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checkHostPort checks a "host:port" address.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("%q has a bad port", addr)
	}
	return nil
}

// minEpochMillis: epoch numbers below this (1973-03-03) are taken to be
// seconds by mistake rather than milliseconds.
const minEpochMillis = 100_000_000_000

// timeLayouts are the absolute forms parseTime accepts, tried in order;
// layouts without a zone are local time.
var timeLayouts = []struct {
	layout string
	local  bool
}{
	{time.RFC3339Nano, false},
	{"2006-01-02T15:04:05.999999999", true},
	{"2006-01-02 15:04:05.999999999Z07:00", false},
	{"2006-01-02 15:04:05.999999999", true},
	{"2006-01-02T15:04", true},
	{"2006-01-02 15:04", true},
	{"2006-01-02", true},
}

// parseTime parses a point in time, relative to now:
//
//   - RFC 3339 ("2026-01-02T15:04:05Z", "2026-01-02T15:04:05.123+02:00"),
//     or without a zone in local time ("2026-01-02 15:04:05", "2026-01-02");
//   - "now";
//   - a duration ago: "15m" or "-15m" (units ns us ms s m h d, combinable:
//     "1h30m", "2d"); "+15m" is in the future;
//   - epoch milliseconds ("1767366245123"). A number that is too small to
//     be milliseconds is refused as probably seconds.
func parseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New("empty time")
	}
	if strings.EqualFold(s, "now") {
		return now, nil
	}
	if isDigits(s) {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("time %q: epoch milliseconds out of range", s)
		}
		if ms < minEpochMillis {
			return time.Time{}, fmt.Errorf("time %q: epoch times are in milliseconds; this looks like seconds (append 000)", s)
		}
		return time.UnixMilli(ms), nil
	}
	if d, sign, ok := parseRelative(s); ok {
		if sign > 0 {
			return now.Add(d), nil
		}
		return now.Add(-d), nil
	}
	for _, l := range timeLayouts {
		var t time.Time
		var err error
		if l.local {
			t, err = time.ParseInLocation(l.layout, s, time.Local)
		} else {
			t, err = time.Parse(l.layout, s)
		}
		if err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: want RFC 3339 (2026-01-02T15:04:05Z), a duration ago (15m, -2h, 1d), "+
		"\"now\" or epoch milliseconds", s)
}

// parseRelative parses "[+-]duration"; sign is -1 (ago, the default) or
// +1.
func parseRelative(s string) (time.Duration, int, bool) {
	sign := -1
	switch {
	case strings.HasPrefix(s, "+"):
		sign, s = 1, s[1:]
	case strings.HasPrefix(s, "-"):
		s = s[1:]
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, 0, false
	}
	d, err := parseDuration(s)
	if err != nil || d < 0 {
		return 0, 0, false
	}
	return d, sign, true
}

// parseDuration is time.ParseDuration plus a "d" unit of 24 hours
// ("2d12h").
func parseDuration(s string) (time.Duration, error) {
	var days int64
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseInt(s[:i], 10, 32)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad day count in %q", s)
		}
		days, s = n, s[i+1:]
		if s == "" {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	return time.Duration(days)*24*time.Hour + d, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseProperties parses repeated "key=value" flags.
func parseProperties(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("property %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// parsePerm parses a topic permission: rw, r, w (ro and wo too), "-" for
// none, or RocketMQ's numbers 6, 4, 2.
func parsePerm(s string) (client.Perm, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "rw", "wr", "6", "read-write":
		return client.PermReadWrite, nil
	case "r", "ro", "4", "read":
		return client.PermRead, nil
	case "w", "wo", "2", "write":
		return client.PermWrite, nil
	case "-", "none", "0":
		return 0, nil
	}
	return 0, fmt.Errorf("permission %q: want rw, r or w (or 6, 4, 2)", s)
}

// permString renders a permission as rw, r, w or -.
func permString(p client.Perm) string {
	s := ""
	if p.Readable() {
		s += "r"
	}
	if p.Writable() {
		s += "w"
	}
	if s == "" {
		return "-"
	}
	return s
}

// parseFrom parses consume's --from: first, last, or a time.
func parseFrom(s string, now time.Time) (client.ConsumeFrom, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "first", "earliest", "beginning":
		return client.ConsumeFromFirst, nil
	case "last", "latest", "end":
		return client.ConsumeFromLast, nil
	}
	t, err := parseTime(s, now)
	if err != nil {
		return client.ConsumeFrom{}, fmt.Errorf("--from: want first, last or a time: %w", err)
	}
	return client.ConsumeFromTimestamp(t), nil
}

// expandCount replaces the template {{Count}} with n (1-based message
// number), as "nats pub --count" does.
func expandCount(s string, n int) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	return strings.ReplaceAll(s, countTemplate, strconv.Itoa(n))
}

const countTemplate = "{{Count}}"
