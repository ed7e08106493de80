package proccluster

import (
	"os"
	"strings"
	"testing"
)

// TestClusterRestart starts a one-group cluster of real processes, creates
// a topic, kills the broker with -9 and starts it again on its port and
// store: the topic is still routed.
func TestClusterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemons")
	}
	dir, cleanup, err := Binaries()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	h := New(Options{Name: "proccluster", BinDir: dir})
	c := h.Private(t, OneGroup)
	topic := c.NewTopic(t, "t", 2)
	if got := c.BrokerAddr("broker-a"); got != c.Brokers[0].Addr || got == "" {
		t.Fatalf("BrokerAddr = %q, want %q", got, c.Brokers[0].Addr)
	}
	pid := c.Brokers[0].Proc.Pid()
	c.RestartBroker(t, 0, true)
	if p := c.Brokers[0].Proc.Pid(); p == 0 || p == pid {
		t.Fatalf("pid after the restart = %d (before %d)", p, pid)
	}
	if err := c.WaitRouted(t.Context(), topic); err != nil {
		t.Fatal(err)
	}
	if logs := c.Logs(5); !strings.Contains(logs, "--- broker-a/0") {
		t.Fatalf("Logs lacks the broker:\n%s", logs)
	}
	if _, err := os.Stat(c.Dir); err != nil {
		t.Fatal(err)
	}
}
