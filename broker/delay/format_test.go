package delay

import (
	"bytes"
	"testing"
	"time"
)

func TestParseLevels(t *testing.T) {
	ok := []struct {
		in   string
		want Levels
	}{
		{DefaultLevels, nil},
		{"1s", Levels{time.Second}},
		{" 500ms  2m 1h 3d ", Levels{500 * time.Millisecond, 2 * time.Minute, time.Hour, 72 * time.Hour}},
	}
	for _, tc := range ok {
		got, err := ParseLevels(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if tc.want != nil && len(got) != len(tc.want) {
			t.Fatalf("%q: %v", tc.in, got)
		}
		for i := range tc.want {
			if got[i] != tc.want[i] {
				t.Fatalf("%q: %v", tc.in, got)
			}
		}
		again, err := ParseLevels(got.String())
		if err != nil || again.String() != got.String() {
			t.Fatalf("%q: round trip %q: %v", tc.in, got.String(), err)
		}
	}
	def, _ := ParseLevels(DefaultLevels)
	if def.Max() != 18 || def.Delay(2) != 5*time.Second || def.Delay(99) != 2*time.Hour || def.Delay(0) != 0 || def.Cap(-3) != 0 || def.Cap(19) != 18 {
		t.Fatalf("default levels: %v", def)
	}
	for _, bad := range []string{"", "  ", "1", "s", "0s", "-1s", "1x", "1.5s", "401d", "1s 2y"} {
		if _, err := ParseLevels(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParseLevels(f *testing.F) {
	for _, s := range []string{DefaultLevels, "1ms", "3d 1h", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLevels(s)
		if err != nil {
			return
		}
		for _, d := range l {
			if d <= 0 || d > 400*24*time.Hour {
				t.Fatalf("%q: level %v", s, d)
			}
		}
		if again, err := ParseLevels(l.String()); err != nil || again.String() != l.String() {
			t.Fatalf("%q: round trip %q: %v", s, l.String(), err)
		}
	})
}

func TestEntryRoundTrip(t *testing.T) {
	for _, e := range []Entry{
		{DeliverMS: 0, Location: 0, Origin: 0, Size: 1},
		{DeliverMS: 1_900_000_000_000, Location: 1 << 40, Origin: 12345, Size: 4 << 20},
		{DeliverMS: -5, Location: 7, Origin: 7, Size: 99},
	} {
		var b [EntrySize]byte
		e.Encode(b[:])
		got, ok := DecodeEntry(b[:])
		if !ok || got != e {
			t.Fatalf("%+v → %+v %v", e, got, ok)
		}
		for i := range b {
			c := b
			c[i] ^= 0x40
			if got, ok := DecodeEntry(c[:]); ok && got == e {
				t.Fatalf("flipped byte %d not detected", i)
			}
		}
	}
	if _, ok := DecodeEntry(make([]byte, EntrySize-1)); ok {
		t.Fatal("short entry decoded")
	}
	if _, ok := DecodeEntry(make([]byte, EntrySize)); ok {
		t.Fatal("zero entry decoded")
	}
}

func FuzzDecodeEntry(f *testing.F) {
	var b [EntrySize]byte
	Entry{DeliverMS: 1, Location: 2, Origin: 2, Size: 3}.Encode(b[:])
	f.Add(b[:])
	f.Add(make([]byte, EntrySize))
	f.Fuzz(func(t *testing.T, in []byte) {
		e, ok := DecodeEntry(in)
		if !ok {
			return
		}
		var out [EntrySize]byte
		e.Encode(out[:])
		if !bytes.Equal(out[:], in[:EntrySize]) {
			t.Fatalf("%x decodes to %+v which encodes to %x", in[:EntrySize], e, out)
		}
	})
}

func TestPlace(t *testing.T) {
	now := int64(1_900_000_200_000) // a multiple of 10 minutes
	minute, hour, day := int64(60_000), int64(3600_000), int64(24*3600_000)
	cases := []struct {
		due   int64
		level int
	}{
		{now - hour, 0},
		{now, 0},
		{now + 5*minute, 0},
		{now + 25*minute, 0}, // its 10-min bucket starts within 20 min
		{now + 45*minute, 1}, // level 1
		{now + 20*hour, 1},   // its day starts within a day
		{now + 3*day, 2},     // level 2
		{now + 400*day, 2},
	}
	for _, tc := range cases {
		k := place(tc.due, now, numLevels-1)
		if k.level != tc.level {
			t.Errorf("due now%+dms: level %d, want %d", tc.due-now, k.level, tc.level)
		}
		if k.start > tc.due || k.end() <= tc.due {
			t.Errorf("due %d not in bucket [%d, %d)", tc.due, k.start, k.end())
		}
		if k.level > 0 && k.start <= now+splitAhead[k.level] {
			t.Errorf("due now%+dms placed in a bucket already due to be split", tc.due-now)
		}
		if got, suffix, ok := parseBucketName(k.name() + idxSuffix); !ok || got != k || suffix != idxSuffix {
			t.Errorf("%s: parsed %+v %q %v", k.name(), got, suffix, ok)
		}
	}
	if k := place(now+400*day, now, 0); k.level != 0 {
		t.Errorf("max level 0 gave %+v", k)
	}
	for _, bad := range []string{"L0-1.idx", "L3-000000000000000.idx", "L1-000000000000001.idx", "x", "L0-000000000000000.tmp"} {
		if _, _, ok := parseBucketName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestVirtualClock(t *testing.T) {
	vc := NewVirtualClock(t0)
	a := vc.NewTimer(2 * time.Second)
	b := TimerAt(vc, t0.Add(time.Second))
	c := vc.NewTimer(3 * time.Second)
	if !c.Stop() || c.Stop() {
		t.Fatal("Stop")
	}
	now := vc.NewTimer(0)
	select {
	case <-now.C():
	default:
		t.Fatal("a timer of 0 did not fire at once")
	}
	vc.Advance(1500 * time.Millisecond)
	select {
	case <-b.C():
	default:
		t.Fatal("timer at +1s did not fire at +1.5s")
	}
	select {
	case <-a.C():
		t.Fatal("timer at +2s fired at +1.5s")
	default:
	}
	vc.Set(t0) // never backwards
	if !vc.Now().Equal(t0.Add(1500 * time.Millisecond)) {
		t.Fatal("clock went back")
	}
	vc.Advance(time.Second)
	<-a.C()
	if vc.Timers() != 0 {
		t.Fatalf("%d timers left", vc.Timers())
	}
}
