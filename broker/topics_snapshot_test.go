package broker

import (
	"fmt"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"
)

// TestTopicSnapshotMatchesVersion: while topics are created, every snapshot
// pairs a data version with exactly the topics that version counts. A
// registration built from a version read apart from its topics could carry
// a version that already counts a topic its list lacks; a NameServer that
// stored it would treat every later registration as unchanged and never
// route the topic.
func TestTopicSnapshotMatchesVersion(t *testing.T) {
	opts := DefaultOptions(t.TempDir())
	opts.ListenAddr = "127.0.0.1:0"
	b, err := New(opts, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	tt := b.topics
	const n = 200
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			if err := tt.put(TopicConfig{Name: fmt.Sprintf("snap-%03d", i), ReadQueueNums: 1, WriteQueueNums: 1,
				Perm: PermRead | PermWrite}, false); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	seen := map[dataVersion]int{} // version → number of topics it came with
	for {
		topics, v := b.registeredTopics()
		if have, ok := seen[v]; ok && have != len(topics) {
			t.Fatalf("version %+v came with %d topics and with %d", v, have, len(topics))
		}
		seen[v] = len(topics)
		if len(topics) == n {
			break
		}
	}
	wg.Wait()
	if len(seen) < 2 {
		t.Logf("only %d versions observed", len(seen))
	}
}
