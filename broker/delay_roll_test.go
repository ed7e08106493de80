package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestTimerSurvivesRetention: a timer message due after its CommitLog
// segment expires is copied ahead of retention and delivered once, after
// the segment that first held it is deleted.
func TestTimerSurvivesRetention(t *testing.T) {
	// (was skipped)
	db := startDelayBroker(t, t.TempDir(), func(o *Options) {
		o.Store.CommitLog.SegmentSize = 1 << 20
		o.Store.Retention.MaxAge = 2 * time.Second
		o.Store.Retention.DeleteHours = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}
		o.Store.RetentionInterval = time.Hour // run by hand below
		o.MaxMessageSize = 256 << 10
		o.Delay.RollAhead = time.Second
		o.Delay.RollMargin = 0
		o.Delay.RollInterval = 50 * time.Millisecond
	})
	createTopic(t, db.c, "rt", 1)
	createTopic(t, db.c, "filler", 1)
	db.send(t, delayedMsg("rt", 0, "late", message.PropertyTimerDelayMS, "6000"))
	db.send(t, delayedMsg("rt", 0, "soon", message.PropertyTimerDelayMS, "300"))
	// Fill the first segment so that it can expire.
	big := strings.Repeat("x", 200<<10)
	for i := 0; i < 8; i++ {
		db.send(t, &pb.Message{Topic: "filler", Body: []byte(big)})
	}
	first := db.b.Store().CommitLog().Segments()[0]
	delayWait(t, 10*time.Second, "the first segment to be deleted", func() bool {
		if _, err := db.b.Store().RunRetention(time.Now()); err != nil {
			t.Fatal(err)
		}
		return db.b.Store().CommitLog().MinOffset() > first.Start
	})
	// "soon" is delivered within 300 ms, possibly into the first segment
	// (then deleted with it): look for "late", and count deliveries.
	late := func() []*message.Ext {
		var out []*message.Ext
		for _, m := range db.pullAll(t, "rt", 0, 0) {
			if string(m.Body) == "late" {
				out = append(out, m)
			}
		}
		return out
	}
	if !waitUntil(15*time.Second, func() bool { return len(late()) >= 1 }) {
		t.Fatalf("timed out waiting for the late timer message: segments %+v; engine %+v",
			db.b.Store().CommitLog().Segments(), db.b.DelayEngine().Status())
	}
	time.Sleep(300 * time.Millisecond)
	got := late()
	if len(got) != 1 {
		t.Fatalf("late delivered %d times", len(got))
	}
	if st := db.b.DelayEngine().Status(); st.Delivered != 2 {
		t.Fatalf("engine delivered %d, want 2 (soon and late, once each)", st.Delivered)
	}
	due, _ := strconv.ParseInt(got[0].Properties[message.PropertyTimerOutMS], 10, 64)
	if got[0].StoreTimestamp < due {
		t.Fatalf("delivered %d ms early", due-got[0].StoreTimestamp)
	}
	if _, ok := got[0].Properties[message.PropertyTimerOrigin]; ok {
		t.Fatalf("delivered message keeps %s", message.PropertyTimerOrigin)
	}
	if st := db.b.DelayEngine().Status(); st.Lost != 0 {
		t.Fatalf("engine lost %d", st.Lost)
	}
}

// waitUntil polls cond until it holds (true) or d passes (false).
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
