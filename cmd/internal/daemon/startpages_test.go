package daemon

import (
	"os"
	"runtime"
	"testing"

	"github.com/bolide-mq/bolide/internal/mmap"
	"github.com/bolide-mq/bolide/internal/testutil"
)

// sampleRegions are a broker's regions as mmap.SelfRegions reads them.
var sampleRegions = []mmap.Region{
	{Start: 0x400000, End: 0xc19000, Perms: "r-xp", Path: "/opt/bolide/bin/bolide-broker", Rss: 6884 << 10},
	{Start: 0xc19000, End: 0x154e000, Perms: "r--p", Path: "/opt/bolide/bin/bolide-broker", Rss: 7884 << 10},
	{Start: 0x154e000, End: 0x15c9000, Perms: "rw-p", Path: "/opt/bolide/bin/bolide-broker", Rss: 492 << 10, Anonymous: 120 << 10},
	{Start: 0x15c9000, End: 0x15ca000, Perms: "r--p", Path: "/opt/bolide/bin/bolide-broker", Rss: 4 << 10, Anonymous: 4 << 10},
	{Start: 0x7f0000000000, End: 0x7f0000001000, Perms: "r--p", Path: "/data/commitlog/00000000000000000000", Rss: 4 << 10},
	{Start: 0x7f0000100000, End: 0x7f0000200000, Perms: "rw-p", Rss: 1024 << 10, Anonymous: 1024 << 10},
	{Start: 0x7f0000300000, End: 0x7f0000301000, Perms: "r-xp", Path: "/opt/other dir/tool (deleted)", Rss: 4 << 10},
}

func TestStartPagesPicksReadOnlyExecutableMappings(t *testing.T) {
	rs := sampleRegions
	got := startPages(rs, "/opt/bolide/bin/bolide-broker")
	// The text and the read-only data; not the writable data, not the
	// read-only page holding a private copy, not other files.
	if len(got) != 2 || got[0].Start != 0x400000 || got[0].End != 0xc19000 || got[1].Start != 0xc19000 || got[1].Rss != 7884<<10 {
		t.Errorf("startPages = %+v", got)
	}
	if got := startPages(rs, "/usr/bin/none"); len(got) != 0 {
		t.Errorf("another executable's mappings: %+v", got)
	}
}

// The test binary releases its own start-up pages: they leave its resident
// set, and the code it runs afterwards faults back in and works.
func TestReleaseStartPagesShrinksTheResidentSet(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("smaps is Linux's")
	}
	before := testutil.ProcMemory(os.Getpid()).File >> 10
	if before < 0 {
		t.Skip("no RssFile in /proc/self/status")
	}
	released, err := releaseStartPages()
	if err != nil {
		t.Fatal(err)
	}
	after := testutil.ProcMemory(os.Getpid()).File >> 10
	if released <= 0 || after >= before {
		t.Fatalf("released %d KiB; RssFile %d KiB before, %d after", released, before, after)
	}
	// Code released above runs again, from the page cache.
	if got := startPages(sampleRegions, "/opt/bolide/bin/bolide-broker"); len(got) != 2 {
		t.Fatalf("after the release: startPages picked %d regions, want 2", len(got))
	}
	t.Logf("released %d KiB; RssFile %d KiB before, %d after", released, before, after)
}
