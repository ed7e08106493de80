//go:build browser

package console

import (
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/testutil"
)

// TestConsoleMemory starts a NameServer and a broker with --console=true
// and another pair with --console=false, loads every console page of the
// first pair, leaves them, and once the daemons are idle again logs what the
// console adds to their resident memory (the bound: 10 MiB). The
// figure is logged for docs/BENCHMARKS.md, not asserted.
func TestConsoleMemory(t *testing.T) {
	b := newBrowser(t)
	on := startCluster(t, "mem-on", "--console=true")
	off := startCluster(t, "mem-off", "--console=false")
	on.CreateTopic(t, "console-mem", 4)
	off.CreateTopic(t, "console-mem", 4)

	pages := []struct{ hash, sel string }{
		{"#/cluster", "#brokers-table"}, {"#/topics", "#topics-table"}, {"#/topics/console-mem", "#queues-table"},
		{"#/groups", "#groups"}, {"#/messages?topic=console-mem&key=none", "#results"}, {"#/dlq", "#dlq"},
		{"#/delay", "#delay-table"},
	}
	for _, console := range []string{on.nsConsole, on.brokerConsole} {
		b.load(t, console)
		for _, p := range pages {
			b.route(t, p.hash, p.sel)
		}
	}
	b.load(t, "about:blank")
	b.checkClean(t)

	// The daemons are idle once nothing polls them: wait for a few of the
	// brokers' registrations to pass and read the figures.
	time.Sleep(3 * time.Second)
	type fig struct{ rss, anon int64 }
	read := func(pid int) fig {
		m := testutil.ProcMemory(pid)
		if m.RSS < 0 {
			t.Fatalf("no /proc/%d/status", pid)
		}
		return fig{m.RSS >> 10, m.Anon >> 10}
	}
	for _, d := range []struct {
		name    string
		on, off int
	}{
		{"nameserver", on.NS.Pid(), off.NS.Pid()},
		{"broker", on.Brokers[0].Proc.Pid(), off.Brokers[0].Proc.Pid()},
	} {
		a, z := read(d.on), read(d.off)
		t.Logf("MEMORY %s idle after the console's pages: VmRSS %d KiB with --console=true, %d KiB with --console=false (%+d KiB); RssAnon %d KiB vs %d KiB (%+d KiB); the issue's bound is +10240 KiB",
			d.name, a.rss, z.rss, a.rss-z.rss, a.anon, z.anon, a.anon-z.anon)
	}
}
