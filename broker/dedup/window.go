package dedup

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// Key identifies a message in the window: a 64-bit hash of its topic and
// unique id. Two different messages may share a key; a hit is only a
// candidate, which the caller verifies against the stored record.
type Key uint64

// seed is fixed for the process: keys live in memory only.
var seed = maphash.MakeSeed()

// KeyOf hashes a topic and a unique id.
func KeyOf(topic, id string) Key {
	var h maphash.Hash
	h.SetSeed(seed)
	_, _ = h.WriteString(topic)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(id)
	return Key(h.Sum64())
}

// slot is one remembered message, in insertion order.
type slot struct {
	key Key
	// expires is when the entry leaves the window (unix seconds).
	expires uint32
}

// entryBytes estimates one entry's memory, as measured with a million ids
// (TestWindowMemoryAtOneMillionIDs): its ring slot (16 bytes with padding)
// and its share of the table (a 16-byte slot, at a load between 3/8 and
// 3/4 of the table's power-of-two size: 32 bytes at a million).
const entryBytes = 16 + 32

// Stats describe the window.
type Stats struct {
	Entries  int   // messages remembered
	Bytes    int64 // estimated memory of the entries
	Capacity int   // most entries held at once
	Hits     int64 // sends answered with an earlier copy's result
	Evicted  int64 // entries dropped before their time for want of room
	// Complete reports whether a miss is final: the window has been
	// watching for a whole window length since it started or was reset.
	Complete bool
}

// Window remembers where recently stored messages are, by key. It holds at
// most Capacity entries; when full it drops the oldest early (counted in
// Evicted): under a send rate above Capacity per window length, the window
// is as long as the newest Capacity sends. A miss is not final (Complete is
// false) for a window length after New or Reset: the caller looks further
// (the store's index).
type Window struct {
	mu       sync.Mutex
	capacity int
	offsets  table  // key → physical offset of the stored copy
	ring     []slot // insertion order; head at ringHead, count n
	ringHead int
	n        int
	pending  map[Key]*Reservation
	// incompleteUntil: misses before this time (unix seconds) are not
	// final (the window started or was reset).
	incompleteUntil uint32
	hits, evicted   int64
	now             func() time.Time
	// touched keeps what table.touch read.
	touched uint64
	// oldest is scratch space for CommitAll's keys about to leave.
	oldest []Key
}

// New returns a window holding at most capacity entries, whose misses are
// final from the start (Reset says otherwise).
func New(capacity int) *Window {
	return &Window{capacity: max(capacity, 1), pending: make(map[Key]*Reservation), now: time.Now}
}

// Reset forgets every entry, and makes misses not final until
// uncertainUntil: the broker calls it at start and whenever it becomes the
// master of its group, with the time the newest message it did not see
// being sent leaves the window.
func (w *Window) Reset(uncertainUntil time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.offsets.reset()
	w.ring = nil
	w.ringHead, w.n = 0, 0
	w.incompleteUntil = unix(uncertainUntil)
}

func unix(t time.Time) uint32 { return uint32(t.Unix()) }

// Reservation is a key being stored by one send. Others that look the key
// up meanwhile wait for its outcome.
type Reservation struct {
	w   *Window
	key Key
	// done is made by the first send that waits for the reservation (under
	// the window's lock) and closed when the reservation ends: most are
	// never waited for, and need no channel.
	done chan struct{}
}

// Lookup says what the window knows about key. found: an earlier copy may
// be at offset (verify it). final: a miss needs no further search. When
// neither, res is a reservation the caller must end with Commit or Abort.
// When another send holds the key, Lookup waits for it (or ctx).
func (w *Window) Lookup(ctx context.Context, key Key) (offset int64, found, final bool, res *Reservation, err error) {
	for {
		w.mu.Lock()
		now := unix(w.now())
		w.expireLocked(now)
		if off, ok := w.offsets.get(key); ok {
			w.mu.Unlock()
			return off, true, true, nil, nil
		}
		if p := w.pending[key]; p != nil {
			if p.done == nil {
				p.done = make(chan struct{})
			}
			done := p.done
			w.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return 0, false, false, nil, ctx.Err()
			}
		}
		r := &Reservation{w: w, key: key}
		w.pending[key] = r
		final = now >= w.incompleteUntil
		w.mu.Unlock()
		return 0, false, final, r, nil
	}
}

// Found is what LookupAll says of one key: the answer Lookup would give,
// or Busy when another send holds the key (ask Lookup, which waits).
type Found struct {
	Offset int64
	Found  bool
	Final  bool
	Res    *Reservation
	Busy   bool
}

// LookupAll looks keys up under one hold of the window's lock and one
// reading of the clock, for the messages of one send: out[i] is key i's
// answer, as Lookup's but that a key another send holds is reported Busy
// instead of waited for. keys must be distinct. It returns out.
func (w *Window) LookupAll(keys []Key, out []Found) []Found {
	out = out[:0]
	w.mu.Lock()
	defer w.mu.Unlock()
	now := unix(w.now())
	w.expireLocked(now)
	final := now >= w.incompleteUntil
	w.touched += w.offsets.touch(keys)
	var spare []Reservation // the new reservations, in one allocation
	for _, key := range keys {
		if off, ok := w.offsets.get(key); ok {
			out = append(out, Found{Offset: off, Found: true, Final: true})
			continue
		}
		if w.pending[key] != nil {
			out = append(out, Found{Busy: true})
			continue
		}
		if len(spare) == 0 {
			spare = make([]Reservation, len(keys)-len(out))
		}
		r := &spare[0]
		spare = spare[1:]
		*r = Reservation{w: w, key: key}
		w.pending[key] = r
		out = append(out, Found{Final: final, Res: r})
	}
	return out
}

// CommitAll is Commit of every reservation rs[i] at offsets[i], under one
// hold of the window's lock.
func (w *Window) CommitAll(rs []*Reservation, offsets []int64, window time.Duration) {
	var done []chan struct{}
	w.mu.Lock()
	now := w.now()
	expires, at := unix(now.Add(window)), unix(now)
	// The entries these commits push out of a full window are deleted
	// from the table: touch their slots together first.
	if drop := w.n + len(rs) - w.capacity; drop > 0 {
		w.oldest = w.oldest[:0]
		for i := range min(drop, w.n) {
			w.oldest = append(w.oldest, w.ring[(w.ringHead+i)%len(w.ring)].key)
		}
		w.touched += w.offsets.touch(w.oldest)
	}
	for i, r := range rs {
		w.insertLocked(r.key, offsets[i], expires, at)
		delete(w.pending, r.key)
		if r.done != nil {
			done = append(done, r.done)
		}
	}
	w.mu.Unlock()
	for _, d := range done {
		close(d)
	}
}

// Hit counts a send answered with an earlier copy.
func (w *Window) Hit() {
	w.mu.Lock()
	w.hits++
	w.mu.Unlock()
}

// Commit records that the reserved message is stored at offset, for
// window (from now), and releases the waiters.
func (r *Reservation) Commit(offset int64, window time.Duration) {
	w := r.w
	w.mu.Lock()
	now := w.now()
	w.insertLocked(r.key, offset, unix(now.Add(window)), unix(now))
	r.endLocked()
}

// endLocked removes the reservation, releases the window's lock and wakes
// the sends waiting for it.
func (r *Reservation) endLocked() {
	delete(r.w.pending, r.key)
	done := r.done
	r.w.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// Abort releases the reservation without recording anything (the send
// failed): a waiter looks again and stores the message itself.
func (r *Reservation) Abort() {
	r.w.mu.Lock()
	r.endLocked()
}

// Remember records a copy the caller found elsewhere (the store's index),
// so the next retry is answered from memory.
func (w *Window) Remember(key Key, offset int64, expires time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := unix(w.now())
	if e := unix(expires); e > now {
		w.insertLocked(key, offset, e, now)
	}
}

func (w *Window) insertLocked(key Key, offset int64, expires, now uint32) {
	w.expireLocked(now)
	if w.offsets.put(key, offset) {
		return // remembered already: only its offset changes
	}
	if w.n == w.capacity {
		old := w.ring[w.ringHead]
		if old.expires > now {
			w.evicted++
		}
		w.popLocked()
	}
	if w.n == len(w.ring) {
		w.growLocked()
	}
	w.ring[(w.ringHead+w.n)%len(w.ring)] = slot{key: key, expires: expires}
	w.n++
}

// growLocked doubles the ring (up to the capacity), unrolling it.
func (w *Window) growLocked() {
	size := min(max(2*len(w.ring), 1024), w.capacity)
	ring := make([]slot, size)
	for i := 0; i < w.n; i++ {
		ring[i] = w.ring[(w.ringHead+i)%len(w.ring)]
	}
	w.ring, w.ringHead = ring, 0
}

func (w *Window) popLocked() {
	s := w.ring[w.ringHead]
	w.offsets.del(s.key)
	w.ringHead = (w.ringHead + 1) % len(w.ring)
	w.n--
}

// expireLocked drops the entries whose time has passed, oldest first. An
// entry with a short window queued behind one with a longer window waits
// for it; Lookup checks nothing but presence, so such an entry answers a
// little longer than its topic asked — never shorter.
func (w *Window) expireLocked(now uint32) {
	for w.n > 0 && w.ring[w.ringHead].expires <= now {
		w.popLocked()
	}
}

// Stats returns the window's figures.
func (w *Window) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := unix(w.now())
	w.expireLocked(now)
	return Stats{Entries: w.n, Bytes: int64(w.n) * entryBytes, Capacity: w.capacity, Hits: w.hits,
		Evicted: w.evicted, Complete: now >= w.incompleteUntil}
}
