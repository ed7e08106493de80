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
	t.Skip("known gap: a timer message whose segment is deleted by retention before it is due is not yet delivered; see the delayed-delivery issue")
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
	delayWait(t, 15*time.Second, "both timer messages", func() bool { return len(db.pullAll(t, "rt", 0, 0)) >= 2 })
	time.Sleep(300 * time.Millisecond)
	got := db.pullAll(t, "rt", 0, 0)
	if len(got) != 2 || string(got[0].Body) != "soon" || string(got[1].Body) != "late" {
		t.Fatalf("delivered %d: %v", len(got), got)
	}
	due, _ := strconv.ParseInt(got[1].Properties[message.PropertyTimerOutMS], 10, 64)
	if got[1].StoreTimestamp < due {
		t.Fatalf("delivered %d ms early", due-got[1].StoreTimestamp)
	}
	if _, ok := got[1].Properties[message.PropertyTimerOrigin]; ok {
		t.Fatalf("delivered message keeps %s", message.PropertyTimerOrigin)
	}
	if st := db.b.DelayEngine().Status(); st.Lost != 0 {
		t.Fatalf("engine lost %d", st.Lost)
	}
}
