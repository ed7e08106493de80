package mmap

import (
	"os"
	"slices"
	"strings"
	"testing"
)

const sampleSmaps = `00400000-00c19000 r-xp 00000000 08:01 1234   /opt/bolide/bin/bolide-broker
Size:               8292 kB
Rss:                6884 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me dw sd
7f0000100000-7f0000200000 rw-p 00000000 00:00 0
Rss:                1024 kB
Anonymous:          1024 kB
7f0000300000-7f0000301000 r-xp 00000000 08:01 5678   /opt/other dir/tool (deleted)
Rss:                   4 kB
Anonymous:             0 kB
`

func TestParseSmaps(t *testing.T) {
	rs, err := ParseSmaps(strings.NewReader(sampleSmaps))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("parsed %d regions, want 3: %+v", len(rs), rs)
	}
	if r := rs[0]; r.Start != 0x400000 || r.End != 0xc19000 || r.Perms != "r-xp" || r.Path != "/opt/bolide/bin/bolide-broker" ||
		r.Rss != 6884<<10 || r.Anonymous != 0 || !slices.Equal(r.VmFlags, []string{"rd", "ex", "mr", "mw", "me", "dw", "sd"}) {
		t.Errorf("the text: %+v", r)
	}
	if r := rs[1]; r.Path != "" || r.Anonymous != 1024<<10 {
		t.Errorf("anonymous memory: %+v", r)
	}
	if r := rs[2]; r.Path != "/opt/other dir/tool (deleted)" || r.Rss != 4<<10 {
		t.Errorf("a path with spaces: %+v", r)
	}
}

func TestParseSmapsRejectsABadRange(t *testing.T) {
	if _, err := ParseSmaps(strings.NewReader("zz-00c19000 r-xp 00000000 08:01 1234 /x\n")); err == nil {
		t.Error("a region line with a bad address parsed")
	}
	if _, err := ParseSmaps(strings.NewReader("00400000-00c19000 r-xp 00000000 08:01 1234 /x\nRss: many kB\n")); err == nil {
		t.Error("a bad Rss parsed")
	}
}

// This process's own regions: the test binary is among them.
func TestSelfRegions(t *testing.T) {
	rs, err := SelfRegions()
	if err != nil {
		t.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rs, func(r Region) bool { return r.Path == exe && r.Rss > 0 }) {
		t.Errorf("no resident region of %s among %d", exe, len(rs))
	}
}
