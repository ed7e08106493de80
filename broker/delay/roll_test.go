package delay

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// TestTimerSurvivesRetention: a timer message due after its CommitLog
// segment expires is copied ahead of retention and delivered once, after
// the segment that first held it is deleted.
func TestTimerSurvivesRetention(t *testing.T) {
	ts := startTestService(t, t.TempDir(), func(so *store.Options, o *BrokerOptions) {
		so.CommitLog.SegmentSize = 1 << 20
		so.Retention.MaxAge = 2 * time.Second
		so.Retention.DeleteHours = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}
		so.RetentionInterval = time.Hour // run by hand below
		so.MaxMessageSize = 256 << 10
		o.RollAhead = time.Second
		o.RollMargin = 0
		o.RollInterval = 50 * time.Millisecond
	})
	st, e := ts.host.st, ts.svc.Engine()
	timerMsg := func(body, delayMS string) *message.Ext {
		return &message.Ext{Message: message.Message{Topic: "rt", Body: []byte(body),
			Properties: map[string]string{message.PropertyTimerDelayMS: delayMS}}}
	}
	ts.send(t, timerMsg("late", "6000"))
	ts.send(t, timerMsg("soon", "300"))
	// Fill the first segment so that it can expire.
	big := strings.Repeat("x", 200<<10)
	for i := 0; i < 8; i++ {
		ts.send(t, &message.Ext{Message: message.Message{Topic: "filler", Body: []byte(big)}})
	}
	first := st.CommitLog().Segments()[0]
	testutil.WaitFor(t, 10*time.Second, "the first segment to be deleted", func() error {
		if _, err := st.RunRetention(time.Now()); err != nil {
			t.Fatal(err)
		}
		if lo := st.CommitLog().MinOffset(); lo <= first.Start {
			return fmt.Errorf("the log starts at %d", lo)
		}
		return nil
	})
	// "soon" is delivered within 300 ms, possibly into the first segment
	// (then deleted with it): look for "late", and count deliveries.
	late := func() []*message.Ext {
		var out []*message.Ext
		for _, m := range ts.pullAll(t, "rt", 0, 0) {
			if string(m.Body) == "late" {
				out = append(out, m)
			}
		}
		return out
	}
	testutil.WaitFor(t, 15*time.Second, "the late timer message", func() error {
		if len(late()) >= 1 {
			return nil
		}
		return fmt.Errorf("segments %+v; engine %+v", st.CommitLog().Segments(), e.Status())
	})
	time.Sleep(300 * time.Millisecond)
	got := late()
	if len(got) != 1 {
		t.Fatalf("late delivered %d times", len(got))
	}
	if st := e.Status(); st.Delivered != 2 {
		t.Fatalf("engine delivered %d, want 2 (soon and late, once each)", st.Delivered)
	}
	due, _ := strconv.ParseInt(got[0].Properties[message.PropertyTimerOutMS], 10, 64)
	if got[0].StoreTimestamp < due {
		t.Fatalf("delivered %d ms early", due-got[0].StoreTimestamp)
	}
	if _, ok := got[0].Properties[message.PropertyTimerOrigin]; ok {
		t.Fatalf("delivered message keeps %s", message.PropertyTimerOrigin)
	}
	if st := e.Status(); st.Lost != 0 {
		t.Fatalf("engine lost %d", st.Lost)
	}
}
