package broker

import (
	"path/filepath"
	"testing"
)

// TestTopicEntryKeepsCounters: a topic's entry holds its configuration as
// it was when put, and a write that replaces the entry (an update, or a
// replace of the whole table) hands the send counters on; a topic removed
// and made again starts without them.
func TestTopicEntryKeepsCounters(t *testing.T) {
	tt := openTopics(t, filepath.Join(t.TempDir(), "topics.json"))
	if err := tt.put(testTopic("a"), false); err != nil {
		t.Fatal(err)
	}
	e1 := tt.entry("a")
	if e1 == nil || e1.cfg.WriteQueueNums != 4 || e1.in.Load() != nil {
		t.Fatalf("new entry: %+v", e1)
	}
	in := &topicIn{}
	e1.in.Store(in)

	up := testTopic("a")
	up.WriteQueueNums = 8
	if err := tt.put(up, true); err != nil {
		t.Fatal(err)
	}
	e2 := tt.entry("a")
	if e2 == e1 || e2.cfg.WriteQueueNums != 8 || e1.cfg.WriteQueueNums != 4 {
		t.Fatalf("after the update: old entry %+v, new %+v", e1.cfg, e2.cfg)
	}
	if e2.in.Load() != in {
		t.Fatal("the update dropped the topic's counters")
	}

	if _, _, err := tt.replaceAll([]TopicConfig{testTopic("a"), testTopic("b")}, dataVersion{Counter: 99}); err != nil {
		t.Fatal(err)
	}
	if e3 := tt.entry("a"); e3 == nil || e3.cfg.WriteQueueNums != 4 || e3.in.Load() != in {
		t.Fatalf("after a replace: %+v", e3)
	}
	if tt.entry("b") == nil || tt.entry("b").in.Load() != nil {
		t.Fatal("a topic new with the replace has counters")
	}

	if ok, err := tt.remove("a"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if tt.entry("a") != nil {
		t.Fatal("removed topic still has an entry")
	}
	if err := tt.put(testTopic("a"), false); err != nil {
		t.Fatal(err)
	}
	if e := tt.entry("a"); e == nil || e.in.Load() != nil {
		t.Fatal("a topic made again kept the removed one's counters")
	}
}
