package client

import (
	"testing"
	"time"
)

func TestNewRouteInfoQueueLists(t *testing.T) {
	r := &TopicRoute{
		Topic: "t",
		Queues: []QueueData{
			{BrokerName: "a", ReadQueues: 3, WriteQueues: 3, Perm: PermReadWrite},
			{BrokerName: "b", ReadQueues: 2, WriteQueues: 2, Perm: PermReadWrite},
			{BrokerName: "c", ReadQueues: 2, WriteQueues: 2, Perm: PermRead},      // read-only
			{BrokerName: "d", ReadQueues: 1, WriteQueues: 1, Perm: PermReadWrite}, // no master
			{BrokerName: "e", ReadQueues: 0, WriteQueues: 2, Perm: PermWrite},
		},
		Brokers: []BrokerData{
			{BrokerName: "a", Addrs: map[int64]string{0: "a:1"}},
			{BrokerName: "b", Addrs: map[int64]string{0: "b:1", 1: "b:2"}},
			{BrokerName: "c", Addrs: map[int64]string{0: "c:1"}},
			{BrokerName: "d", Addrs: map[int64]string{1: "d:2"}},
			{BrokerName: "e", Addrs: map[int64]string{0: "e:1"}},
		},
	}
	ri := newRouteInfo(r, time.Now())
	if got, want := ids(ri.publish), "a0 b0 e0 a1 b1 e1 a2 "; got != want {
		t.Errorf("publish = %q, want %q (interleaved across brokers)", got, want)
	}
	if got, want := ids(ri.ordered), "a0 a1 a2 b0 b1 e0 e1 "; got != want {
		t.Errorf("ordered = %q, want %q", got, want)
	}
	if got, want := ids(ri.subscribe), "a0 a1 a2 b0 b1 c0 c1 d0 "; got != want {
		t.Errorf("subscribe = %q, want %q", got, want)
	}
	if got := ri.brokers["d"].ReadAddr(); got != "d:2" {
		t.Errorf("read address of a group without master = %q, want the slave", got)
	}
}

func TestPickQueue(t *testing.T) {
	qs := []MessageQueue{
		{BrokerName: "a", QueueID: 0}, {BrokerName: "b", QueueID: 0},
		{BrokerName: "a", QueueID: 1}, {BrokerName: "b", QueueID: 1},
	}
	all := func(string) bool { return true }
	none := func(string) bool { return false }
	notA := func(b string) bool { return b != "a" }
	tests := []struct {
		name  string
		start uint64
		avoid string
		avail func(string) bool
		want  string
	}{
		{"round robin 0", 0, "", all, "a0 "},
		{"round robin 1", 1, "", all, "b0 "},
		{"round robin 2", 2, "", all, "a1 "},
		{"round robin wraps", 5, "", all, "b0 "},
		{"skip unavailable", 0, "", notA, "b0 "},
		{"skip unavailable from a1", 2, "", notA, "b1 "},
		{"avoid last failed broker", 0, "a", all, "b0 "},
		{"avoid even if the other is unavailable", 0, "a", func(b string) bool { return b != "b" }, "b0 "},
		{"nothing available: keep round robin", 2, "", none, "a1 "},
		{"only the avoided broker", 0, "x", none, "a0 "},
		{"nil availability", 3, "", nil, "b1 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ids([]MessageQueue{pickQueue(qs, tt.start, tt.avoid, tt.avail)})
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	one := []MessageQueue{{BrokerName: "a", QueueID: 3}}
	if got := pickQueue(one, 7, "a", none); got != one[0] {
		t.Fatalf("a single queue on the avoided broker must still be picked, got %v", got)
	}
}

func TestFaultTracker(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newFaultTracker(20 * time.Second)
	f.now = func() time.Time { return now }

	tests := []struct {
		latency time.Duration
		failed  bool
		avoid   time.Duration
	}{
		{10 * time.Millisecond, false, 0},
		{99 * time.Millisecond, false, 0},
		{600 * time.Millisecond, false, 20 * time.Second}, // 30 s capped by the isolation
		{5 * time.Millisecond, true, 20 * time.Second},
	}
	for _, tt := range tests {
		if got := f.avoidFor(tt.latency, tt.failed); got != tt.avoid {
			t.Errorf("avoidFor(%v, %v) = %v, want %v", tt.latency, tt.failed, got, tt.avoid)
		}
	}
	f.isolation = time.Hour
	if got := f.avoidFor(2500*time.Millisecond, false); got != 2*time.Minute {
		t.Errorf("avoidFor(2.5s) = %v, want 2m", got)
	}
	f.isolation = 20 * time.Second

	if !f.available("a") {
		t.Fatal("unknown broker must be available")
	}
	f.update("a", 0, true)
	if f.available("a") || !f.available("b") {
		t.Fatal("a failed broker must be avoided, others not")
	}
	now = now.Add(19 * time.Second)
	if f.available("a") {
		t.Fatal("avoided too briefly")
	}
	now = now.Add(time.Second)
	if !f.available("a") {
		t.Fatal("avoided for longer than the isolation")
	}
	f.update("a", 0, true)
	f.update("a", time.Millisecond, false) // a fast success clears the fault
	if !f.available("a") {
		t.Fatal("a fast success must clear the fault")
	}
}

// The producer's selection avoids a broker that just failed and returns to
// it once its isolation ends.
func TestProducerSelectionAvoidsFailedBroker(t *testing.T) {
	p, err := NewProducer("pg", WithNameServers("127.0.0.1:1"), WithFaultIsolation(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	now := time.Unix(0, 0)
	p.faults.now = func() time.Time { return now }
	ri := newRouteInfo(&TopicRoute{Topic: "t",
		Queues:  []QueueData{{BrokerName: "a", ReadQueues: 2, WriteQueues: 2, Perm: PermReadWrite}, {BrokerName: "b", ReadQueues: 2, WriteQueues: 2, Perm: PermReadWrite}},
		Brokers: []BrokerData{{BrokerName: "a", Addrs: map[int64]string{0: "a"}}, {BrokerName: "b", Addrs: map[int64]string{0: "b"}}},
	}, now)
	msg := &Message{Topic: "t"}
	so := &sendOptions{}
	count := func() map[string]int {
		m := map[string]int{}
		for i := 0; i < 100; i++ {
			q, err := p.selectQueue(ri, msg, so, "")
			if err != nil {
				t.Fatal(err)
			}
			m[q.BrokerName]++
		}
		return m
	}
	if c := count(); c["a"] != 50 || c["b"] != 50 {
		t.Fatalf("healthy brokers: %v, want an even split", c)
	}
	p.faults.update("a", 0, true)
	if c := count(); c["a"] != 0 {
		t.Fatalf("failed broker still chosen: %v", c)
	}
	now = now.Add(time.Minute)
	if c := count(); c["a"] != 50 {
		t.Fatalf("recovered broker not chosen again: %v", c)
	}
	// Ordered sends ignore faults: the same key always maps to one queue.
	p.faults.update("a", 0, true)
	so = &sendOptions{shardingKey: "order-1"}
	first, _ := p.selectQueue(ri, msg, so, "")
	for i := 0; i < 10; i++ {
		if q, _ := p.selectQueue(ri, msg, so, ""); q != first {
			t.Fatalf("sharding key moved from %v to %v", first, q)
		}
	}
	if want := ri.ordered[shardIndex("order-1", 4)]; first != want {
		t.Fatalf("sharding key went to %v, want %v", first, want)
	}
	// A queue selector sees the sorted writable queues.
	so = &sendOptions{selector: func(qs []MessageQueue, _ *Message) MessageQueue { return qs[len(qs)-1] }}
	if q, _ := p.selectQueue(ri, msg, so, ""); q.BrokerName != "b" || q.QueueID != 1 {
		t.Fatalf("selector got %v", q)
	}
}
