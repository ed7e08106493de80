package broker

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/bolide-mq/bolide/internal/errcode"
)

func testTopic(name string) TopicConfig {
	return TopicConfig{Name: name, ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermReadWrite}
}

func openTopics(t *testing.T, path string) *topicTable {
	t.Helper()
	tt, err := loadTopics(path)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// TestTopicCommitDurableOnReturn: concurrent creations share writes, and
// each returns only once the file on disk holds its topic; a reopened
// table is the table in memory, version included.
func TestTopicCommitDurableOnReturn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	tt := openTopics(t, path)
	const workers, each = 16, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				name := fmt.Sprintf("t-%02d-%02d", w, i)
				if err := tt.put(testTopic(name), false); err != nil {
					t.Error(err)
					return
				}
				disk, err := loadTopics(path)
				if err != nil {
					t.Error(err)
					return
				}
				if _, ok := disk.get(name); !ok {
					t.Errorf("put of %s returned before a file holding it was written", name)
					return
				}
			}
		}()
	}
	wg.Wait()
	mem, v := tt.snapshot()
	if len(mem) != workers*each {
		t.Fatalf("%d topics in memory, want %d", len(mem), workers*each)
	}
	disk, dv := openTopics(t, path).snapshot()
	if dv != v {
		t.Fatalf("version on disk %+v, in memory %+v", dv, v)
	}
	if fmt.Sprint(disk) != fmt.Sprint(mem) {
		t.Fatal("the reopened table differs from the one in memory")
	}
	t.Logf("%d topics in %d writes", workers*each, tt.writes.Load())
}

// TestTopicCommitBatch: changes staged while a write is under way go
// together in the next write; a second creation of a name in the same
// batch is refused, a remove of a topic created earlier in the batch
// sees it, and nothing is in memory before its write.
func TestTopicCommitBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	tt := openTopics(t, path)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	tt.wmu.Lock()
	tt.beforeWrite = func() {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
	}
	tt.wmu.Unlock()

	first := make(chan error, 1)
	go func() { first <- tt.put(testTopic("first"), false) }()
	<-entered // the first write is held

	type result struct {
		name string
		err  error
	}
	staged := []string{"a", "b", "a", "c"}
	results := make(chan result, len(staged)+1)
	var wg sync.WaitGroup
	for _, name := range staged {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- result{name, tt.put(testTopic(name), false)}
		}()
	}
	waitStaged(t, tt, len(staged))
	if _, ok := tt.get("first"); ok {
		t.Fatal("a topic is in the table before its write")
	}
	tt.wmu.Lock()
	tt.beforeWrite = nil
	tt.wmu.Unlock()
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	refusedA := 0
	for r := range results {
		switch {
		case r.err == nil:
		case r.name == "a" && errors.Is(r.err, errcode.ErrTopicExists):
			refusedA++
		default:
			t.Errorf("put %s: %v", r.name, r.err)
		}
	}
	if refusedA != 1 {
		t.Errorf("%d of the two creations of a refused, want 1", refusedA)
	}
	if writes := tt.writes.Load(); writes != 2 {
		t.Errorf("%d writes, want 2 (the held one and one for the batch staged meanwhile)", writes)
	}
	for _, name := range []string{"first", "a", "b", "c"} {
		if _, ok := openTopics(t, path).get(name); !ok {
			t.Errorf("%s is not in the file", name)
		}
	}
}

// waitStaged waits until n changes are staged for the next write.
func waitStaged(t *testing.T, tt *topicTable, n int) {
	t.Helper()
	for {
		tt.wmu.Lock()
		got := 0
		if tt.next != nil {
			got = len(tt.next.changes)
		}
		tt.wmu.Unlock()
		if got == n {
			return
		}
		if got > n {
			t.Fatalf("%d changes staged, want %d", got, n)
		}
		runtimeGosched()
	}
}

// TestTopicCommitFailedWrite: when the file cannot be written, the change
// is refused with the error and the table (memory and disk) is unchanged;
// the next change after the disk recovers is written with the table as it
// was.
func TestTopicCommitFailedWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "topics.json")
	tt := openTopics(t, path)
	if err := tt.put(testTopic("kept"), false); err != nil {
		t.Fatal(err)
	}
	v := tt.dataVersion()
	// The directory gone, replaced by a file: no temp file can be made.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tt.put(testTopic("lost"), false); err == nil {
		t.Fatal("put succeeded without a file")
	}
	if existed, err := tt.remove("kept"); err == nil || existed {
		t.Fatalf("remove without a file: existed %v, err %v", existed, err)
	}
	if _, ok := tt.get("lost"); ok {
		t.Fatal("a topic whose write failed is in the table")
	}
	if _, ok := tt.get("kept"); !ok {
		t.Fatal("a topic whose removal failed left the table")
	}
	if tt.dataVersion() != v {
		t.Fatal("the version changed with failed writes")
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tt.put(testTopic("next"), false); err != nil {
		t.Fatal(err)
	}
	disk := openTopics(t, path)
	for name, want := range map[string]bool{"kept": true, "next": true, "lost": false} {
		if _, ok := disk.get(name); ok != want {
			t.Errorf("%s in the file: %v, want %v", name, ok, want)
		}
	}
}

// TestTopicFileFormat: the file has one topic a line, sorted, reads back
// with encoding/json as RocketMQ's topicConfigTable/dataVersion object, and
// a file written indented (as earlier versions did) loads too.
func TestTopicFileFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	tt := openTopics(t, path)
	for _, name := range []string{"zeta", "alpha", "mid"} {
		if err := tt.put(testTopic(name), false); err != nil {
			t.Fatal(err)
		}
	}
	upd := testTopic("mid")
	upd.ReadQueueNums, upd.Attributes = 2, map[string]string{"message.type": "FIFO"}
	if err := tt.put(upd, true); err != nil {
		t.Fatal(err)
	}
	if existed, err := tt.remove("zeta"); err != nil || !existed {
		t.Fatalf("remove zeta: %v %v", existed, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{
		`{"topicConfigTable":{`,
		`"alpha":{"topicName":"alpha","readQueueNums":4,"writeQueueNums":4,"perm":6,"order":false,"topicSysFlag":0},`,
		`"mid":{"topicName":"mid","readQueueNums":2,"writeQueueNums":4,"perm":6,"order":false,"topicSysFlag":0,"attributes":{"message.type":"FIFO"}}`,
		`},`,
	}
	if len(lines) != 5 || strings.Join(lines[:4], "\n") != strings.Join(want, "\n") || !strings.HasPrefix(lines[4], `"dataVersion":{"timestamp":`) {
		t.Fatalf("file:\n%s", b)
	}
	var f topicsFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Topics) != 2 || f.DataVersion != tt.dataVersion() {
		t.Fatalf("decoded %d topics, version %+v (table %+v)", len(f.Topics), f.DataVersion, tt.dataVersion())
	}

	// An indented file of an earlier version.
	old, err := json.MarshalIndent(topicsFile{Topics: map[string]*TopicConfig{"old": ptr(testTopic("old"))},
		DataVersion: dataVersion{Timestamp: 7, Counter: 3}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	oldPath := filepath.Join(t.TempDir(), "topics.json")
	if err := os.WriteFile(oldPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	ot := openTopics(t, oldPath)
	if _, ok := ot.get("old"); !ok || ot.dataVersion() != (dataVersion{Timestamp: 7, Counter: 3}) {
		t.Fatal("the indented file did not load")
	}
	if err := ot.put(testTopic("new"), false); err != nil {
		t.Fatal(err)
	}
	topics, v := openTopics(t, oldPath).snapshot()
	if len(topics) != 2 || topics[0].Name != "new" || topics[1].Name != "old" || v.Counter != 4 {
		t.Fatalf("after a put: %+v %+v", topics, v)
	}
}

func ptr[T any](v T) *T { return &v }

// TestTopicReplaceAll: a slave's replace reports the topics that went
// away, an identical replace writes nothing, and the file is the new table.
func TestTopicReplaceAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	tt := openTopics(t, path)
	for _, name := range []string{"a", "b", "c"} {
		if err := tt.put(testTopic(name), false); err != nil {
			t.Fatal(err)
		}
	}
	next := []TopicConfig{testTopic("b"), testTopic("d")}
	v := dataVersion{Timestamp: 42, Counter: 99}
	removed, changed, err := tt.replaceAll(next, v)
	if err != nil || !changed || fmt.Sprint(removed) != "[a c]" {
		t.Fatalf("replace: removed %v changed %v err %v", removed, changed, err)
	}
	writes := tt.writes.Load()
	if removed, changed, err := tt.replaceAll([]TopicConfig{testTopic("d"), testTopic("b")}, v); err != nil || changed || removed != nil {
		t.Fatalf("identical replace: removed %v changed %v err %v", removed, changed, err)
	}
	topics, dv := openTopics(t, path).snapshot()
	if dv != v || len(topics) != 2 || topics[0].Name != "b" || topics[1].Name != "d" {
		t.Fatalf("file after replace: %+v %+v", topics, dv)
	}
	if got := tt.writes.Load(); got != writes {
		t.Fatalf("an identical replace wrote the file (%d writes, then %d)", writes, got)
	}
}

// TestTopicsSurviveKill: a process creating topics from many goroutines is
// killed with SIGKILL; every topic it was told was created is in the table
// it reopens to.
func TestTopicsSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTopicsKillChild$")
	cmd.Env = append(os.Environ(), "BOLIDE_TOPICS_KILL_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(acked) < 300 {
		if name, ok := strings.CutPrefix(sc.Text(), "created "); ok {
			acked = append(acked, name)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("the child acknowledged only %d creations", len(acked))
	}
	tt := openTopics(t, filepath.Join(dir, "topics.json"))
	for _, name := range acked {
		if _, ok := tt.get(name); !ok {
			t.Errorf("acknowledged topic %s lost", name)
		}
	}
}

// TestTopicsKillChild is the process TestTopicsSurviveKill kills.
func TestTopicsKillChild(t *testing.T) {
	dir := os.Getenv("BOLIDE_TOPICS_KILL_DIR")
	if dir == "" {
		t.Skip("run by TestTopicsSurviveKill")
	}
	tt := openTopics(t, filepath.Join(dir, "topics.json"))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				name := fmt.Sprintf("k-%d-%d", w, i)
				if err := tt.put(testTopic(name), false); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				fmt.Println("created " + name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func runtimeGosched() { runtime.Gosched() }

// TestTopicCommitRandomBatches: batches of creations, updates and
// removals of random names, staged concurrently; after each, the sorted
// name list, the table and the file (reopened) agree.
func TestTopicCommitRandomBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	tt := openTopics(t, path)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		release := make(chan struct{})
		tt.wmu.Lock()
		tt.beforeWrite = func() { <-release }
		tt.wmu.Unlock()
		// A first change takes the writer's place and waits there.
		var wg sync.WaitGroup
		wg.Add(1)
		first := fmt.Sprintf("r-%02d", rng.IntN(40))
		go func() {
			defer wg.Done()
			_ = tt.put(testTopic(first), true)
		}()
		for {
			tt.wmu.Lock()
			w := tt.writing
			tt.wmu.Unlock()
			if w {
				break
			}
			runtime.Gosched()
		}
		n := 1 + rng.IntN(12)
		for range n {
			name := fmt.Sprintf("r-%02d", rng.IntN(40))
			op, q := rng.IntN(3), int32(1+rng.IntN(8))
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch op {
				case 0:
					_ = tt.put(TopicConfig{Name: name, ReadQueueNums: q, WriteQueueNums: q, Perm: PermReadWrite}, false)
				case 1:
					_ = tt.put(TopicConfig{Name: name, ReadQueueNums: q, WriteQueueNums: q, Perm: PermReadWrite}, true)
				default:
					_, _ = tt.remove(name)
				}
			}()
		}
		waitStaged(t, tt, n)
		tt.wmu.Lock()
		tt.beforeWrite = nil
		tt.wmu.Unlock()
		close(release)
		wg.Wait()

		topics, v := tt.snapshot()
		tt.mu.RLock()
		if len(topics) != len(tt.topics) || len(tt.lines) != len(tt.names) {
			t.Fatalf("round %d: %d names, %d lines, %d topics", round, len(tt.names), len(tt.lines), len(tt.topics))
		}
		tt.mu.RUnlock()
		for i := range topics {
			if i > 0 && topics[i-1].Name >= topics[i].Name {
				t.Fatalf("round %d: names out of order: %s, %s", round, topics[i-1].Name, topics[i].Name)
			}
		}
		disk, dv := openTopics(t, path).snapshot()
		if dv != v || fmt.Sprint(disk) != fmt.Sprint(topics) {
			t.Fatalf("round %d: the file (%+v) differs from the table (%+v):\n%v\n%v", round, dv, v, disk, topics)
		}
	}
}
