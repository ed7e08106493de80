package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// TestSendDelayedAndDelayCommands: send --delay-level, --delay and
// --deliver-at hold messages back until they are due; delay cancel stops a
// pending one; delay status reports levels and the timing wheel.
func TestSendDelayedAndDelayCommands(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.CreateTopic("cli-delay", 2)
	ns := strings.Join(c.NameServerAddrs(), ",")
	cli := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
		if code != 0 {
			t.Fatalf("bolide %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
	sendOne := func(args ...string) sendJSON {
		t.Helper()
		var r sendJSON
		out := cli(append([]string{"send", "--topic", "cli-delay", "-o", "json"}, args...)...)
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
			t.Fatalf("send output %q: %v", out, err)
		}
		return r
	}

	start := time.Now()
	due := map[string]time.Duration{"level": time.Second, "delay": 1500 * time.Millisecond, "at": 2 * time.Second}
	sendOne("--delay-level", "1", "level")
	sendOne("--delay", "1500ms", "delay")
	sendOne("--deliver-at", "+2s", "at")
	far := sendOne("--delay", "1h", "cancelled")

	out := cli("delay", "cancel", "--topic", "cli-delay", far.MsgID)
	if !strings.Contains(out, "cancelled") {
		t.Fatalf("delay cancel: %q", out)
	}
	code, _, stderr := runCLI(t, "", "--namesrv", ns, "delay", "cancel", "--topic", "cli-delay", "0A0000010000000000000000DEADBEEF")
	if code != exitFailed || !strings.Contains(stderr, "not cancelled") {
		t.Fatalf("cancel of an unknown id: exit %d, %q", code, stderr)
	}

	out = cli("consume", "--topic", "cli-delay", "--group", "cli-delay-g", "--count", "3", "--timeout", "30s", "-o", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("consumed %d messages, want 3:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var m struct {
			Body           string `json:"body"`
			StoreTimestamp string `json:"storeTimestamp"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		d, ok := due[m.Body]
		if !ok {
			t.Fatalf("unexpected message %q (the cancelled one?)", m.Body)
		}
		delete(due, m.Body)
		stored, err := time.Parse(timeLayout, m.StoreTimestamp)
		if err != nil {
			t.Fatal(err)
		}
		// Stored in the real topic no earlier than due (ms resolution).
		if early := start.Add(d).Sub(stored); early > time.Millisecond {
			t.Fatalf("%q stored in its topic %v before it was due", m.Body, early)
		}
	}

	var st delayStatusJSON
	c.WaitFor(10*time.Second, func() error {
		out := cli("delay", "status", "-o", "json")
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &st); err != nil {
			return fmt.Errorf("%q: %w", out, err)
		}
		if st.Delivered < 2 || st.Cancelled < 1 || len(st.Levels) != 1 || st.Levels[0].Level != 1 ||
			st.Levels[0].MaxOffset != 1 || st.Levels[0].Pending != 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	// Pending counts the cancelled entry until its bucket is loaded (an
	// approximation the engine documents).
	if !st.TimerEnabled || st.TimerPending > 1 || st.Error != "" {
		t.Fatalf("status %+v", st)
	}
	out = cli("delay", "status", "--all")
	for _, want := range []string{"pending, next due", "LEVEL", "2h", "cancelled"} {
		if !strings.Contains(out, want) {
			t.Fatalf("delay status lacks %q:\n%s", want, out)
		}
	}

	code, _, stderr = runCLI(t, "", "--namesrv", ns, "send", "--topic", "cli-delay", "--delay", "1s", "--delay-level", "2", "x")
	if code != exitUsage || !strings.Contains(stderr, "delay") {
		t.Fatalf("two delays: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "", "--namesrv", ns, "send", "--topic", "cli-delay", "--deliver-at", "someday", "x")
	if code != exitUsage || !strings.Contains(stderr, "--deliver-at") {
		t.Fatalf("bad --deliver-at: exit %d, %q", code, stderr)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second: "1s", 10 * time.Second: "10s", time.Minute: "1m", 20 * time.Minute: "20m",
		2 * time.Hour: "2h", 90 * time.Minute: "1h30m", 400 * 24 * time.Hour: "400d",
		1500 * time.Millisecond: "1.5s", 61 * time.Second: "1m1s", 3*time.Hour + 5*time.Second: "3h0m5s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
