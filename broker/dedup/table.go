package dedup

import "math/bits"

// table maps keys to CommitLog offsets: an open-addressing hash table with
// linear probing over one flat array of (key, offset) pairs. The keys are
// hashes already, so a slot is found from the key's own bits, and a lookup,
// an insert or a delete touches one or two neighbouring cache lines — where
// a Go map of a million entries costs several cache misses per operation,
// which dominated the window's cost per send.
//
// The zero key marks an empty slot: the key 0 is stored as zeroKey
// (remapped), so two keys share a slot identity only if both are 0 or
// zeroKey, a collision of the 64-bit hash like any other (the broker
// verifies every hit against the stored record).
//
// Deletion shifts the entries after the deleted one back into place
// (backward-shift deletion), so no tombstones build up and a probe never
// runs longer than the cluster it is in.
type table struct {
	slots []tslot
	mask  uint64
	shift uint8 // 64 − log2(len(slots))
	n     int
}

type tslot struct {
	key Key
	off int64
}

// zeroKey stands for the key 0, whose own value marks empty slots.
const zeroKey Key = 1<<64 - 1

// minTableSlots is the size of a table's first array.
const minTableSlots = 1024

func remap(k Key) Key {
	if k == 0 {
		return zeroKey
	}
	return k
}

// home is the slot a key probes first: the top bits of the key times
// 2^64/φ (Fibonacci hashing), so that every bit of the key counts.
func (t *table) home(k Key) uint64 {
	return uint64(k) * 0x9E3779B97F4A7C15 >> t.shift
}

// get returns the offset of k.
func (t *table) get(k Key) (int64, bool) {
	if t.n == 0 {
		return 0, false
	}
	k = remap(k)
	for i := t.home(k); ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		switch s.key {
		case k:
			return s.off, true
		case 0:
			return 0, false
		}
	}
}

// touch reads the slot each key probes first and returns a sum of what it
// read, which the caller keeps (so that the reads stay). In a table larger
// than the caches each lookup misses them; a batch's lookups, made one
// after the other, wait for their misses one after the other, while these
// reads, independent of each other, are in flight together — and leave
// the slots in the cache for the lookups that follow.
func (t *table) touch(keys []Key) (sum uint64) {
	if len(t.slots) == 0 {
		return 0
	}
	for _, k := range keys {
		sum += uint64(t.slots[t.home(remap(k))].key)
	}
	return sum
}

// put sets the offset of k and reports whether k was there already.
func (t *table) put(k Key, off int64) (existed bool) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	k = remap(k)
	for i := t.home(k); ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		switch s.key {
		case k:
			s.off = off
			return true
		case 0:
			s.key, s.off = k, off
			t.n++
			return false
		}
	}
}

// del removes k, if there.
func (t *table) del(k Key) {
	if t.n == 0 {
		return
	}
	k = remap(k)
	i := t.home(k)
	for {
		s := t.slots[i].key
		if s == 0 {
			return
		}
		if s == k {
			break
		}
		i = (i + 1) & t.mask
	}
	// Shift back every entry of the cluster after i whose home is not in
	// (i, j]: it would no longer be found across the hole at i.
	for j := (i + 1) & t.mask; ; j = (j + 1) & t.mask {
		s := t.slots[j]
		if s.key == 0 {
			break
		}
		h := t.home(s.key)
		if (j-h)&t.mask >= (j-i)&t.mask {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = tslot{}
	t.n--
}

// grow doubles the array (or makes the first one) and places every entry
// again.
func (t *table) grow() {
	old := t.slots
	size := max(2*len(old), minTableSlots)
	t.slots = make([]tslot, size)
	t.mask = uint64(size - 1)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	for _, s := range old {
		if s.key == 0 {
			continue
		}
		i := t.home(s.key)
		for t.slots[i].key != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = s
	}
}

// reset forgets every entry and gives the memory back.
func (t *table) reset() { *t = table{} }

// len is the number of entries.
func (t *table) len() int { return t.n }
