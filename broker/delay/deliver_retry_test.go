package delay

import (
	"context"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/message"
)

// A delivery stored but not yet replicated (a new master whose slaves are
// still catching up) waits again on the same copy: the message is stored
// once, not once per attempt.
func TestDeliverWaitsForReplicationWithoutStoringAgain(t *testing.T) {
	ts := startTestService(t, t.TempDir(), nil)
	ts.host.replFails.Store(3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := &message.Ext{Message: message.Message{Topic: "real", Body: []byte("x"), Properties: map[string]string{}},
		StoreHost: ts.host.StoreHost()}
	rec, err := message.EncodeUnsealed(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.svc.deliver(ctx, []store.Prepared{{Record: rec, Topic: "real"}}); err != nil {
		t.Fatal(err)
	}
	if p, w := ts.host.puts.Load(), ts.host.waits.Load(); p != 1 || w != 4 {
		t.Fatalf("%d puts and %d waits, want 1 and 4", p, w)
	}
	if got := ts.pullAll(t, "real", 0, 0); len(got) != 1 {
		t.Fatalf("the topic holds %d messages, want 1", len(got))
	}
}
