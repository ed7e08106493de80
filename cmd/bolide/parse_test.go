package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 123_000_000, time.UTC)
	local := func(y int, mo time.Month, d, h, mi, s, ms int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ms*1_000_000, time.Local)
	}
	cases := []struct {
		in      string
		want    time.Time
		wantErr string
	}{
		// RFC 3339, with and without fractions and zones.
		{in: "2026-01-02T15:04:05Z", want: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		{in: "2026-01-02T15:04:05.123Z", want: time.Date(2026, 1, 2, 15, 4, 5, 123_000_000, time.UTC)},
		{in: "2026-01-02T17:04:05.5+02:00", want: time.Date(2026, 1, 2, 15, 4, 5, 500_000_000, time.UTC)},
		{in: " 2026-01-02T15:04:05Z ", want: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		{in: "2026-01-02 15:04:05Z", want: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		// Without a zone: local time.
		{in: "2026-01-02T15:04:05", want: local(2026, 1, 2, 15, 4, 5, 0)},
		{in: "2026-01-02 15:04:05.250", want: local(2026, 1, 2, 15, 4, 5, 250)},
		{in: "2026-01-02 15:04", want: local(2026, 1, 2, 15, 4, 0, 0)},
		{in: "2026-01-02", want: local(2026, 1, 2, 0, 0, 0, 0)},
		// Relative: ago by default, "+" for the future.
		{in: "now", want: now},
		{in: "NOW", want: now},
		{in: "15m", want: now.Add(-15 * time.Minute)},
		{in: "-15m", want: now.Add(-15 * time.Minute)},
		{in: "+15m", want: now.Add(15 * time.Minute)},
		{in: "1h30m", want: now.Add(-90 * time.Minute)},
		{in: "500ms", want: now.Add(-500 * time.Millisecond)},
		{in: "2d", want: now.Add(-48 * time.Hour)},
		{in: "-1d12h", want: now.Add(-36 * time.Hour)},
		{in: "0s", want: now},
		// Epoch milliseconds.
		{in: "1767366245123", want: time.UnixMilli(1767366245123)},
		{in: "100000000000", want: time.UnixMilli(100000000000)},
		// Errors.
		{in: "", wantErr: "empty time"},
		{in: "   ", wantErr: "empty time"},
		{in: "1767366245", wantErr: "looks like seconds"},
		{in: "12", wantErr: "looks like seconds"},
		{in: "99999999999999999999", wantErr: "out of range"},
		{in: "yesterday", wantErr: "want RFC 3339"},
		{in: "15", wantErr: "looks like seconds"},
		{in: "15x", wantErr: "want RFC 3339"},
		{in: "-", wantErr: "want RFC 3339"},
		{in: "+", wantErr: "want RFC 3339"},
		{in: "--15m", wantErr: "want RFC 3339"},
		{in: "2026-13-02", wantErr: "want RFC 3339"},
		{in: "2026-01-02T25:00:00Z", wantErr: "want RFC 3339"},
		{in: "1.5d", wantErr: "want RFC 3339"},
	}
	for _, c := range cases {
		got, err := parseTime(c.in, now)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("parseTime(%q) = %v, %v; want an error containing %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// The times bolide prints are accepted back exactly.
func TestParseTimeRoundTrip(t *testing.T) {
	for _, ts := range []time.Time{
		time.UnixMilli(1767366245123),
		time.UnixMilli(1767366245000),
		time.Date(2030, 6, 30, 23, 59, 59, 999_000_000, time.UTC),
	} {
		got, err := parseTime(formatTime(ts), time.Now())
		if err != nil || !got.Equal(ts) {
			t.Errorf("parseTime(formatTime(%v)) = %v, %v", ts, got, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	cases := map[string]time.Duration{
		"1d": 24 * time.Hour, "2d3h": 51 * time.Hour, "90s": 90 * time.Second, "0d": 0, "1d0s": 24 * time.Hour,
	}
	for in, want := range cases {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"d", "xd", "-1d", "1d2", "1dd"} {
		if _, err := parseDuration(bad); err == nil {
			t.Errorf("parseDuration(%q) succeeded", bad)
		}
	}
}

func TestSplitList(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"127.0.0.1:9876", []string{"127.0.0.1:9876"}},
		{"a:1;b:2", []string{"a:1", "b:2"}},
		{"a:1,b:2", []string{"a:1", "b:2"}},
		{"a:1; b:2 ,c:3", []string{"a:1", "b:2", "c:3"}},
		{";;a:1;;", []string{"a:1"}},
		{" , ; ", nil},
		{"k1,k2,k-{{Count}}", []string{"k1", "k2", "k-{{Count}}"}},
	}
	for _, c := range cases {
		if got := splitList(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("splitList(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCheckHostPort(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:9876", "localhost:1", "[::1]:9876", "ns.example.com:65535"} {
		if err := checkHostPort(ok); err != nil {
			t.Errorf("checkHostPort(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"127.0.0.1", ":9876", "host:0", "host:65536", "host:port", "a:1:2"} {
		if err := checkHostPort(bad); err == nil {
			t.Errorf("checkHostPort(%q) succeeded", bad)
		}
	}
}

func TestParseProperties(t *testing.T) {
	got, err := parseProperties([]string{"a=1", "b=", "c=x=y", " d =v"})
	want := map[string]string{"a": "1", "b": "", "c": "x=y", "d": "v"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("parseProperties = %v, %v", got, err)
	}
	if got, err := parseProperties(nil); got != nil || err != nil {
		t.Fatalf("parseProperties(nil) = %v, %v", got, err)
	}
	for _, bad := range []string{"a", "=1", " =1"} {
		if _, err := parseProperties([]string{bad}); err == nil {
			t.Errorf("parseProperties(%q) succeeded", bad)
		}
	}
}

func TestParsePerm(t *testing.T) {
	cases := map[string]client.Perm{
		"rw": client.PermReadWrite, "RW": client.PermReadWrite, "6": client.PermReadWrite,
		"r": client.PermRead, "ro": client.PermRead, "4": client.PermRead,
		"w": client.PermWrite, "wo": client.PermWrite, "2": client.PermWrite, "-": 0,
	}
	for in, want := range cases {
		if got, err := parsePerm(in); err != nil || got != want {
			t.Errorf("parsePerm(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parsePerm("x"); err == nil {
		t.Error("parsePerm(x) succeeded")
	}
	for p, want := range map[client.Perm]string{client.PermReadWrite: "rw", client.PermRead: "r", client.PermWrite: "w", 0: "-",
		client.PermReadWrite | client.PermInherit: "rw"} {
		if got := permString(p); got != want {
			t.Errorf("permString(%d) = %q, want %q", p, got, want)
		}
	}
}

func TestParseFrom(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	cases := map[string]string{
		"first": "first", "earliest": "first", "last": "last", "latest": "last",
		"-1h":                  "timestamp 2026-01-02T14:04:05Z",
		"2026-01-02T00:00:00Z": "timestamp 2026-01-02T00:00:00Z",
	}
	for in, want := range cases {
		got, err := parseFrom(in, now)
		if err != nil || got.String() != want {
			t.Errorf("parseFrom(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	if _, err := parseFrom("sometime", now); err == nil {
		t.Error("parseFrom(sometime) succeeded")
	}
}

func TestExpandCount(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"order-{{Count}}", 7, "order-7"},
		{"{{Count}}/{{Count}}", 12, "12/12"},
		{"plain", 3, "plain"},
		{"{{count}}", 3, "{{count}}"},
		{"", 1, ""},
	}
	for _, c := range cases {
		if got := expandCount(c.in, c.n); got != c.want {
			t.Errorf("expandCount(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
