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
// queue's directory ahead of its first file. When the disk has no room for a new file and Options.Spare is set,
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
// pointing at or above CommitLog offset keepFrom, and returns the lowest
// such offset: the caller's record of what is durable stays below it. So a process crash loses the
// units put since the last flush (the broker re-dispatches them from its
// checkpoint), and nothing ever stores through a mapping: a store into a
// page that a flush has just cleaned faults and waits for the page's
// writeback, stalling the writer (and, in a Go process, any stop-the-world
// behind it) for tens of milliseconds.
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
