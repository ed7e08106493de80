// Package indexfile is Bolide's message index: RocketMQ's IndexFile, byte for
// byte, so messages can be found by key (each KEYS value and the unique id)
// within a time range.
//
// # Files
//
// A Store is a directory of index files. Each file is named after its
// creation time in local time, yyyyMMddHHmmssSSS (17 digits, for example
// 20240501123045123), as RocketMQ names them; when that name is not later
// than the newest existing one (same millisecond, or the clock stepped
// back) the newest name plus 1 ms is used, so name order is creation
// order. Other names in the directory are ignored. Every file has the full
// size
//
//	HeaderSize + SlotCount*4 + MaxEntries*20
//	= 40 + 5,000,000*4 + 20,000,000*20 = 420,000,040 bytes by default
//
// from creation: it is preallocated (fallocate) and fsynced with its
// directory, and mapped shared for reading.
//
// # Writing
//
// Only the newest file takes entries; it is the active file. Its slot table
// is kept in memory and its new entries in a buffer; Flush writes the
// buffered entries and then the header into the file with pwrite and
// fdatasyncs it. The slot table is written into the file (and synced) once
// the file is full, before a newer file is created, and by Close; between
// those the active file's slots on disk are stale, which recovery allows
// for (it rebuilds the newest file's slots from its entries). Nothing is
// stored through the mapping except by recovery, at Open: a store into a
// mapped page that a flush has just cleaned faults, and under load those
// faults waited for the flush's writeback, stalling dispatch for tens of
// milliseconds (docs/BENCHMARKS.md).
//
// Room says how many entries fit before a new file is needed. When the
// disk has no room for a new file and Options.Spare is set, Spare supplies
// it instead (the broker's store renames a file it preallocated earlier).
// Options (SlotCount, MaxEntries) are not recorded in the file and must not
// change for an existing directory; a file larger than the options allow
// makes Open fail with ErrCorrupt.
//
// # Layout
//
// All integers are big-endian (Java's ByteBuffer order).
//
//	offset                      size
//	0                           40        header
//	40                          4*S       hash slots, S = SlotCount
//	40+4*S                      20*M      entries, M = MaxEntries; entry i at 40+4*S+20*i
//
//	header (40 B)
//	+----------------+--------------+----------------+--------------+---------------+------------+
//	| beginTimestamp | endTimestamp | beginPhyOffset | endPhyOffset | hashSlotCount | indexCount |
//	|   int64 (ms)   |  int64 (ms)  |     int64      |    int64     |     int32     |   int32    |
//	+----------------+--------------+----------------+--------------+---------------+------------+
//	 0                8              16               24             32              36        40
//
//	slot (4 B): int32 position of the newest entry hashed to it, 0 = empty
//
//	entry (20 B)
//	+---------+-----------+----------+-----------+
//	| keyHash | phyOffset | timeDiff | prevIndex |
//	|  int32  |   int64   |  int32   |   int32   |
//	+---------+-----------+----------+-----------+
//	 0         4           12         16        20
//
// beginTimestamp and beginPhyOffset are those of the first entry, and
// endTimestamp and endPhyOffset those of the last. hashSlotCount is, as in
// RocketMQ, the number of slots in use (it grows when an entry lands in an
// empty slot); it is not the configured slot count. indexCount is the next
// entry position: it starts at 1 because position 0 is never used, so 0
// can mean "none" in slots and in prevIndex, and a file holds at most
// MaxEntries-1 entries. A file with indexCount >= MaxEntries is full. An
// all-zero header (indexCount 0) reads as an empty file.
//
// # Keys, hashes and chains
//
// The indexed key is topic + "#" + key (BuildKey). keyHash is
// abs(String.hashCode()) computed as Java does, over UTF-16 code units with
// int32 overflow (JavaHashCode); math.MinInt32, whose absolute value does
// not fit, becomes 0 (KeyHash). The slot is keyHash % SlotCount.
//
// Put writes entry indexCount with prevIndex = the slot's current value
// (a value outside 1..indexCount-1 counts as empty), then points the slot at
// the new entry, then updates the header, storing indexCount last, so an
// entry is never published before it is complete. timeDiff is
// (storeTimestamp - beginTimestamp) / 1000: whole SECONDS, truncated,
// clamped to [0, MaxInt32]; it is 0 for the first entry of a file (and,
// as in RocketMQ, whenever beginTimestamp <= 0).
//
// A query walks one chain: from the slot's entry, follow prevIndex while it
// is in 1..current-1 (it strictly decreases, so a damaged file cannot loop).
// An entry matches when its keyHash equals the key's and its time,
// beginTimestamp + timeDiff*1000, lies in [begin, end]. Different keys can
// share a keyHash and one slot holds many hashes, so the caller must read
// each returned record and compare its keys. Files are visited newest
// first, skipping a file whose [beginTimestamp, endTimestamp] misses the
// range; results are newest first, at most max of them.
//
// Store timestamps are assumed non-decreasing with physical offset (the
// CommitLog assigns them under its append lock). As in RocketMQ, a walk stops
// at the first entry older than begin and the file scan stops at the first
// file that begins before begin; if the clock steps back, entries written
// during the step can be missed.
//
// # Truncation and deletion
//
// Physical offsets never decrease from one entry to the next, so the
// entries with phyOffset >= X are a suffix of the newest file(s).
// TruncateAfter(X) undoes them newest first: decrement indexCount, point the
// entry's slot back at its prevIndex, zero the entry; the header end fields
// are then taken from the last remaining entry (endTimestamp becomes
// beginTimestamp + timeDiff*1000, as the exact time is not stored). A file
// it empties is deleted. DeleteBefore(X) deletes whole files, oldest first,
// whose endPhyOffset < X, never the newest file.
//
// # Recovery
//
// Only entries 1..indexCount-1 are valid; anything past them is ignored
// (and zeroed when the file is verified, see below). Open checks every header (indexCount in 1..MaxEntries,
// hashSlotCount within range, begin <= end phy offsets); a file whose header
// fails is reset to empty, and an empty file that is not the newest is
// deleted. A file shorter than its full size (cut by a power loss) is
// re-extended first. The newest file, and any cut file, is then verified
// entry by entry: the longest prefix is kept in which each entry has
// non-negative fields and non-decreasing phyOffset, the first entry sits at
// beginPhyOffset with timeDiff 0, and each prevIndex equals the head its
// slot had after the entries before it. The slot table is rebuilt from that
// prefix, the rest is zeroed and the header fixed. Older files need no
// check: each was written out whole (entries, slots, header) and synced
// before the next one was created.
//
// The index is rebuilt from the CommitLog, not trusted past it: after an
// unclean stop the broker's dispatcher must call TruncateAfter(checkpoint)
// and then Put again every record from its own checkpoint. Index content
// past the checkpoint (flushed or not) is therefore never relied on, and
// Put refuses offsets below MaxPhysicalOffset (ErrOutOfOrder), so a
// forgotten truncation fails loudly rather than producing a chain out of
// order.
//
// # Concurrency
//
// One goroutine, the dispatcher, calls Put, TruncateAfter and
// DeleteBefore; any number of goroutines call Query. A Store-wide RWMutex
// guards the files: Put and the other writers hold it exclusively for
// the few stores they make, Query holds it shared. A flush holds it only
// to hand the entry buffer over and to take it back; its writes and its
// fdatasync run without it, serialised with unmapping by a second mutex,
// so flushing never blocks queries or Put for the length of the I/O.
package indexfile
