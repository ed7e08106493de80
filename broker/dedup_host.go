package broker

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bolide-mq/bolide/broker/dedup"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// AttrDedupWindow is the topic attribute that sets its deduplication window
// in whole minutes ("0" turns it off for the topic); without it the
// broker's DedupWindow applies.
const AttrDedupWindow = "dedup.window.minutes"

// maxDedupWindow bounds a topic's window.
const maxDedupWindow = 24 * time.Hour

// dedupWindowOf is how long a send to tc is remembered.
func (b *Broker) dedupWindowOf(tc *topic.Config) time.Duration {
	if v, ok := tc.Attributes[AttrDedupWindow]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return min(time.Duration(n)*time.Minute, maxDedupWindow)
		}
	}
	return b.opts.DedupWindow
}

// longestDedupWindow is the longest window of any topic: how long misses
// stay uncertain after the window is reset.
func (b *Broker) longestDedupWindow() time.Duration {
	w := b.opts.DedupWindow
	for _, tc := range b.topics.all() {
		w = max(w, b.dedupWindowOf(&tc))
	}
	return w
}

// newDedup makes the window (none when DedupMaxEntries is 0) and follows
// the role with it.
func (b *Broker) newDedup() {
	if b.opts.DedupMaxEntries <= 0 {
		return
	}
	b.dedup = dedup.New(b.opts.DedupMaxEntries)
	b.resetDedup()
	b.gate.Subscribe("dedup", dedupLead{b})
}

// resetDedup empties the window at start and when the broker becomes the
// master: the sends stored before, which it did not see, are looked up in
// the index until the newest of them leaves the longest window.
func (b *Broker) resetDedup() {
	clog := b.store.CommitLog()
	b.dedupBefore.Store(clog.MaxOffset())
	until := time.Now()
	if last := clog.LastStoreTimestamp(); last > 0 {
		until = time.UnixMilli(last).Add(b.longestDedupWindow())
	}
	b.dedup.Reset(until)
}

// dedupLead resets the window whenever the broker becomes the master: it
// did not watch the sends its predecessor stored.
type dedupLead struct{ b *Broker }

func (d dedupLead) Lead(ctx context.Context) func() {
	d.b.resetDedup()
	return func() {}
}

// DedupStats describes the deduplication window (zero when it is off).
func (b *Broker) DedupStats() dedup.Stats {
	if b.dedup == nil {
		return dedup.Stats{}
	}
	return b.dedup.Stats()
}

// dedupEntry is one message of a send being deduplicated.
type dedupEntry struct {
	key   dedup.Key
	id    string             // its unique id ("": none)
	res   *dedup.Reservation // nil: nothing to record
	prev  *message.Ext       // an earlier copy: not stored again
	same  int                // ≥ 0: the same id as that earlier message of the batch
	fresh bool               // to be stored
}

// dedupScratch is what sendDeduplicated works in, kept in dedupScratches
// for the next send: a batched send would otherwise make eight slices and
// a map for every request.
type dedupScratch struct {
	entries []dedupEntry
	firsts  keyTable
	keys    []dedup.Key
	at      []int // the message of keys[n]
	found   []dedup.Found
	fresh   []int // the messages to store
	commits []*dedup.Reservation
	offsets []int64
}

// maxPooledBatch is the largest batch whose scratch space is kept.
const maxPooledBatch = 1024

var dedupScratches = sync.Pool{New: func() any { return new(dedupScratch) }}

// release clears what refers to messages and reservations, and gives sc
// back (unless a very large batch grew it).
func (sc *dedupScratch) release() {
	if cap(sc.entries) > maxPooledBatch {
		return
	}
	clear(sc.entries)
	clear(sc.found)
	clear(sc.commits)
	dedupScratches.Put(sc)
}

// keyTable finds the first message of a batch with a given key: open
// addressing over the indexes of the batch's messages, sized for the batch
// and cleared for each, in place of a map made for every send.
type keyTable struct {
	slots []int32 // 1 + the index of a message; 0: empty
	mask  uint64
}

// reset empties the table for a batch of n messages.
func (t *keyTable) reset(n int) {
	size := 16
	for size < 2*n {
		size *= 2
	}
	if cap(t.slots) < size {
		t.slots = make([]int32, size)
	} else {
		t.slots = t.slots[:size]
		clear(t.slots)
	}
	t.mask = uint64(size - 1)
}

// firstOrAdd returns the index of the message recorded with key (a
// recorded message's key is in entries), or records i and returns −1.
func (t *keyTable) firstOrAdd(key dedup.Key, i int, entries []dedupEntry) int {
	// The keys are hashes already: their low bits pick the slot.
	for s := uint64(key) & t.mask; ; s = (s + 1) & t.mask {
		j := int(t.slots[s]) - 1
		if j < 0 {
			t.slots[s] = int32(i + 1)
			return -1
		}
		if entries[j].key == key {
			return j
		}
	}
}

// dedupSend is a send as sendDeduplicated sees it, whatever form its
// messages take (messages with property maps, packed entries): n messages
// to one topic, validated and not yet rewritten.
type dedupSend interface {
	// uniqueID is the i-th message's UNIQ_KEY ("": none).
	uniqueID(i int) string
	// putFresh stores the messages at the indexes fresh, in their order
	// (the rewrites and the append), and returns their results.
	putFresh(ctx context.Context, fresh []int) ([]store.PutResult, error)
	// answered notes that message i is answered with the result of a copy
	// stored in queue q (an earlier send's, or an earlier message of the
	// batch, same ≥ 0).
	answered(i int, q int32, same int)
}

// sendDeduplicated stores the messages of send s (n messages to
// topicName) that the window has not seen, and answers the others with
// their first copy's result.
func (b *Broker) sendDeduplicated(ctx context.Context, topicName string, n int, s dedupSend, window time.Duration) ([]store.PutResult, error) {
	// A send right after a promotion may come before the role gate's
	// watcher has reset the window (dedupLead): the window would then
	// pass for complete, and a retry of what the old master stored would
	// be stored again.
	b.gate.Sync()
	sc := dedupScratches.Get().(*dedupScratch)
	defer sc.release()
	entries := slices.Grow(sc.entries[:0], n)[:n]
	sc.entries = entries
	abort := func() {
		for _, e := range entries {
			if e.res != nil {
				e.res.Abort()
			}
		}
	}
	// The ids of the batch, each once, are looked up together.
	sc.firsts.reset(n)
	keys, at := sc.keys[:0], sc.at[:0]
	for i := range n {
		e := &entries[i]
		*e = dedupEntry{same: -1}
		id := s.uniqueID(i)
		if id == "" {
			e.fresh = true
			continue
		}
		key := dedup.KeyOf(topicName, id)
		e.key, e.id = key, id
		if j := sc.firsts.firstOrAdd(key, i, entries); j >= 0 {
			if entries[j].id == id {
				e.same = j // a batch repeating an id stores it once
				b.dedup.Hit()
			} else {
				e.fresh = true // another id of the batch shares the hash: stored, unrecorded
			}
			continue
		}
		keys = append(keys, key)
		at = append(at, i)
	}
	sc.keys, sc.at = keys, at
	found := b.dedup.LookupAll(keys, sc.found[:0])
	sc.found = found
	for k, f := range found {
		entries[at[k]].res = f.Res // so that abort ends them all
	}
	for k, f := range found {
		e := &entries[at[k]]
		if f.Busy {
			// Another send holds the id: wait for its outcome.
			off, ok, final, res, err := b.dedup.Lookup(ctx, keys[k])
			if err != nil {
				abort()
				return nil, storeError(err)
			}
			f = dedup.Found{Offset: off, Found: ok, Final: final, Res: res}
			e.res = res
		}
		if f.Found {
			if prev := b.storedCopy(f.Offset, topicName, e.id); prev != nil {
				e.prev = prev
				continue
			}
			// Another message shares the hash: store this one, unrecorded.
			e.fresh = true
			continue
		}
		if !f.Final {
			if prev := b.indexedCopy(ctx, topicName, e.id, window); prev != nil {
				e.res.Abort()
				e.res = nil
				e.prev = prev
				b.dedup.Remember(keys[k], prev.PhysicalOffset, time.UnixMilli(prev.StoreTimestamp).Add(window))
				continue
			}
		}
		e.fresh = true
	}
	fresh := sc.fresh[:0]
	for i := range entries {
		if entries[i].fresh {
			fresh = append(fresh, i)
		}
	}
	sc.fresh = fresh
	var stored []store.PutResult
	if len(fresh) > 0 {
		var err error
		if stored, err = s.putFresh(ctx, fresh); err != nil {
			abort()
			return stored, err
		}
	}
	// When every message was stored, stored is the answer.
	out := stored
	if len(fresh) < n {
		out = make([]store.PutResult, n)
		k := 0
		for i := range n {
			e := &entries[i]
			switch {
			case e.same >= 0:
				out[i] = out[e.same]
				s.answered(i, -1, e.same)
			case e.prev != nil:
				out[i] = putResultOf(e.prev)
				s.answered(i, e.prev.QueueID, -1) // as the first send's message read after its rewrites
				b.dedup.Hit()
			default:
				out[i] = stored[k]
				k++
			}
		}
	}
	sc.commit(b.dedup, out, window)
	return out, nil
}

// extSend is a send of messages with property maps, for sendDeduplicated.
type extSend struct {
	b    *Broker
	msgs []*message.Ext
}

func (s extSend) uniqueID(i int) string { return s.msgs[i].Properties[message.PropertyUniqueKey] }

func (s extSend) putFresh(ctx context.Context, fresh []int) ([]store.PutResult, error) {
	sub := s.msgs
	if len(fresh) < len(s.msgs) {
		sub = make([]*message.Ext, len(fresh))
		for k, i := range fresh {
			sub[k] = s.msgs[i]
		}
	}
	return s.b.rewriteAndPut(ctx, sub)
}

// answered gives message i the queue of the copy that answers it: the
// send's results name the messages' queues.
func (s extSend) answered(i int, q int32, same int) {
	if same >= 0 {
		q = s.msgs[same].QueueID
	}
	s.msgs[i].QueueID = q
}

// commit records in the window where each message holding a reservation
// was stored (out[i] for entries[i]).
func (sc *dedupScratch) commit(w *dedup.Window, out []store.PutResult, window time.Duration) {
	sc.commits, sc.offsets = sc.commits[:0], sc.offsets[:0]
	for i := range sc.entries {
		if r := sc.entries[i].res; r != nil {
			sc.commits = append(sc.commits, r)
			sc.offsets = append(sc.offsets, out[i].PhysicalOffset)
		}
	}
	if len(sc.commits) > 0 {
		w.CommitAll(sc.commits, sc.offsets, window)
	}
}

// storedCopy reads the record at off; nil unless it is the message
// (topic, id).
func (b *Broker) storedCopy(off int64, topicName, id string) *message.Ext {
	m, err := b.store.ReadMessage(off)
	if err != nil || !isCopyOf(m, topicName, id) {
		return nil
	}
	return m
}

// indexedCopy looks (topic, id) up in the store's index, for the window's
// length back: the path that survives restarts and promotions. Dispatch is
// first let index what was stored before the window's reset (at once after
// the first time).
func (b *Broker) indexedCopy(ctx context.Context, topicName, id string, window time.Duration) *message.Ext {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.store.WaitDispatched(wctx, b.dedupBefore.Load()); err != nil {
		return nil
	}
	now := time.Now()
	found, err := b.store.QueryByKey(topicName, id, now.Add(-window).UnixMilli(), now.UnixMilli(), 8)
	if err != nil {
		return nil
	}
	for _, m := range found {
		if isCopyOf(m, topicName, id) {
			return m
		}
	}
	return nil
}

func isCopyOf(m *message.Ext, topicName, id string) bool {
	if m.Properties[message.PropertyUniqueKey] != id {
		return false
	}
	return m.Topic == topicName || m.Properties[message.PropertyRealTopic] == topicName
}

// putResultOf is the result a send of m returned.
func putResultOf(m *message.Ext) store.PutResult {
	return store.PutResult{MsgID: m.MsgID(), Result: commitlog.Result{PhysicalOffset: m.PhysicalOffset,
		QueueOffset: m.QueueOffset, Size: m.StoreSize, StoreTimestamp: m.StoreTimestamp}}
}

var (
	descDedupEntries = prometheus.NewDesc("bolide_dedup_entries",
		"Unique ids the deduplication window remembers.", nil, nil)
	descDedupBytes = prometheus.NewDesc("bolide_dedup_bytes",
		"Estimated memory of the deduplication window's entries.", nil, nil)
	descDedupHits = prometheus.NewDesc("bolide_dedup_hits_total",
		"Sends answered with an earlier copy's result instead of being stored again.", nil, nil)
	descDedupEvicted = prometheus.NewDesc("bolide_dedup_evicted_total",
		"Ids dropped from the deduplication window early for want of room.", nil, nil)
	dedupDescs = []*prometheus.Desc{descDedupEntries, descDedupBytes, descDedupHits, descDedupEvicted}
)

// collectDedup reports the window.
func (c *collector) collectDedup(gauge, counter func(*prometheus.Desc, float64, ...string)) {
	if c.b.dedup == nil {
		return
	}
	st := c.b.dedup.Stats()
	gauge(descDedupEntries, float64(st.Entries))
	gauge(descDedupBytes, float64(st.Bytes))
	counter(descDedupHits, float64(st.Hits))
	counter(descDedupEvicted, float64(st.Evicted))
}
