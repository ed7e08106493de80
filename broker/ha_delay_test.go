package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestSlaveFollowsMasterDelayProgress: a slave runs the delay service
// without delivering; its delay level offsets (persisted in its own
// delayOffset.json) and its timer engine's inherited progress follow the
// master's, and the master's cancellations reach it as markers, also across
// a restart. Promoted, it delivers from there: nothing the master delivered
// again, nothing cancelled, and new delayed messages.
func TestSlaveFollowsMasterDelayProgress(t *testing.T) {
	ctx := context.Background()
	levels := func(o *broker.Options) { o.Delay.Levels = "300ms 600ms" }
	master := startDelayBroker(t, t.TempDir(), haOpts(broker.ReplicationSync), levels)
	slaveDir := t.TempDir()
	// The slave is async: promoted, it has no slave of its own.
	slaveOpts := []func(*broker.Options){haOpts(broker.ReplicationAsync), slaveOf(master.b, 1), levels}
	slave := startDelayBroker(t, slaveDir, slaveOpts...)
	testutil.WaitFor(t, 5*time.Second, "the slave in sync", func() error {
		if n := master.b.Replication().Server().InSync(); n != 1 {
			return fmt.Errorf("%d slaves in sync", n)
		}
		return nil
	})
	createTopic(t, master.c, "fo", 1)
	if d := slave.b.DelayService(); d == nil || d.Active() || slave.b.DelayEngine() == nil || slave.b.DelayEngine().Active() {
		t.Fatal("the slave's delay service is missing or delivering")
	}

	now := time.Now().UnixMilli()
	for i := 0; i < 10; i++ {
		master.send(t, delayedMsg("fo", 0, fmt.Sprint("l1-", i), message.PropertyDelayLevel, "1"))
		master.send(t, delayedMsg("fo", 0, fmt.Sprint("l2-", i), message.PropertyDelayLevel, "2"))
		master.send(t, delayedMsg("fo", 0, fmt.Sprint("t-", i), message.PropertyTimerDeliverMS, strconv.FormatInt(now+200+int64(i)*50, 10)))
	}
	cx := master.send(t, delayedMsg("fo", 0, "cx", message.PropertyTimerDelayMS, "1500"))
	r, err := master.d.Cancel(ctx, &pb.CancelDelayedRequest{Topic: "fo", UniqueId: "Ucx"})
	if err != nil || wire.FromStatus(r.Status) != nil || r.Copies != 1 {
		t.Fatalf("cancel: %v %v", err, r.GetStatus())
	}
	testutil.WaitFor(t, 10*time.Second, "delivery on the master", master.pulled(t, "fo", func(n int) bool { return n == 30 }))

	md, sd := master.b.DelayService(), slave.b.DelayService()
	testutil.WaitFor(t, 10*time.Second, "the master's level offsets on the slave", func() error {
		mo, so := md.LevelOffsets(), sd.LevelOffsets()
		if mo[1] != 10 || mo[2] != 10 || !maps.Equal(mo, so) {
			return fmt.Errorf("level offsets: master %v, slave %v", mo, so)
		}
		if st := slave.b.DelayEngine().Status(); st.Skipped != 10 || st.Cancelled != 1 || st.Delivered != 0 {
			return fmt.Errorf("slave's timer engine: %+v", st)
		}
		return nil
	})
	// The offsets are adopted in memory, then written to the file.
	testutil.WaitFor(t, 5*time.Second, "the slave's delayOffset.json", func() error {
		var f struct {
			OffsetTable map[string]int64 `json:"offsetTable"`
		}
		b, err := os.ReadFile(filepath.Join(slaveDir, "config", "delayOffset.json"))
		if err != nil || json.Unmarshal(b, &f) != nil || f.OffsetTable["1"] != 10 || f.OffsetTable["2"] != 10 {
			return fmt.Errorf("%s %v", b, err)
		}
		return nil
	})
	// Nothing delivered by the slave itself: its log is the master's.
	waitCaughtUp(t, master.b, slave.b)
	sameLog(t, master.b.Store().CommitLog(), slave.b.Store().CommitLog())
	if r, _ := slave.d.Cancel(ctx, &pb.CancelDelayedRequest{Topic: "fo", UniqueId: "Ucx"}); !errors.Is(wire.FromStatus(r.GetStatus()), wire.ErrNotMaster) {
		t.Fatalf("cancel on the slave: %v", r.GetStatus())
	}
	if s, _ := slave.d.Status(ctx, &pb.DelayStatusRequest{}); !errors.Is(wire.FromStatus(s.GetStatus()), wire.ErrNotMaster) {
		t.Fatalf("delay status on the slave: %v", s.GetStatus())
	}

	// Restarted, the slave keeps what it took.
	inherited := slave.b.DelayEngine().Inherited()
	slave.close()
	slave = startDelayBroker(t, slaveDir, slaveOpts...)
	if got := slave.b.DelayService().LevelOffsets(); got[1] != 10 || got[2] != 10 {
		t.Fatalf("slave's offsets after a restart: %v", got)
	}
	e := slave.b.DelayEngine()
	if got := e.Inherited(); len(inherited) == 0 || !saysAsMuch(got, inherited) {
		t.Fatalf("inherited after a restart: %+v, before %+v", got, inherited)
	}
	if !e.Cancelled(cx.CommitLogOffset) {
		t.Fatal("the cancellation is lost on the slave's restart")
	}
	waitCaughtUp(t, master.b, slave.b)
	// The restarted slave replicates again before the master stops (a
	// slave that never replicated since its start is promoted only when
	// forced: it cannot tell what the master acknowledged meanwhile).
	testutil.WaitFor(t, 5*time.Second, "the restarted slave in sync", func() error {
		if n := master.b.Replication().Server().InSync(); n != 1 {
			return fmt.Errorf("%d slaves in sync", n)
		}
		return nil
	})

	// Promoted after the master stops, it delivers new delayed messages;
	// each level and the timer wheel deliver in order, so once the new ones
	// arrive everything before them was seen: nothing came twice and the
	// cancelled message (due before the new timer message) never.
	master.close()
	res, err := slave.b.Promote(ctx, broker.PromoteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Epoch != 1 {
		t.Fatalf("promote: %+v", res)
	}
	testutil.WaitFor(t, 5*time.Second, "delayed delivery on the promoted slave", func() error {
		if !slave.b.DelayService().Active() {
			return errors.New("not delivering")
		}
		return nil
	})
	slave.send(t, delayedMsg("fo", 0, "new-l1", message.PropertyDelayLevel, "1"))
	slave.send(t, delayedMsg("fo", 0, "new-l2", message.PropertyDelayLevel, "2"))
	slave.send(t, delayedMsg("fo", 0, "new-t", message.PropertyTimerDeliverMS, strconv.FormatInt(max(now+2000, time.Now().UnixMilli()+100), 10)))
	testutil.WaitFor(t, 10*time.Second, "the new messages", slave.pulled(t, "fo", func(n int) bool { return n >= 33 }))
	seen := map[string]int{}
	for _, m := range slave.pullAll(t, "fo", 0, 0) {
		seen[string(m.Body)]++
		if seen[string(m.Body)] > 1 {
			t.Fatalf("%s delivered twice", m.Body)
		}
	}
	if len(seen) != 33 || seen["cx"] != 0 || seen["new-t"] != 1 {
		t.Fatalf("delivered %v", seen)
	}
}

// saysAsMuch reports whether every statement of b is dominated by one of a.
func saysAsMuch(a, b []delay.Progress) bool {
	for _, q := range b {
		ok := false
		for _, p := range a {
			ok = ok || (p.Location >= q.Location && p.DueBeforeMS >= q.DueBeforeMS)
		}
		if !ok {
			return false
		}
	}
	return true
}

// TestFencedMasterStopsDelay: a master that stops being one (fenced) stops
// delivering delayed messages: pending ones stay in the schedule and timer
// queues, for the new master.
func TestFencedMasterStopsDelay(t *testing.T) {
	db := startDelayBroker(t, t.TempDir(), func(o *broker.Options) { o.Delay.Levels = "200ms 1s" })
	createTopic(t, db.c, "fe", 1)
	db.send(t, delayedMsg("fe", 0, "soon", message.PropertyDelayLevel, "1"))
	testutil.WaitFor(t, 5*time.Second, "delivery while master", db.pulled(t, "fe", func(n int) bool { return n == 1 }))
	db.send(t, delayedMsg("fe", 0, "level", message.PropertyDelayLevel, "2"))
	r := db.send(t, delayedMsg("fe", 0, "timer", message.PropertyTimerDelayMS, "1000"))
	sent := time.Now()
	db.b.Replication().Fence("test", errors.New("a newer master registered"))
	testutil.WaitFor(t, 5*time.Second, "delivery to stop", func() error {
		d := db.b.DelayService()
		if d.Active() || db.b.DelayEngine().Active() {
			return fmt.Errorf("service delivering %v, timer engine %v", d.Active(), db.b.DelayEngine().Active())
		}
		return nil
	})
	if s, _ := db.d.Status(context.Background(), &pb.DelayStatusRequest{}); !errors.Is(wire.FromStatus(s.GetStatus()), wire.ErrNotMaster) {
		t.Fatalf("delay status on a fenced master: %v", s.GetStatus())
	}
	// Both were due a while ago: neither is delivered.
	time.Sleep(time.Until(sent.Add(1500 * time.Millisecond)))
	if got := db.pullAll(t, "fe", 0, 0); len(got) != 1 {
		t.Fatalf("a fenced master delivered %d messages", len(got)-1)
	}
	if off := db.b.DelayService().LevelOffsets()[2]; off != 0 {
		t.Fatalf("level 2 offset moved to %d on a fenced master", off)
	}
	if st := db.b.DelayEngine().Status(); st.Delivered != 0 || st.Pending != 1 {
		t.Fatalf("timer engine of a fenced master: %+v (timer message at %d)", st, r.CommitLogOffset)
	}
}
