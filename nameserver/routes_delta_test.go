package nameserver

import (
	"testing"
	"time"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func delta(base, v int64, count int, removed []string, ts ...TopicConfig) Registration {
	g := reg("C1", "broker-a", 0, "10.0.0.1:10911", ts...)
	g.Delta = true
	g.BaseVersion = DataVersion{Timestamp: 1, Counter: base}
	g.DataVersion = &DataVersion{Timestamp: 1, Counter: v}
	g.Removed = removed
	g.TopicCount = count
	return g
}

func wantQueues(t *testing.T, r *Routes, topic string, n int32) {
	t.Helper()
	rt, err := r.Route(topic)
	if n == 0 {
		if err == nil {
			t.Fatalf("%s routed: %+v", topic, rt.Queues)
		}
		wantCode(t, err, pb.Code_TOPIC_NOT_EXIST)
		return
	}
	if err != nil {
		t.Fatalf("route %s: %v", topic, err)
	}
	if len(rt.Queues) != 1 || rt.Queues[0].WriteQueues != n {
		t.Fatalf("route %s: %+v, want %d queues", topic, rt.Queues, n)
	}
}

// TestRegisterDelta: a delta on the version held applies its topics and
// removals and leaves the others; a heartbeat delta changes no topic; a
// delta on another version, from an unknown address or under another id is
// stale and changes nothing, liveness included.
func TestRegisterDelta(t *testing.T) {
	r := NewRoutes(time.Minute)
	mustRegister(t, r, reg("C1", "broker-a", 0, "10.0.0.1:10911", topics("a:4", "b:4", "c:4")...), t0)

	res := mustRegister(t, r, delta(1, 2, 3, []string{"b"}, topics("c:2", "d:8")...), t0.Add(time.Second))
	if res.TopicsStale || !res.TopicsApplied {
		t.Fatalf("delta: %+v", res)
	}
	wantQueues(t, r, "a", 4)
	wantQueues(t, r, "b", 0)
	wantQueues(t, r, "c", 2)
	wantQueues(t, r, "d", 8)
	lb, _ := r.Live("10.0.0.1:10911")
	if lb.DataVersion.Counter != 2 || lb.TopicCount != 3 || !lb.LastUpdate.Equal(t0.Add(time.Second)) {
		t.Fatalf("live after delta: %+v", lb)
	}

	// Heartbeat.
	if res := mustRegister(t, r, delta(2, 2, 3, nil), t0.Add(2*time.Second)); res.TopicsStale || res.TopicsApplied {
		t.Fatalf("heartbeat: %+v", res)
	}
	// Stale: another base version.
	if res := mustRegister(t, r, delta(1, 3, 4, nil, topics("e:1")...), t0.Add(3*time.Second)); !res.TopicsStale {
		t.Fatalf("delta on an old base: %+v", res)
	}
	wantQueues(t, r, "e", 0)
	lb, _ = r.Live("10.0.0.1:10911")
	if lb.DataVersion.Counter != 2 || !lb.LastUpdate.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("a stale delta changed the live entry: %+v", lb)
	}
	// Stale: another id for the address, an unknown address.
	other := delta(2, 3, 1, nil, topics("e:1")...)
	other.ID = 1
	if res := mustRegister(t, r, other, t0); !res.TopicsStale {
		t.Fatalf("delta under another id: %+v", res)
	}
	other = delta(2, 3, 1, nil, topics("e:1")...)
	other.Addr = "10.0.0.9:10911"
	if res := mustRegister(t, r, other, t0); !res.TopicsStale {
		t.Fatalf("delta from an unknown address: %+v", res)
	}
	if _, ok := r.Live("10.0.0.9:10911"); ok {
		t.Fatal("a stale delta registered an address")
	}
	wantQueues(t, r, "e", 0)

	// A whole table after deltas drops what it no longer lists.
	whole := reg("C1", "broker-a", 0, "10.0.0.1:10911", topics("a:4", "e:1")...)
	whole.DataVersion = &DataVersion{Timestamp: 1, Counter: 5}
	mustRegister(t, r, whole, t0.Add(4*time.Second))
	for topic, n := range map[string]int32{"a": 4, "b": 0, "c": 0, "d": 0, "e": 1} {
		wantQueues(t, r, topic, n)
	}

	// Invalid deltas are refused.
	bad := delta(5, 6, 1, []string{"a"}, topics("a:1")...)
	_, err := r.Register(bad, t0)
	wantCode(t, err, pb.Code_INVALID_PARAMETER)
	bad = delta(5, 6, 1, []string{"bad topic"})
	_, err = r.Register(bad, t0)
	wantCode(t, err, pb.Code_ILLEGAL_TOPIC)
}

// TestRegisterDeltaAfterDeleteTopic: routes deleted on the NameServer stay
// deleted through heartbeats; the broker's next change is answered stale,
// and its whole table brings them back, as before deltas existed.
func TestRegisterDeltaAfterDeleteTopic(t *testing.T) {
	r := NewRoutes(time.Minute)
	mustRegister(t, r, reg("C1", "broker-a", 0, "10.0.0.1:10911", topics("a:4", "b:4")...), t0)
	if err := r.DeleteTopic("a", ""); err != nil {
		t.Fatal(err)
	}
	if res := mustRegister(t, r, delta(1, 1, 2, nil), t0); res.TopicsStale {
		t.Fatalf("heartbeat after DeleteTopic: %+v", res)
	}
	wantQueues(t, r, "a", 0)
	if res := mustRegister(t, r, delta(1, 2, 3, nil, topics("c:4")...), t0); !res.TopicsStale {
		t.Fatalf("change after DeleteTopic: %+v", res)
	}
	whole := reg("C1", "broker-a", 0, "10.0.0.1:10911", topics("a:4", "b:4", "c:4")...)
	whole.DataVersion = &DataVersion{Timestamp: 1, Counter: 2}
	mustRegister(t, r, whole, t0)
	for topic, n := range map[string]int32{"a": 4, "b": 4, "c": 4} {
		wantQueues(t, r, topic, n)
	}
	if res := mustRegister(t, r, delta(2, 3, 2, []string{"c"}), t0); res.TopicsStale {
		t.Fatalf("delta after the whole table: %+v", res)
	}
	wantQueues(t, r, "c", 0)
}

// TestGroupTopicsFollowRoutes: a group's own topic set follows its queue
// data through registrations, DeleteTopic and the group's removal, so that
// another group's topics are never touched.
func TestGroupTopicsFollowRoutes(t *testing.T) {
	r := NewRoutes(time.Minute)
	mustRegister(t, r, reg("C1", "broker-a", 0, "10.0.0.1:10911", topics("a:4", "shared:4")...), t0)
	mustRegister(t, r, reg("C1", "broker-b", 0, "10.0.0.2:10911", topics("b:4", "shared:2")...), t0)
	if err := r.DeleteTopic("shared", "C1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.Unregister("C1", "broker-a", "10.0.0.1:10911", 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	wantQueues(t, r, "a", 0)
	wantQueues(t, r, "b", 4)
	wantQueues(t, r, "shared", 0)
	r.mu.RLock()
	defer r.mu.RUnlock()
	if g := r.groups["broker-b"]; len(g.topics) != 1 {
		t.Fatalf("broker-b's topic set: %v", g.topics)
	}
	for topic, m := range r.topics {
		for name := range m {
			if _, ok := r.groups[name].topics[topic]; !ok {
				t.Fatalf("%s of %s missing from its group's set", topic, name)
			}
		}
	}
}
