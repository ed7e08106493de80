package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// TestGroupConsumeEnable: group update --consume-enable=false stops a
// group (group get shows it disabled; a consume of the group fails with
// the brokers' refusal; sends go on), --consume-enable starts it again and
// it consumes what was sent meanwhile; group create --consume-enable=false
// declares a group stopped.
func TestGroupConsumeEnable(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.CreateTopic("orders", 2)
	ns := strings.Join(c.NameServerAddrs(), ",")
	cli := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
		if code != 0 {
			t.Fatalf("bolide %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		t.Logf("$ bolide %s\n%s", strings.Join(args, " "), out)
		return out
	}
	consumeJSON := func(n string) map[string]bool {
		t.Helper()
		out := cli("consume", "--topic", "orders", "--group", "billing", "--count", n, "--timeout", "30s", "-o", "json")
		bodies := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var m struct {
				Body string `json:"body"`
			}
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%v: %q", err, l)
			}
			bodies[m.Body] = true
		}
		return bodies
	}

	cli("send", "--topic", "orders", "first")
	if got := consumeJSON("1"); !got["first"] {
		t.Fatalf("consume before stopping: %v", got)
	}

	out := cli("group", "update", "billing", "--consume-enable=false")
	want := "updated group billing on broker-a (17 delivery attempts, backoff 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h)\n" +
		"consumption of group billing is disabled: its consumers receive nothing until 'bolide group update billing --consume-enable'\n"
	if out != want {
		t.Fatalf("group update --consume-enable=false: %q", out)
	}
	out = cli("group", "get", "billing")
	if want := "GROUP    BROKER    FIFO   MAX ATTEMPTS  RETRY POLICY  BACKOFF                                               CONSUME\n" +
		"billing  broker-a  false  17            CUSTOMIZED    10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h  disabled\n"; out != want {
		t.Fatalf("group get of a stopped group:\n%s", out)
	}
	out = cli("group", "get", "billing", "-o", "json")
	if !strings.HasSuffix(out, `"consumeEnable":false}`+"\n") {
		t.Fatalf("group get -o json of a stopped group: %q", out)
	}

	// Sends go on; a consume of the stopped group fails with the refusal.
	cli("send", "--topic", "orders", "while stopped")
	args := []string{"--namesrv", ns, "consume", "--topic", "orders", "--group", "billing", "--count", "1", "--timeout", "30s"}
	code, stdout, stderr := runCLI(t, "", args...)
	checkOneLineError(t, args, code, stdout, stderr, exitFailed,
		"consumer group billing is stopped: its consumption was disabled (bolide group update billing --consume-enable)")
	t.Logf("$ bolide %s\n%s", strings.Join(args[2:], " "), stderr)

	// Other settings are kept by an update that changes consumption, and
	// the reverse.
	cli("group", "update", "billing", "--max-delivery-attempts", "5")
	out = cli("group", "update", "billing", "--consume-enable", "-o", "json")
	if want := `{"group":"billing","brokers":["broker-a"],"fifo":false,"maxDeliveryAttempts":5,"retryPolicy":"CUSTOMIZED",` +
		`"retryBackoff":["10s","30s","1m","2m","3m","4m","5m","6m","7m","8m","9m","10m","20m","30m","1h","2h"],"consumeEnable":true}` + "\n"; out != want {
		t.Fatalf("group update --consume-enable -o json: %q", out)
	}
	if got := consumeJSON("1"); !got["while stopped"] {
		t.Fatalf("consume after enabling: %v", got)
	}

	out = cli("group", "create", "reports", "--consume-enable=false", "-o", "json")
	if !strings.HasSuffix(out, `"consumeEnable":false}`+"\n") {
		t.Fatalf("group create --consume-enable=false -o json: %q", out)
	}
	out = cli("group", "update", "reports", "--consume-enable")
	if !strings.HasSuffix(out, "consumption of group reports is enabled: its consumers resume where they stopped\n") {
		t.Fatalf("group update --consume-enable: %q", out)
	}
}

// TestTopicListAllShowsStoreSystemTopics: after a delayed send, topic list
// --all (and --type system) shows SCHEDULE_TOPIC_XXXX, which only the
// broker's store holds, from the brokers' topic stats.
func TestTopicListAllShowsStoreSystemTopics(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.CreateTopic("orders", 2)
	ns := strings.Join(c.NameServerAddrs(), ",")
	cli := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
		if code != 0 || stderr != "" {
			t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
		}
		t.Logf("$ bolide %s\n%s", strings.Join(args, " "), out)
		return out
	}
	if out := cli("topic", "list", "--all"); strings.Contains(out, "SCHEDULE_TOPIC_XXXX") {
		t.Fatalf("a delay level's topic before any delayed send:\n%s", out)
	}
	cli("send", "--topic", "orders", "--delay-level", "3", "in 10 seconds")
	// The broker indexes the message into the delay level's queue just
	// after it stored it.
	c.WaitFor(10*time.Second, func() error {
		out := cli("topic", "list", "--all")
		if !strings.Contains(out, "\nSCHEDULE_TOPIC_XXXX         system  -             delayed messages (delay levels)\n") {
			return fmt.Errorf("topic list --all after a delayed send:\n%s", out)
		}
		return nil
	})
	if out := cli("topic", "list", "--all", "-o", "json"); !strings.Contains(out,
		`{"kind":"delayed messages (delay levels)","messageType":"","topic":"SCHEDULE_TOPIC_XXXX","type":"system"}`+"\n") {
		t.Fatalf("topic list --all -o json:\n%s", out)
	}
	if out := cli("topic", "list", "--type", "system"); !strings.Contains(out, "\nSCHEDULE_TOPIC_XXXX ") || strings.Contains(out, "orders") {
		t.Fatalf("topic list --type system:\n%s", out)
	}
}
