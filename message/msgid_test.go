package message

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var upperHex32 = regexp.MustCompile(`^[0-9A-F]{32}$`)

func TestOffsetMsgID(t *testing.T) {
	for _, tc := range []struct {
		host netip.AddrPort
		off  int64
		want string
	}{
		{netip.MustParseAddrPort("10.0.0.1:10911"), 0, "0A00000100002A9F0000000000000000"},
		{netip.MustParseAddrPort("192.168.1.254:65535"), 1<<63 - 1, "C0A801FE0000FFFF7FFFFFFFFFFFFFFF"},
		{netip.MustParseAddrPort("[::ffff:127.0.0.1]:1"), 0xABCDEF, "7F000001000000010000000000ABCDEF"},
		{netip.MustParseAddrPort("[2001:db8::1]:10911"), 1 << 30,
			"20010DB8000000000000000000000001" + "00002A9F" + "0000000040000000"},
		{netip.MustParseAddrPort("[fe80::abcd]:0"), 255,
			"FE80000000000000000000000000ABCD" + "00000000" + "00000000000000FF"},
	} {
		id := OffsetMsgID(tc.host, tc.off)
		if id != tc.want {
			t.Errorf("OffsetMsgID(%v, %d) = %s, want %s", tc.host, tc.off, id, tc.want)
		}
		host, off, err := ParseOffsetMsgID(id)
		if err != nil {
			t.Errorf("ParseOffsetMsgID(%s): %v", id, err)
			continue
		}
		if want := canonHost(tc.host); host != want || off != tc.off {
			t.Errorf("ParseOffsetMsgID(%s) = %v, %d; want %v, %d", id, host, off, want, tc.off)
		}
		// Lower case is accepted too.
		if h2, o2, err := ParseOffsetMsgID(strings.ToLower(id)); err != nil || h2 != host || o2 != off {
			t.Errorf("ParseOffsetMsgID(lower %s) = %v, %d, %v", id, h2, o2, err)
		}
	}
}

func TestOffsetMsgIDLengths(t *testing.T) {
	if n := len(OffsetMsgID(hostB, 1)); n != 32 {
		t.Errorf("IPv4 id has %d characters, want 32", n)
	}
	if n := len(OffsetMsgID(hostB6, 1)); n != 56 {
		t.Errorf("IPv6 id has %d characters, want 56", n)
	}
}

func TestParseOffsetMsgIDErrors(t *testing.T) {
	good := OffsetMsgID(hostB, 77)
	good6 := OffsetMsgID(hostB6, 77)
	for _, id := range []string{
		"",
		good[:31],
		good + "0",
		good6[:55],
		good6 + "00",
		strings.Repeat("0", 40),
		"G" + good[1:],
		good[:31] + "g",
		good[:10] + " " + good[11:],
		good[:16] + "8000000000000000",         // negative offset
		good[:16] + "FFFFFFFFFFFFFFFF",         // negative offset
		good[:8] + "00010000" + good[16:],      // port 65536
		good[:8] + "FFFFFFFF" + good[16:],      // port out of range
		good6[:32] + "01000000" + good6[40:],   // IPv6 port out of range
		"+A00000100002A9F000000000000000",      // sign is not hex
		"0A00000100002A9F00000000000000\u00e9", // 32 bytes, not hex
	} {
		if host, off, err := ParseOffsetMsgID(id); !errors.Is(err, ErrBadMsgID) {
			t.Errorf("ParseOffsetMsgID(%q) = %v, %d, %v; want ErrBadMsgID", id, host, off, err)
		}
	}
}

func TestUniqueIDGeneratorDistinct(t *testing.T) {
	g := NewUniqueIDGenerator(netip.MustParseAddr("192.168.1.2"))
	const n = 100_000
	seen := make(map[string]struct{}, n)
	for i := range n {
		id := g.Next()
		if !upperHex32.MatchString(id) {
			t.Fatalf("id %d = %q, want 32 upper-case hex characters", i, id)
		}
		if !IsUniqueID(id) {
			t.Fatalf("IsUniqueID(%q) = false", id)
		}
		if _, dup := seen[id]; dup {
			t.Fatalf("id %d = %s repeats", i, id)
		}
		seen[id] = struct{}{}
	}
}

func TestUniqueIDGeneratorConcurrent(t *testing.T) {
	g := NewUniqueIDGenerator(netip.Addr{})
	const workers, each = 8, 5000
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				ids[w] = append(ids[w], g.Next())
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, l := range ids {
		for _, id := range l {
			if seen[id] {
				t.Fatalf("id %s repeats", id)
			}
			seen[id] = true
		}
	}
}

func TestUniqueIDGeneratorLayout(t *testing.T) {
	g := NewUniqueIDGenerator(netip.MustParseAddr("192.168.1.2"))
	now := time.Date(2024, time.March, 5, 6, 7, 8, 9_000_000, time.UTC)
	g.now = func() time.Time { return now }
	id := g.Next()
	if id[:8] != "C0A80102" {
		t.Errorf("address part = %s, want C0A80102", id[:8])
	}
	if want := fmt.Sprintf("%04X", uint16(os.Getpid())); id[8:12] != want {
		t.Errorf("pid part = %s, want %s", id[8:12], want)
	}
	ms := ((4*24+6)*3600+7*60+8)*1000 + 9
	if want := fmt.Sprintf("%08X", ms); id[20:28] != want {
		t.Errorf("time part = %s, want %s (ms since the start of March)", id[20:28], want)
	}
	id2 := g.Next()
	if id2[:28] != id[:28] {
		t.Errorf("same millisecond, different prefix: %s %s", id, id2)
	}
	if id2[28:] == id[28:] {
		t.Errorf("counter did not advance: %s %s", id, id2)
	}

	// A new month restarts the time part.
	now = time.Date(2024, time.April, 1, 0, 0, 0, 5_000_000, time.UTC)
	if id3 := g.Next(); id3[20:28] != "00000005" {
		t.Errorf("time part on April 1st = %s, want 00000005", id3[20:28])
	}

	// An IPv4-mapped address is used as IPv4.
	g4 := NewUniqueIDGenerator(netip.MustParseAddr("::ffff:10.1.2.3"))
	if id := g4.Next(); id[:8] != "0A010203" {
		t.Errorf("address part of a mapped address = %s, want 0A010203", id[:8])
	}
}

func TestUniqueIDGeneratorCounterWrap(t *testing.T) {
	// The documented limit: within one millisecond the counter is all that
	// separates ids, so 65 536 of them are distinct and the next repeats.
	g := NewUniqueIDGenerator(netip.MustParseAddr("10.0.0.1"))
	now := time.Date(2024, time.May, 10, 0, 0, 0, 0, time.Local)
	g.now = func() time.Time { return now }
	seen := make(map[string]bool, 1<<16)
	first := g.Next()
	seen[first] = true
	for range 1<<16 - 1 {
		id := g.Next()
		if seen[id] {
			t.Fatalf("id %s repeats before the counter wraps", id)
		}
		seen[id] = true
	}
	if id := g.Next(); id != first {
		t.Errorf("after 65 536 ids in one millisecond got %s, expected the first id %s again", id, first)
	}
	now = now.Add(time.Millisecond)
	if id := g.Next(); seen[id] {
		t.Errorf("id %s of the next millisecond repeats", id)
	}
}

func TestUniqueIDGeneratorsDiffer(t *testing.T) {
	addr := netip.MustParseAddr("10.0.0.1")
	a, b := NewUniqueIDGenerator(addr), NewUniqueIDGenerator(addr)
	ida, idb := a.Next(), b.Next()
	if ida == idb {
		t.Fatalf("two generators made the same first id %s", ida)
	}
	if ida[12:20] == idb[12:20] {
		t.Errorf("two generators share the random prefix %s", ida[12:20])
	}
	// Without an address the first four bytes are random too.
	c, d := NewUniqueIDGenerator(netip.Addr{}), NewUniqueIDGenerator(netip.Addr{})
	if c.Next()[:8] == d.Next()[:8] {
		t.Error("two address-less generators share the address part")
	}
}

func TestIsUniqueID(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"0A00000100002A9F0000000000000000", true},
		{"0a00000100002a9f0000000000000000", true},
		{NewUniqueIDGenerator(netip.Addr{}).Next(), true},
		{"", false},
		{"0A00000100002A9F000000000000000", false},
		{"0A00000100002A9F00000000000000000", false},
		{"0A00000100002A9F000000000000000G", false},
		{"0A00000100002A9F000000000000000-", false},
		{OffsetMsgID(hostB6, 1), false},
	} {
		if got := IsUniqueID(tc.s); got != tc.want {
			t.Errorf("IsUniqueID(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// TestUniqueIDGeneratorNextN: a batch's ids are the ids that as many calls
// of Next would give in the same millisecond, each its own 32 characters.
func TestUniqueIDGeneratorNextN(t *testing.T) {
	now := time.Date(2024, time.March, 5, 6, 7, 8, 9_000_000, time.UTC)
	batch := NewUniqueIDGenerator(netip.MustParseAddr("192.168.1.2"))
	batch.now = func() time.Time { return now }
	oneByOne := &UniqueIDGenerator{prefix: batch.prefix, now: batch.now}
	_ = batch.Next()
	_ = oneByOne.Next()
	ids := batch.NextN(5)
	if len(ids) != 5 {
		t.Fatalf("NextN(5) gave %d ids", len(ids))
	}
	for i, id := range ids {
		if want := oneByOne.Next(); id != want {
			t.Errorf("id %d = %s, want %s", i, id, want)
		}
	}
	if next, want := batch.Next(), oneByOne.Next(); next != want {
		t.Errorf("after the batch: %s, want %s", next, want)
	}
	if got := batch.NextN(0); len(got) != 0 {
		t.Errorf("NextN(0) = %v", got)
	}
}

// TestOffsetMsgIDLen: every offset id of a host has the length it says.
func TestOffsetMsgIDLen(t *testing.T) {
	for _, h := range []string{"10.1.2.3:10911", "[2001:db8::7]:10911", "[::ffff:10.1.2.3]:10911"} {
		host := netip.MustParseAddrPort(h)
		for _, off := range []int64{0, 1 << 40} {
			if id := OffsetMsgID(host, off); len(id) != OffsetMsgIDLen(host) {
				t.Errorf("%s at %d: id %q has %d characters, OffsetMsgIDLen says %d", h, off, id, len(id), OffsetMsgIDLen(host))
			}
		}
	}
}
