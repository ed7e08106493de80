package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// builder makes synthetic histories: sends of one key in sequence, each
// acked by a broker at the next CommitLog offset (records of 100 bytes),
// and the final log holding what the test says.
type builder struct {
	atts []Attempt
	recs []Stored
	t    time.Duration
	off  int64
}

// ack records an acknowledged attempt by broker, stored at the next offset
// (when store), taking 10 ms from now.
func (b *builder) ack(key, seq, attempt int32, broker string, store bool) *Attempt {
	a := Attempt{CopyID: CopyID{MsgKey{key, seq}, attempt}, Start: b.t, End: b.t + 10*ms, Outcome: Acked, Broker: broker, Offset: b.off}
	b.atts = append(b.atts, a)
	if store {
		b.recs = append(b.recs, Stored{ID: a.CopyID, OK: true, Offset: b.off, Size: 100, Writer: broker})
	}
	b.off += 100
	b.t += 20 * ms
	return &b.atts[len(b.atts)-1]
}

// fail records an attempt without an ack; stored puts a copy in the log at
// the next offset written by writer.
func (b *builder) fail(key, seq, attempt int32, stored bool, writer string) {
	a := Attempt{CopyID: CopyID{MsgKey{key, seq}, attempt}, Start: b.t, End: b.t + 10*ms, Outcome: Unknown, Code: "TIMEOUT", Offset: -1}
	b.atts = append(b.atts, a)
	if stored {
		b.recs = append(b.recs, Stored{ID: a.CopyID, OK: true, Offset: b.off, Size: 100, Writer: writer})
		b.off += 100
	}
	b.t += 20 * ms
}

func (b *builder) final(epochs ...EpochEntry) *FinalLog {
	return &FinalLog{Records: b.recs, Epochs: epochs}
}

func TestBodyRoundTrip(t *testing.T) {
	c := CopyID{MsgKey{31, 123456}, 7}
	b := Body(c, 64)
	if len(b) != 64 {
		t.Fatalf("body of %d bytes", len(b))
	}
	got, ok := ParseBody(b)
	if !ok || got != c {
		t.Fatalf("ParseBody(%q) = %v %v", b, got, ok)
	}
	for _, bad := range []string{"", "k1.s2.a3", "k1.s2|", "x1.s2.a3|", "k1.s2.a-3|", "k1.s.a3|", "k1.s2.a3.b4|"} {
		if _, ok := ParseBody([]byte(bad)); ok {
			t.Errorf("ParseBody(%q) accepted", bad)
		}
	}
}

func TestCheckLossPasses(t *testing.T) {
	var b builder
	b.ack(1, 1, 1, "b1", true)
	b.fail(1, 2, 1, false, "")
	b.fail(1, 2, 2, true, "b1") // stored although unacknowledged: recovered
	b.ack(1, 2, 3, "b1", true)
	b.ack(2, 1, 1, "b2", true)
	r := CheckLoss(b.atts, b.final())
	if v := r.Violations(); len(v) > 0 {
		t.Fatalf("violations: %v", v)
	}
	if r.Acked != 3 || r.Recovered != 1 || r.Attempts != 5 || r.Stored != 4 {
		t.Fatalf("report %+v", r)
	}
}

func TestCheckLossFindsLostAndMoved(t *testing.T) {
	var b builder
	b.ack(1, 1, 1, "b1", true)
	b.ack(1, 2, 1, "b1", false) // lost outright
	b.fail(1, 3, 1, true, "b1")
	b.ack(1, 3, 2, "b1", false) // the acked copy is gone, an unacked one survived
	moved := b.ack(1, 4, 1, "b1", false)
	b.recs = append(b.recs, Stored{ID: moved.CopyID, OK: true, Offset: moved.Offset + 5000, Writer: "b1"})
	b.recs = append(b.recs, Stored{ID: CopyID{MsgKey{9, 9}, 9}, OK: true, Offset: 99999}) // never sent
	b.recs = append(b.recs, Stored{OK: false, Offset: 100000})                            // foreign body
	r := CheckLoss(b.atts, b.final())
	if len(r.LostMessages) != 1 || r.LostMessages[0] != (MsgKey{1, 2}) {
		t.Errorf("lost messages %v", r.LostMessages)
	}
	if len(r.LostCopies) != 2 || r.LostCopies[1].CopyID != (CopyID{MsgKey{1, 3}, 2}) {
		t.Errorf("lost copies %v", r.LostCopies)
	}
	if len(r.Moved) != 1 || r.Moved[0].CopyID != moved.CopyID {
		t.Errorf("moved %v", r.Moved)
	}
	if len(r.Unexpected) != 2 {
		t.Errorf("unexpected %v", r.Unexpected)
	}
	if len(r.Violations()) != 4 {
		t.Errorf("violations %v", r.Violations())
	}
}

func TestCheckDuplicates(t *testing.T) {
	var b builder
	b.fail(1, 1, 1, true, "b1")
	b.fail(1, 1, 2, true, "b1")
	b.ack(1, 1, 3, "b1", true)
	b.ack(1, 2, 1, "b1", true)
	r := CheckDuplicates(b.atts, b.final())
	if r.Messages != 1 || r.Extra != 2 || r.MaxCopies != 3 || r.Unacked != 2 || len(r.Violations()) != 0 {
		t.Fatalf("report %+v", r)
	}
	// One attempt's record twice: the log repeated it.
	b.recs = append(b.recs, b.recs[len(b.recs)-1])
	b.recs[len(b.recs)-1].Offset = 1 << 20
	r = CheckDuplicates(b.atts, b.final())
	if len(r.SameCopy) != 1 || r.SameCopy[0] != (CopyID{MsgKey{1, 2}, 1}) || len(r.Violations()) != 1 {
		t.Fatalf("report %+v", r)
	}
}

func TestCheckOrder(t *testing.T) {
	var b builder
	b.ack(1, 1, 1, "b1", true)
	b.ack(2, 1, 1, "b1", true)
	b.ack(1, 2, 1, "b1", true)
	b.fail(1, 3, 1, true, "b1")
	b.ack(1, 3, 2, "b1", true) // a duplicate of 3 after the first: fine
	b.ack(2, 2, 1, "b1", true)
	b.fail(2, 3, 1, true, "b1") // unacknowledged last seq: ignored
	if r := CheckOrder(b.atts, b.final()); len(r.Violations) != 0 || r.Keys != 2 {
		t.Fatalf("report %+v", r)
	}
	// Key 1's seq 2 stored after seq 3.
	fin := b.final()
	for i := range fin.Records {
		if fin.Records[i].ID.MsgKey == (MsgKey{1, 2}) {
			fin.Records[i].Offset = 1 << 20
		}
	}
	r := CheckOrder(b.atts, fin)
	if len(r.Violations) != 1 || r.Violations[0] != (OrderViolation{Key: 1, Prev: 3, Seq: 2, Offset: 1 << 20}) {
		t.Fatalf("report %+v", r)
	}
	if len(r.Errors()) != 1 {
		t.Fatal(r.Errors())
	}
}

// A clean failover: b1 at epoch 1, then b2 at epoch 2; sends in flight at
// the switch fail.
func cleanFailover() *builder {
	var b builder
	b.ack(1, 1, 1, "b1", true)
	b.ack(1, 2, 1, "b1", true)
	b.fail(1, 3, 1, false, "")
	b.t += time.Second
	b.ack(1, 3, 2, "b2", true) // offset 200: epoch 2 starts there
	b.ack(1, 4, 1, "b2", true)
	return &b
}

func TestCheckTwoMastersPasses(t *testing.T) {
	b := cleanFailover()
	r := CheckTwoMasters(b.atts, b.final(EpochEntry{1, 0}, EpochEntry{2, 200}))
	if e := r.Errors(); len(e) > 0 {
		t.Fatal(e)
	}
	if r.Checked != 4 || r.Epochs[1]["b1"] != 2 || r.Epochs[2]["b2"] != 2 {
		t.Fatalf("report %+v", r)
	}
	// The old master re-elected later (epoch 3) may acknowledge again.
	b.t += time.Second
	b.ack(1, 5, 1, "b1", true)
	if e := CheckTwoMasters(b.atts, b.final(EpochEntry{1, 0}, EpochEntry{2, 200}, EpochEntry{3, 400})).Errors(); len(e) > 0 {
		t.Fatal(e)
	}
	// Overlapping acks of two brokers are not, alone, a violation: b2's
	// ack ends after b1's next one starts.
	var c builder
	c.ack(1, 1, 1, "b1", true)
	c.t -= 15 * ms
	c.ack(2, 1, 1, "b2", true)
	if e := CheckTwoMasters(c.atts, c.final(EpochEntry{1, 0}, EpochEntry{2, 100})).Errors(); len(e) > 0 {
		t.Fatal(e)
	}
}

func TestCheckTwoMastersStaleAck(t *testing.T) {
	// b2 (epoch 2) acknowledged, then b1 — still at epoch 1 — acknowledged
	// a send that started later; both copies survived in the log (b1's
	// write ended up below b2's epoch start, as a log spliced from two
	// masters would have it).
	var b builder
	b.ack(1, 1, 1, "b1", true)
	b.atts[0].Offset, b.recs[0].Offset = 0, 0
	b.t = time.Second
	y := Attempt{CopyID: CopyID{MsgKey{2, 1}, 1}, Start: b.t, End: b.t + 10*ms, Outcome: Acked, Broker: "b2", Offset: 300}
	x := Attempt{CopyID: CopyID{MsgKey{3, 1}, 1}, Start: b.t + 20*ms, End: b.t + 30*ms, Outcome: Acked, Broker: "b1", Offset: 100}
	b.atts = append(b.atts, y, x)
	b.recs = append(b.recs, Stored{ID: y.CopyID, OK: true, Offset: 300, Writer: "b2"}, Stored{ID: x.CopyID, OK: true, Offset: 100, Writer: "b1"})
	r := CheckTwoMasters(b.atts, b.final(EpochEntry{1, 0}, EpochEntry{2, 300}))
	if len(r.StaleAcks) != 1 || !strings.Contains(r.StaleAcks[0], "b1 acked k3.s1.a1 at epoch 1") {
		t.Fatalf("stale acks %v", r.StaleAcks)
	}
	// x completed after y but is stored before it.
	if len(r.Reordered) != 1 {
		t.Fatalf("reordered %v", r.Reordered)
	}
}

func TestCheckTwoMastersEpochWriters(t *testing.T) {
	b := cleanFailover()
	// The log says epoch 1 runs to the end: b2's records fall in it.
	r := CheckTwoMasters(b.atts, b.final(EpochEntry{1, 0}))
	if len(r.EpochWriters) != 1 || !strings.Contains(r.EpochWriters[0], "epoch 1") {
		t.Fatalf("epoch writers %v", r.EpochWriters)
	}
	// A record whose writer is not the broker that acknowledged it.
	b = cleanFailover()
	b.recs[0].Writer = "b3"
	r = CheckTwoMasters(b.atts, b.final(EpochEntry{1, 0}, EpochEntry{2, 200}))
	if len(r.WrongWriter) != 1 || len(r.EpochWriters) != 1 {
		t.Fatalf("report %+v", r)
	}
}

func TestCheckTwoMastersReorderedSameBroker(t *testing.T) {
	// Rule R needs no epochs: a later ack at a lower offset.
	var b builder
	b.ack(1, 1, 1, "b1", true)
	b.ack(1, 2, 1, "b1", true)
	b.atts[1].Offset, b.recs[1].Offset = -50, -50
	r := CheckTwoMasters(b.atts, b.final())
	if len(r.Reordered) != 1 || len(r.StaleAcks) != 0 {
		t.Fatalf("report %+v", r)
	}
}

func TestCheckAsyncLoss(t *testing.T) {
	var b builder
	for s := int32(1); s <= 10; s++ {
		b.ack(1, s, 1, "b1", s <= 6) // offsets 0..900; 6.. lost
	}
	kill := b.t
	b.t += time.Second
	b.ack(1, 11, 1, "b2", true)
	snap := KillSnapshot{Cycle: 0, At: kill, Master: "b1", MasterEnd: 900, SlaveAck: map[string]int64{"b2": 600, "b3": 400}, LagBytes: 300, NewMaster: "b2"}
	r := CheckAsyncLoss(b.atts, b.final(), []KillSnapshot{snap})
	if e := r.Errors(); len(e) > 0 {
		t.Fatal(e)
	}
	c := r.Cycles[0]
	if c.Lost != 4 || c.LostBytes != 300 || c.Lag != 300 || c.Bound != 600 || c.AckedAfterSnapshot != 1 {
		t.Fatalf("cycle %+v", c)
	}
	// The new master had acknowledged up to 800: losing 600.. is not lag.
	snap.SlaveAck["b2"] = 800
	r = CheckAsyncLoss(b.atts, b.final(), []KillSnapshot{snap})
	if len(r.Cycles[0].BelowBound) != 2 || len(r.Errors()) != 1 {
		t.Fatalf("report %+v", r)
	}
	// Without the new master's name the least slave ack is the bound.
	snap.NewMaster = ""
	if r := CheckAsyncLoss(b.atts, b.final(), []KillSnapshot{snap}); r.Cycles[0].Bound != 400 || len(r.Errors()) != 0 {
		t.Fatalf("report %+v", r)
	}
	// A loss no kill explains: b2's ack after its own... no kill of b2.
	b.recs = b.recs[:len(b.recs)-1]
	r = CheckAsyncLoss(b.atts, b.final(), []KillSnapshot{snap})
	if len(r.Unexplained) != 1 || len(r.Errors()) != 1 {
		t.Fatalf("report %+v", r)
	}
}

func TestFailovers(t *testing.T) {
	var b builder
	for i := int32(1); i <= 50; i++ { // 1 s of acks by b1, 50/s
		b.ack(1, i, 1, "b1", true)
	}
	events := []Event{{At: b.t, Kind: "kill", Target: "b1", Cycle: 0}}
	b.fail(1, 51, 1, false, "")
	b.t += 2500 * ms
	first := b.ack(1, 51, 2, "b2", true)
	want := first.End - events[0].At
	for i := int32(52); i <= 60; i++ {
		b.ack(1, i, 1, "b2", true)
	}
	b.t += 20 * time.Second
	events = append(events, Event{At: b.t, Kind: "kill", Target: "b2", Cycle: 1}) // nobody answers after it
	b.t += 3 * time.Second
	b.fail(1, 61, 1, false, "")
	fs := Failovers(b.atts, events, "kill")
	if len(fs) != 2 {
		t.Fatalf("failovers %+v", fs)
	}
	if fs[0].FirstAck != want || fs[0].By != "b2" || fs[1].FirstAck != -1 {
		t.Fatalf("failovers %+v", fs)
	}
	if fs[0].RateBefore < 49 || fs[0].RateBefore > 51 { // 50 acks in the 1 s since the start
		t.Fatalf("rate before %v", fs[0].RateBefore)
	}
	if len(fs[0].After) != RateWindow || fs[0].After[0] != 0 || fs[0].After[2] != 10 || len(fs[1].After) != 3 {
		t.Fatalf("after %v, %v", fs[0].After, fs[1].After)
	}
	s := Stats(fs)
	if s.N != 1 || s.Missing != 1 || s.Median != want || s.Max != want || s.MinRate != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCheckDivergence(t *testing.T) {
	const seg = 1024
	mk := func(name string, data []byte) ReplicaLog {
		dir := t.TempDir()
		cl := commitLogDir(dir)
		if err := os.MkdirAll(cl, 0o755); err != nil {
			t.Fatal(err)
		}
		for s := 0; s < len(data); s += seg {
			f := make([]byte, seg) // preallocated segments: zeros past the end
			copy(f, data[s:])
			if err := os.WriteFile(filepath.Join(cl, segName(int64(s))), f, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return ReplicaLog{Name: name, StoreDir: dir, End: int64(len(data))}
	}
	data := make([]byte, 2500)
	for i := range data {
		data[i] = byte(i * 7)
	}
	a := mk("b1", data)
	same := mk("b2", data)
	if r := CheckDivergence([]ReplicaLog{a, same}, seg); len(r.Errors) > 0 || r.Compared["b2"] != 2500 {
		t.Fatalf("report %+v", r)
	}
	short := mk("b3", data[:2000])
	r := CheckDivergence([]ReplicaLog{a, short}, seg)
	if len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "ends at 2000") || r.Compared["b3"] != 2000 {
		t.Fatalf("report %+v", r)
	}
	flipped := append([]byte(nil), data...)
	flipped[1500] ^= 1
	r = CheckDivergence([]ReplicaLog{a, mk("b4", flipped)}, seg)
	if len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "segment 1024") {
		t.Fatalf("report %+v", r)
	}
}

func segName(off int64) string {
	s := "00000000000000000000"
	n := []byte(s)
	for i := len(n) - 1; off > 0; i-- {
		n[i] = byte('0' + off%10)
		off /= 10
	}
	return string(n)
}

func TestAckedSince(t *testing.T) {
	h := NewHistory()
	h.Add(Attempt{End: 100 * ms, Outcome: Acked, Broker: "b1"})
	h.Add(Attempt{End: 200 * ms, Outcome: Unknown})
	h.Add(Attempt{End: 300 * ms, Outcome: Acked, Broker: "b2"})
	h.Add(Attempt{End: 250 * ms, Outcome: Acked, Broker: "b1"}) // added late
	for _, c := range []struct {
		t    time.Duration
		not  string
		want bool
	}{{0, "", true}, {240 * ms, "b2", true}, {260 * ms, "b2", false}, {260 * ms, "b1", true}, {300 * ms, "", false}, {50 * ms, "b1", true}} {
		if got := h.AckedSince(c.t, c.not); got != c.want {
			t.Errorf("AckedSince(%v, %q) = %v", c.t, c.not, got)
		}
	}
}

func TestFailoversRestartedTarget(t *testing.T) {
	// b1 killed, restarted, elected again: its acks count once it was
	// restarted, not before (a send in flight at the kill).
	var b builder
	b.ack(1, 1, 1, "b1", true)
	kill := Event{At: b.t - 5*ms, Kind: "kill", Target: "b1"} // the ack above ends after the kill mark
	b.t += time.Second
	restart := Event{At: b.t, Kind: Restart, Target: "b1"}
	b.t += 500 * ms
	a := b.ack(1, 2, 1, "b1", true)
	fs := Failovers(b.atts, []Event{kill, restart}, "kill")
	if len(fs) != 1 || fs[0].FirstAck != a.End-kill.At || fs[0].By != "b1" {
		t.Fatalf("failovers %+v", fs)
	}
	// Without the restart the target's acks never count.
	if fs := Failovers(b.atts, []Event{kill}, "kill"); fs[0].FirstAck != -1 {
		t.Fatalf("failovers %+v", fs)
	}
}

func TestCheckLease(t *testing.T) {
	var b builder
	b.ack(1, 1, 1, "b1", true)
	cut := Event{At: b.t, Kind: "isolate", Target: "b1"}
	b.t += 500 * ms
	b.ack(1, 2, 1, "b1", true) // within the lease
	b.t += 2 * time.Second
	b.ack(2, 1, 1, "b2", true) // the new master
	heal := Event{At: b.t + time.Second, Kind: "heal", Target: "b1"}
	events := []Event{cut, heal}
	r := CheckLease(b.atts, events, time.Second, "isolate")
	if len(r.Faults) != 1 || r.Faults[0].Acked != 1 || r.Faults[0].Last != 510*ms || len(r.Errors()) != 0 {
		t.Fatalf("report %+v", r)
	}
	// An ack by the cut-off master of a send made 1.5 s after the cut.
	b.t = cut.At + 1500*ms
	b.ack(1, 3, 1, "b1", false)
	r = CheckLease(b.atts, events, time.Second, "isolate")
	if len(r.Faults[0].Late) != 1 || len(r.Errors()) != 1 {
		t.Fatalf("report %+v", r)
	}
	// After the heal it may be master again (a new election).
	b.t = heal.At + time.Second
	b.ack(1, 4, 1, "b1", true)
	if r := CheckLease(b.atts, events, time.Second, "isolate"); len(r.Faults[0].Late) != 1 {
		t.Fatalf("report %+v", r)
	}
}
