package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/fsutil"
	"github.com/bolide-mq/bolide/message"
)

// Topic permissions (RocketMQ's PermName).
const (
	PermPriority  = topic.PermPriority
	PermRead      = topic.PermRead
	PermWrite     = topic.PermWrite
	PermInherit   = topic.PermInherit
	PermReadWrite = topic.PermReadWrite
)

// TopicConfig is one topic as this broker serves it.
type TopicConfig = topic.Config

// dataVersion changes with every change of the topic table.
type dataVersion = topic.DataVersion

// topicTable holds the topics, persisted to config/topics.json.
//
// Every change goes through commit, a group commit: concurrent changes are
// staged together and one writer persists them in one write of the whole
// file (temp file, fsync, rename, fsync of the directory); a change returns
// only once a write that includes it is durable, and the table in memory
// (what get, snapshot and the registrations read) takes it only then, so
// nothing a NameServer routes or a client was told is lost in a crash.
// When a write fails, none of its changes is applied and each is answered
// with the error.
//
// The file is compact JSON with one topic a line, in name order:
//
//	{"topicConfigTable":{
//	"a":{"topicName":"a","readQueueNums":8,...},
//	"b":{...}
//	},
//	"dataVersion":{"timestamp":1764000000000,"counter":42}}
//
// Each topic's line is encoded once, when it changes (lines), so a write
// costs a copy of the lines, not a marshalling of every topic. Files
// written indented by earlier versions are read all the same.
type topicTable struct {
	mu      sync.RWMutex // guards topics, names, enc and version
	path    string
	topics  map[string]*topicEntry
	names   []string // the topics' names, sorted
	lines   [][]byte // lines[i]: names[i]'s line of the file, without the separator
	version dataVersion
	// hist is what the last writes changed, oldest first (deltaSince),
	// with histNames names in all.
	hist      []tableChange
	histNames int

	wmu     sync.Mutex // guards the fields below
	wcond   *sync.Cond // signalled when a write ends
	writing bool       // a writer is persisting a batch
	next    *topicBatch
	// writes counts the files written; beforeWrite, when set, runs
	// before each batch is written (tests).
	writes      atomic.Int64
	beforeWrite func()
}

// tableChange is what one write changed: the names of the topics put or
// removed, or all (a replace, a version bump: every topic may register
// differently), taking the table from version from to version to.
type tableChange struct {
	from, to dataVersion
	names    []string
	all      bool
}

// The history of changes kept for delta registrations: a NameServer whose
// version is older than the history is sent the whole table.
const (
	maxHistChanges = 4096
	maxHistNames   = 65536
)

// topicBatch is the changes staged for one write.
type topicBatch struct {
	changes []*topicChange
	done    bool
}

type changeKind int

const (
	changePut changeKind = iota
	changeRemove
	changeBump
	changeReplace
)

// topicChange is one change of the table and, once its batch is written,
// its outcome.
type topicChange struct {
	kind    changeKind
	cfg     TopicConfig   // put
	update  bool          // put: replace an existing topic
	name    string        // remove
	replace []TopicConfig // replace: the whole table
	version dataVersion   // replace: its version

	err     error
	existed bool     // remove: the topic was there
	removed []string // replace: the topics that went away
	changed bool     // replace: the table changed
}

// topicEntry is a topic in the table: its configuration, never changed
// once in the table, and its send counters, made on its first counted send
// and kept when an update replaces the entry, so that a send finds both
// with one lookup by name.
type topicEntry struct {
	cfg TopicConfig
	in  atomic.Pointer[topicIn]
}

type topicsFile struct {
	Topics      map[string]*TopicConfig `json:"topicConfigTable"`
	DataVersion dataVersion             `json:"dataVersion"`
}

func loadTopics(path string) (*topicTable, error) {
	t := &topicTable{path: path, topics: make(map[string]*topicEntry)}
	t.wcond = sync.NewCond(&t.wmu)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.version = dataVersion{Timestamp: time.Now().UnixMilli()}
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load topics: %w", err)
	}
	var f topicsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("load topics from %s: %w", path, err)
	}
	for name, c := range f.Topics {
		if c == nil || c.Name != name {
			return nil, fmt.Errorf("load topics from %s: entry %q is malformed", path, name)
		}
		t.topics[name] = &topicEntry{cfg: *c}
		t.names = append(t.names, name)
	}
	slices.Sort(t.names)
	t.lines = make([][]byte, len(t.names))
	for i, name := range t.names {
		if t.lines[i], err = encodeTopicLine(&t.topics[name].cfg); err != nil {
			return nil, fmt.Errorf("load topics from %s: %w", path, err)
		}
	}
	t.version = f.DataVersion
	return t, nil
}

// encodeTopicLine is a topic's line of the file: "name":{...}.
func encodeTopicLine(c *TopicConfig) ([]byte, error) {
	name, err := json.Marshal(c.Name)
	if err != nil {
		return nil, fmt.Errorf("encode topic %s: %w", c.Name, err)
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode topic %s: %w", c.Name, err)
	}
	line := make([]byte, 0, len(name)+1+len(body))
	line = append(line, name...)
	line = append(line, ':')
	return append(line, body...), nil
}

func (t *topicTable) get(name string) (TopicConfig, bool) {
	if e := t.entry(name); e != nil {
		return e.cfg, true
	}
	return TopicConfig{}, false
}

// entry returns topic name's entry, nil when the table has no such topic.
// The entry's configuration is the table's as it was at the call: an
// update puts a new entry (carrying the counters over).
func (t *topicTable) entry(name string) *topicEntry {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.topics[name]
}

func (t *topicTable) all() []TopicConfig {
	out, _ := t.snapshot()
	return out
}

// snapshot returns the topics, sorted by name, and the data version that
// counts exactly them, read in one critical section: a version read apart
// from the topics could count a topic the list lacks, and a NameServer (or
// a slave) that stored that version would never take the topic.
func (t *topicTable) snapshot() ([]TopicConfig, dataVersion) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]TopicConfig, len(t.names))
	for i, name := range t.names {
		out[i] = t.topics[name].cfg
	}
	return out, t.version
}

func (t *topicTable) dataVersion() dataVersion {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.version
}

// validateTopicConfig checks a topic definition.
func validateTopicConfig(c *TopicConfig) error {
	if err := message.ValidateTopic(c.Name); err != nil {
		return errcode.Errorf(errcode.IllegalTopic, "%v", err)
	}
	if c.ReadQueueNums <= 0 || c.WriteQueueNums <= 0 || c.ReadQueueNums > 1024 || c.WriteQueueNums > 1024 {
		return errcode.Errorf(errcode.InvalidParameter, "topic %s: queue counts %d/%d must be in 1..1024", c.Name, c.ReadQueueNums, c.WriteQueueNums)
	}
	if c.Perm&^(PermPriority|PermRead|PermWrite|PermInherit) != 0 {
		return errcode.Errorf(errcode.InvalidParameter, "topic %s: unknown permission bits %#x", c.Name, c.Perm)
	}
	return nil
}

// put creates (or, with update, replaces) a topic and persists the table.
func (t *topicTable) put(c TopicConfig, update bool) error {
	if err := validateTopicConfig(&c); err != nil {
		return err
	}
	ch := &topicChange{kind: changePut, cfg: c, update: update}
	t.commit(ch)
	return ch.err
}

// remove deletes a topic; it reports whether the topic existed.
func (t *topicTable) remove(name string) (bool, error) {
	ch := &topicChange{kind: changeRemove, name: name}
	t.commit(ch)
	return ch.existed, ch.err
}

// bumpVersion gives the table a new data version (the topics unchanged)
// and persists it: the NameServers then take the topics again at the next
// registration (the broker's permission changed). The version is bumped in
// memory even when the write fails.
func (t *topicTable) bumpVersion() error {
	ch := &topicChange{kind: changeBump}
	t.commit(ch)
	return ch.err
}

// replaceAll makes the table exactly topics with version v (a slave taking
// its master's table) and reports the topics that went away.
func (t *topicTable) replaceAll(topics []TopicConfig, v dataVersion) (removed []string, changed bool, err error) {
	for i := range topics {
		if err := validateTopicConfig(&topics[i]); err != nil {
			return nil, false, err
		}
	}
	ch := &topicChange{kind: changeReplace, replace: topics, version: v}
	t.commit(ch)
	return ch.removed, ch.changed, ch.err
}

// commit stages ch and returns once a write that includes it is durable
// (or failed): the first caller to find no write under way writes every
// change staged so far; the others wait for it, and one of them writes
// what was staged meanwhile.
func (t *topicTable) commit(ch *topicChange) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	b := t.next
	if b == nil {
		b = &topicBatch{}
		t.next = b
	}
	b.changes = append(b.changes, ch)
	for !b.done {
		if t.writing {
			t.wcond.Wait()
			continue
		}
		// b is still staged (a batch leaves t.next only to be written).
		t.writing, t.next = true, nil
		hook := t.beforeWrite
		t.wmu.Unlock()
		if hook != nil {
			hook()
		}
		t.write(b.changes)
		t.wmu.Lock()
		t.writing, b.done = false, true
		t.wcond.Broadcast()
	}
}

// write applies a batch of changes: it works out the table they make,
// persists it and only then makes it the table in memory. Only the writer
// changes the table, so it reads it without the lock.
func (t *topicTable) write(changes []*topicChange) {
	// The batch's view: the table with the changes so far on top.
	// overlay[name] is the topic's new config, nil when removed; with a
	// replace, base is no longer the table.
	var (
		overlay  = make(map[string]*TopicConfig, len(changes))
		replaced bool
		version  = t.version
		dirty    bool
		bumps    int
	)
	lookup := func(name string) (*TopicConfig, bool) {
		if c, ok := overlay[name]; ok {
			return c, c != nil
		}
		if replaced {
			return nil, false
		}
		if e, ok := t.topics[name]; ok {
			return &e.cfg, true
		}
		return nil, false
	}
	for _, ch := range changes {
		switch ch.kind {
		case changePut:
			if _, ok := lookup(ch.cfg.Name); ok && !ch.update {
				ch.err = errcode.Errorf(errcode.TopicExistAlready, "topic %s already exists", ch.cfg.Name)
				continue
			}
			c := ch.cfg
			overlay[c.Name] = &c
			dirty = true
			bumps++
		case changeRemove:
			if _, ok := lookup(ch.name); !ok {
				continue
			}
			ch.existed = true
			overlay[ch.name] = nil
			dirty = true
			bumps++
		case changeBump:
			dirty = true
			bumps++
		case changeReplace:
			next := make(map[string]*TopicConfig, len(ch.replace))
			for i := range ch.replace {
				c := ch.replace[i]
				next[c.Name] = &c
			}
			cur := t.currentView(overlay, replaced)
			if version == ch.version && bumps == 0 && reflect.DeepEqual(cur, next) {
				continue
			}
			for name := range cur {
				if _, ok := next[name]; !ok {
					ch.removed = append(ch.removed, name)
				}
			}
			slices.Sort(ch.removed)
			ch.changed = true
			clear(overlay)
			maps.Copy(overlay, next)
			replaced = true
			version, bumps = ch.version, 0
			dirty = true
		}
	}
	if !dirty {
		return
	}
	if bumps > 0 {
		version.Counter++
		version.Timestamp = time.Now().UnixMilli()
	}
	vb, err := json.Marshal(version)
	if err != nil {
		panic(fmt.Sprintf("encode data version: %v", err)) // two integers
	}
	enc := make(map[string][]byte, len(overlay))
	for name, c := range overlay {
		if c == nil {
			continue
		}
		if enc[name], err = encodeTopicLine(c); err != nil {
			break
		}
	}
	var (
		names []string
		lines [][]byte
	)
	if err == nil {
		names, lines = t.merge(overlay, enc, replaced)
		t.writes.Add(1)
		err = fsutil.WriteFileAtomic(t.path, encodeTopicsFile(lines, vb), 0o644)
	}
	if err != nil {
		err = fmt.Errorf("persist topics: %w", err)
		for _, ch := range changes {
			if ch.err == nil {
				ch.err, ch.existed, ch.removed, ch.changed = err, false, nil, false
			}
		}
		if hasBump(changes) {
			t.mu.Lock()
			from := t.version
			t.bumpLocked()
			t.recordLocked(tableChange{from: from, to: t.version, all: true})
			t.mu.Unlock()
		}
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.topics
	if replaced {
		t.topics = make(map[string]*topicEntry, len(overlay))
	}
	for name, c := range overlay {
		if c == nil {
			delete(t.topics, name)
			continue
		}
		e := &topicEntry{cfg: *c}
		if prev := old[name]; prev != nil {
			e.in.Store(prev.in.Load())
		}
		t.topics[name] = e
	}
	t.names, t.lines = names, lines
	rec := tableChange{from: t.version, to: version, all: replaced || hasBump(changes)}
	if !rec.all {
		rec.names = slices.Collect(maps.Keys(overlay))
	}
	t.recordLocked(rec)
	t.version = version
}

// recordLocked appends a change to the history, dropping the oldest past
// its bounds; t.mu must be held for writing.
func (t *topicTable) recordLocked(c tableChange) {
	t.hist = append(t.hist, c)
	t.histNames += len(c.names)
	drop := 0
	for len(t.hist)-drop > maxHistChanges || t.histNames > maxHistNames && len(t.hist)-drop > 1 {
		t.histNames -= len(t.hist[drop].names)
		drop++
	}
	if drop > 0 {
		t.hist = slices.Delete(t.hist, 0, drop)
	}
}

// deltaSince returns what changed since version base, read in one critical
// section with the version v it leads to: the changed topics that exist
// (sorted), the names of those that went (sorted) and how many topics the
// table holds. ok is false when the history does not reach back to base or
// a change in between touched every topic: then only the whole table tells
// the change.
func (t *topicTable) deltaSince(base dataVersion) (changed []TopicConfig, removed []string, count int, v dataVersion, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	v, count = t.version, len(t.topics)
	if base == v {
		return nil, nil, count, v, true
	}
	names := make(map[string]struct{})
	i := len(t.hist) - 1
	for ; i >= 0; i-- {
		c := &t.hist[i]
		if c.all {
			return nil, nil, 0, v, false
		}
		for _, name := range c.names {
			names[name] = struct{}{}
		}
		if c.from == base {
			break
		}
	}
	if i < 0 {
		return nil, nil, 0, v, false
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if e, ok := t.topics[name]; ok {
			changed = append(changed, e.cfg)
		} else {
			removed = append(removed, name)
		}
	}
	return changed, removed, count, v, true
}

// hasBump reports whether a batch holds a version bump, which takes effect
// in memory even when the write fails (an extra version is harmless: the
// NameServers take the topics once more).
func hasBump(changes []*topicChange) bool {
	for _, ch := range changes {
		if ch.kind == changeBump {
			return true
		}
	}
	return false
}

func (t *topicTable) bumpLocked() {
	t.version.Counter++
	t.version.Timestamp = time.Now().UnixMilli()
}

// currentView is the batch's view of the whole table (for a replace).
func (t *topicTable) currentView(overlay map[string]*TopicConfig, replaced bool) map[string]*TopicConfig {
	cur := make(map[string]*TopicConfig, len(t.topics)+len(overlay))
	if !replaced {
		for name, e := range t.topics {
			cur[name] = &e.cfg
		}
	}
	for name, c := range overlay {
		if c == nil {
			delete(cur, name)
		} else {
			cur[name] = c
		}
	}
	return cur
}

// merge returns the names (sorted) and lines of the table the batch
// makes: the table's, less the removed, with the changed lines from enc,
// merged with the new. It walks the table's names once against the
// batch's, sorted.
func (t *topicTable) merge(overlay map[string]*TopicConfig, enc map[string][]byte, replaced bool) ([]string, [][]byte) {
	keys := slices.Sorted(maps.Keys(overlay))
	var (
		tn    = t.names
		tl    = t.lines
		names = make([]string, 0, len(tn)+len(keys))
		lines = make([][]byte, 0, len(tn)+len(keys))
	)
	if replaced {
		tn, tl = nil, nil
	}
	take := func(name string) { // a name of the batch
		if overlay[name] != nil {
			names = append(names, name)
			lines = append(lines, enc[name])
		}
	}
	j := 0
	for i, name := range tn {
		for j < len(keys) && keys[j] < name {
			take(keys[j])
			j++
		}
		if j < len(keys) && keys[j] == name {
			take(name)
			j++
			continue
		}
		names = append(names, name)
		lines = append(lines, tl[i])
	}
	for ; j < len(keys); j++ {
		take(keys[j])
	}
	return names, lines
}

// encodeTopicsFile is the file of the topics' lines (in name order) with
// the encoded data version v.
func encodeTopicsFile(lines [][]byte, v []byte) []byte {
	size := 64 + len(v)
	for _, line := range lines {
		size += len(line) + 2
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.WriteString(`{"topicConfigTable":{`)
	for i, line := range lines {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
		buf.Write(line)
	}
	if len(lines) > 0 {
		buf.WriteByte('\n')
	}
	buf.WriteString("},\n\"dataVersion\":")
	buf.Write(v)
	buf.WriteString("}\n")
	return buf.Bytes()
}

// CreateTopic creates a topic, or changes it when update is set (a missing
// permission means read-write). Only a master takes topic changes; the
// NameServers learn of them at once. A topic of the system is refused
// (topic.CheckChange): the broker makes its own with the table's put.
func (b *Broker) CreateTopic(tc TopicConfig, update bool) error {
	if err := b.checkWritable(); err != nil {
		return err
	}
	if tc.Perm == 0 {
		tc.Perm = PermReadWrite
	}
	if err := topic.CheckChange(tc.Name); err != nil {
		return err
	}
	if err := b.topics.put(tc, update); err != nil {
		return err
	}
	b.makeQueues(tc)
	b.log.Info("topic saved", zap.String("topic", tc.Name), zap.Int32("read", tc.ReadQueueNums),
		zap.Int32("write", tc.WriteQueueNums), zap.Int32("perm", tc.Perm), zap.Bool("update", update))
	b.reg.trigger()
	return b.pushMetadata()
}

// makeQueues makes the directories and first files of a saved topic's
// write queues now rather than at its first sends (store.CreateQueues):
// made by the first sends, each new queue's directory is made while every
// sender waits for the dispatch plan. Those that cannot be made now (a
// full disk) are left to the first sends, which make them as before.
func (b *Broker) makeQueues(tc TopicConfig) {
	made, err := b.store.CreateQueues(tc.Name, tc.WriteQueueNums)
	if err != nil {
		b.log.Warn("topic saved; some of its queue files are left to its first sends", zap.String("topic", tc.Name),
			zap.Int("made", made), zap.Error(err))
	}
}

// DeleteTopic deletes a topic with its queues and consumer offsets. A
// topic of the system is refused (topic.CheckChange).
func (b *Broker) DeleteTopic(name string) error {
	if err := b.checkWritable(); err != nil {
		return err
	}
	if err := topic.CheckChange(name); err != nil {
		return err
	}
	existed, err := b.topics.remove(name)
	if err != nil {
		return err
	}
	if !existed {
		return errcode.Errorf(errcode.TopicNotExist, "topic %s does not exist on broker %s", name, b.opts.BrokerName)
	}
	b.offsets.RemoveTopic(name)
	if err := b.store.DeleteTopic(name); err != nil {
		return storeError(err)
	}
	b.forgetWaiters(name)
	b.reg.trigger()
	return b.pushMetadata()
}

// TopicConfigs lists the topics this broker serves, by name.
func (b *Broker) TopicConfigs() []TopicConfig { return b.topics.all() }

// ensureAutoCreateTopic gives a master that creates topics on first send
// the topic TBW102, as RocketMQ's broker has it: RocketMQ's producers send
// a message for a topic without a route through TBW102's route, and the
// broker then creates the topic. Clients cannot create TBW102 themselves
// (it is a topic of the system); one kept from before stays.
func (b *Broker) ensureAutoCreateTopic() {
	if !b.opts.AutoCreateTopic || b.checkWritable() != nil {
		return
	}
	name := message.AutoCreateTopic
	if _, ok := b.topics.get(name); ok {
		return
	}
	n := int32(b.opts.DefaultQueueNums)
	if err := b.topics.put(TopicConfig{Name: name, ReadQueueNums: n, WriteQueueNums: n, Perm: PermReadWrite | PermInherit}, false); err != nil {
		if !errors.Is(err, errcode.ErrTopicExists) {
			b.log.Warn("auto-create topic not created", zap.String("topic", name), zap.Error(err))
		}
		return
	}
	b.reg.trigger()
}
