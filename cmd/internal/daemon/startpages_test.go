package daemon

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/internal/mmap"
	"github.com/bolide-mq/bolide/internal/testutil"
)

const sampleSmaps = `00400000-00c19000 r-xp 00000000 08:01 1234   /opt/bolide/bin/bolide-broker
Size:               8292 kB
Rss:                6884 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me dw sd
00c19000-0154e000 r--p 00819000 08:01 1234   /opt/bolide/bin/bolide-broker
Size:               9428 kB
Rss:                7884 kB
Anonymous:             0 kB
0154e000-015c9000 rw-p 0114e000 08:01 1234   /opt/bolide/bin/bolide-broker
Size:                492 kB
Rss:                 492 kB
Anonymous:           120 kB
015c9000-015ca000 r--p 011c9000 08:01 1234   /opt/bolide/bin/bolide-broker
Rss:                   4 kB
Anonymous:             4 kB
7f0000000000-7f0000001000 r--p 00000000 08:01 99     /data/commitlog/00000000000000000000
Rss:                   4 kB
Anonymous:             0 kB
7f0000100000-7f0000200000 rw-p 00000000 00:00 0
Rss:                1024 kB
Anonymous:          1024 kB
7f0000300000-7f0000301000 r-xp 00000000 08:01 5678   /opt/other dir/tool (deleted)
Rss:                   4 kB
Anonymous:             0 kB
`

func TestStartPagesPicksReadOnlyExecutableMappings(t *testing.T) {
	rs, err := mmap.ParseSmaps(strings.NewReader(sampleSmaps))
	if err != nil {
		t.Fatal(err)
	}
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
	rs, err := mmap.ParseSmaps(strings.NewReader(sampleSmaps))
	if err != nil || len(rs) != 7 {
		t.Fatalf("after the release: %d regions, %v", len(rs), err)
	}
	t.Logf("released %d KiB; RssFile %d KiB before, %d after", released, before, after)
}
