// Package consumequeue implements Bolide's ConsumeQueue: for every (topic,
// queue id) a dense, append-only index of the messages of that queue in the
// CommitLog. Queue offset N is the N-th message of the queue; its unit says
// where the message lives in the CommitLog. This comment is the on-disk
// contract; the units are RocketMQ's, byte for byte, and so are the files
// from UnitsPerFile units on (below it a queue's files grow, see Files).
//
// # Unit
//
// Every unit is 20 bytes, all fields big-endian (two's complement):
//
//	 0               8       12                  20
//	+---------------+-------+-------------------+
//	| Offset  int64 | Size  |  TagHash   int64  |
//	|  CommitLog    | int32 |  tag hash code,   |
//	|  physical     | bytes |  0 = no tag (the  |
//	|  offset       |       |  deliver time for |
//	|               |       |  delay topics)    |
//	+---------------+-------+-------------------+
//
// A unit holds data when Offset >= 0 and Size > 0. The all-zero unit marks
// the end of data. The "pre-blank" unit (Offset 0, Size 2^31-1, TagHash 0) is
// RocketMQ's filler for the units of a queue's first file that precede the
// queue's first real unit; it counts as data for recovery but is never
// returned (it lies below MinOffset). Put rejects a Size of 2^31-1.
//
// # Files
//
//	<root>/<topic>/<queueId>/<start>
//
//	<root>/orders/0/00000000000000000000   units      0 ..   2047   (F = 2048)
//	<root>/orders/0/00000000000000040960   units   2048 ..   4095
//	<root>/orders/0/00000000000000081920   units   4096 ..   8191
//	...                                    (each file twice the one before)
//	<root>/orders/0/00000000000005242880   units 262144 .. 299999   (to U = 300 000)
//	<root>/orders/0/00000000000006000000   units 300000 .. 599999   (U units from here on)
//	<root>/orders/3/...
//
// queueId is the decimal id without padding. <start> is the byte offset of the
// file's first unit in the queue's concatenated files (its first unit times
// 20), as 20 zero-padded decimal digits. Which file holds unit N is a
// function of N alone (the layout), so that a queue's disk use follows
// what it holds while its files are found again from their names:
//
//   - from U = UnitsPerFile on (300 000 units = 6 000 000 bytes by default)
//     every file holds U units and starts at a multiple of U, as RocketMQ's
//     files do;
//   - below U the files grow: the first two hold F = FirstFileUnits units
//     (2048 = 40 960 bytes by default), and every later one twice the one
//     before it, [F·2^(k-1), F·2^k), the last of them ending at U. With
//     F >= U every file is full-size.
//
// A queue whose file 0 is longer than F units on disk was written when
// every file was full-size: its file 0 holds U units and its files go on at
// multiples of U, which both layouts agree on. Every file is created at its
// full size with fallocate (so writes cannot fail for space inside a
// file) and read and written with pread and pwrite; no file is mapped. A
// queue's files are contiguous: no file is missing between the first and
// the last.
//
// A file's descriptor is opened when the file is written or read, and
// closed once the file is complete and synced, or by a flush that finds
// the queue unused since the previous flush, or, when the store holds
// more than MaxOpenFiles descriptors, right after the flush that synced
// it. So a store of many queues holds descriptors only for those in use.
//
// # Writing and flushing
//
// Units are appended in CommitLog order by the dispatcher: Put at MaxOffset
// appends (and rejects a unit whose Offset precedes the end of the previous
// one); Put below MaxOffset is an idempotent re-dispatch that must match what
// is stored; Put above MaxOffset is a gap, except on a queue that has no file
// yet, which starts there: its first file is the one holding that offset, the
// units before it are pre-blank (written to the new file at once), and
// MinOffset is that offset. A new file is created when the first unit past
// the last file is put. NeedsFile(off) tells whether a Put at off would
// create one, FileFor(off) which file and how large, and Prepare creates a
// queue's directory ahead of its first file. Create makes both the
// directory and the first file (at offset 0) of a queue that has neither
// and never held a unit, ahead of its first Put (the broker does so when a
// topic is created). Such a file is all zeros, so it reads as an empty
// queue, also after a reopen. A queue whose only file starts at 0 and
// holds no unit (made so, or truncated back to nothing) counts as one
// without files for a Put above MaxOffset: the Put removes the file and
// starts the queue there. When the disk has no room for a new file and Options.Spare is set,
// Spare supplies it instead (the broker's store renames a file it
// preallocated earlier); without it Put fails with an error that
// fsutil.IsNoSpace recognises and the queue is unchanged.
//
// A unit that is put is kept, encoded, in the queue's memory (the stage) and
// is readable from there at once. Flush writes the staged units to their
// files with pwrite and fdatasyncs the files, and fsyncs the directories
// that got entries (a new file, a new queue or topic directory) since the
// last flush; only then are they on disk. Store.Flush does the same for
// every queue, except that when more than SyncFSAbove queues (64) have
// something to make durable it writes them all and then makes everything
// durable with one syncfs(2) of the file system: one journal commit for
// thousands of files instead of one each. Store.FlushBelow(keepFrom), for
// periodic checkpoints, does the same but then leaves staged the units of a
// queue that has less than a page (4096 bytes) of them, all staged and
// pointing at or above CommitLog offset keepFrom, appends them to the
// staging journal (below), and returns the lowest such offset. So a
// process crash loses only the units put since the last flush (the broker
// re-dispatches them from its checkpoint), and nothing ever stores
// through a mapping: a store into a page that a flush has just cleaned
// faults and waits for the page's writeback, stalling the writer (and, in
// a Go process, any stop-the-world behind it) for tens of milliseconds.
//
// # Staging journal
//
// With thousands of queues each written now and then, writing every
// queue's one or two new units to its own file at every flush costs an
// open, a pwrite and a close per queue. FlushBelow instead appends the
// units it leaves staged to one file, <root>/staged.journal, in one
// write before the flush's syncfs, and the queue's own file gets them
// later, several at a time. All integers big-endian:
//
//	header (20 bytes):  magic 0x424C534A ("BLSJ") u32 | version (1) u32 |
//	                    generation u64 (≥ 1) | CRC-32 (IEEE) of the 16 before
//	block (one a flush): payload length u32 (> 0) |
//	                    CRC-32 (IEEE) of the generation (8 bytes) then the payload |
//	                    payload: entries
//	entry:              topic length u16 | topic | queue id i32 |
//	                    first queue offset i64 | unit count u32 (> 0) |
//	                    the units, 20 bytes each
//
// An entry holds the units of one queue that neither the journal nor the
// queue's files held yet, so it starts where the queue's last entry or
// its files' units end, whichever is later. Reading
// stops at the first block that is cut short or fails its checksum (a
// crash during the append); Open cuts those bytes off. Because the block
// checksum covers the generation, a block left from an earlier
// generation never passes.
//
// Flush, and so every full flush, empties the journal once every unit is
// durable in its file: it writes the header of the next generation and
// cuts the file after it, then fdatasyncs. TruncateAfter (when the
// journal holds blocks) and DeleteTopic flush everything and empty the
// journal first, so that no reopen can put back a unit that was cut, or
// put a deleted topic's units into a new topic of the same name. Queue's
// own TruncateAfter marks the journal for the next FlushBelow to empty;
// use the store's. The file is made only by such an emptying (so the
// first FlushBelow of a store without one flushes everything), and when
// it cannot be made or appended to (a full disk), or when the units it
// would leave staged exceed Options.MaxStagedBytes (64 MiB: they are held
// in memory too), FlushBelow flushes everything instead.
//
// Open reads the journal and puts every unit back into its queue, staged,
// with Put's rules: units below MinOffset are ignored, those already in
// the files must be equal, the rest must continue the queue. One
// difference is expected: a process killed while a flush wrote journaled
// units to their file leaves that write cut at a page boundary (the
// kernel stops a buffered write there once a fatal signal is pending),
// so the files' last unit may hold a journaled unit's first bytes and
// zeros after. When the cut falls on a page boundary and the offsets
// agree, that unit is cut from the queue and the journaled one put in its
// place; any other difference is a contradiction. What it
// found is Store.Replayed: the generation and bytes of whole blocks, the
// units put back, and whether any could not be (a queue without files, a
// contradiction, a gap: Lost, after which it stops). A caller records
// Store.Journal after each flush with its own checkpoint and asks
// JournalState.Covers at the next Open whether the journal still holds
// all it relied on; when it does not, the caller rebuilds the queues from
// below the first unit it left staged.
//
// # Recovery
//
// Open walks <root>: entries that are not a topic directory, a decimal queue
// directory or a numeric file are logged and skipped. In each queue the files
// must start where the layout starts a file, be no longer than the layout
// says and be contiguous, else Open fails with ErrCorrupt (a changed
// UnitsPerFile or FirstFileUnits is caught this way). A short file (cut by
// a crash) loses any partial unit at its end and is re-extended with zeros
// to its size. Trailing files whose first unit is
// empty are removed (keeping one). MaxOffset is the first unit of the last
// file that does not hold data; units after it in that file are zeroed so
// that stale units can never reappear behind new ones. Earlier files are
// trusted. MinOffset is the first unit of the first file that is not
// pre-blank. A unit straddling a page boundary can be torn by a power cut
// (its tail page lost); the broker therefore truncates the queues back to its
// checkpoint after an unclean stop and re-dispatches from there.
//
// # Truncation and deletion
//
// TruncateAfter(phy) drops from the stage, or zeroes in the files (and
// syncs), every unit from the first one whose Offset >= phy to MaxOffset,
// and deletes the files that lie wholly past that point, newest first, but
// never the first file; MaxOffset becomes that
// point (MinOffset when nothing is left). DeleteBefore(minPhy), called with
// the CommitLog's minimum offset after retention and at start, deletes a
// queue's oldest files, oldest first, while the last unit of the file ends
// at or below minPhy, never the last file, and raises MinOffset to the
// first unit whose Offset >= minPhy (binary search, in the first remaining
// file), MaxOffset if none: a queue file holds 300 000 units, so most of
// the units below the CommitLog's minimum sit in a file that also holds
// units above it. A crash in either leaves a contiguous run of files.
// MinOffset is not persisted: Open recomputes it from the files as above,
// and the owner of the CommitLog calls DeleteBefore again.
//
// # Concurrency
//
// Each queue has one writer (Put, TruncateAfter) and any number of readers
// (Get, Read, MinOffset, MaxOffset, OffsetForTime). MaxOffset is published
// after the unit is staged, so a reader never sees a unit that is not fully
// there. A read-write lock guards each queue's file list, descriptors and
// stage: readers hold it shared (and may open a closed file's descriptor);
// the writer holds it exclusively to stage a unit or add a file;
// TruncateAfter, DeleteBefore, Close and whoever closes a descriptor hold
// it exclusively, so no reader ever reads through a closed descriptor or a
// unit being zeroed. Flush takes the lock only to look and, after its
// pwrite, to move the written mark: it may run concurrently with
// everything, and it keeps files from being removed while it writes them. The package starts no goroutine.
package consumequeue
