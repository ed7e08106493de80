package replication

import (
	"testing"

	"github.com/bolide-mq/bolide/broker/topic"
)

// A slave takes a table unless it is older than the one applied: a lower
// epoch, or the same epoch and a lower version; a higher epoch wins
// whatever its version.
func TestTableVersionTake(t *testing.T) {
	var tv tableVersion
	if !tv.take(1, topic.DataVersion{Counter: 0}) {
		t.Fatal("nothing applied yet: refused")
	}
	tv.set(3, topic.DataVersion{Timestamp: 100, Counter: 10})
	for _, c := range []struct {
		epoch int64
		v     topic.DataVersion
		want  bool
	}{
		{3, topic.DataVersion{Timestamp: 100, Counter: 10}, true}, // same table
		{3, topic.DataVersion{Timestamp: 99, Counter: 11}, true},  // newer counter
		{3, topic.DataVersion{Timestamp: 200, Counter: 9}, false}, // older counter
		{3, topic.DataVersion{Timestamp: 99, Counter: 10}, false},
		{2, topic.DataVersion{Timestamp: 500, Counter: 50}, false}, // older master
		{4, topic.DataVersion{Timestamp: 1, Counter: 1}, true},     // newer master
	} {
		if got := tv.take(c.epoch, c.v); got != c.want {
			t.Errorf("take(%d, %+v) after (3, {100 10}) = %v, want %v", c.epoch, c.v, got, c.want)
		}
	}
}
