// Package commitlog is Bolide's append-only message log: every record a
// broker accepts is written here once, in arrival order, and found again by
// its physical offset.
//
// # Files
//
// The log is a directory of segment files of equal size (1 GiB by default):
//
//	commitlog/00000000000000000000   bytes [0, 1 GiB)
//	commitlog/00000000001073741824   bytes [1 GiB, 2 GiB)
//	…
//
// A file's name is the absolute offset of its first byte, as 20 zero-padded
// decimal digits. Names are contiguous: each starts where the previous one
// ends. Every file is created at its full size and preallocated with
// fallocate(2), so a store into its mapping can never fault for lack of disk
// space; the next file is prepared in the background before the writer needs
// it. Every file is mapped with MAP_SHARED for reads.
//
// # Records
//
// Records use RocketMQ's stored-message layout (see package message) and are
// never split across files. When a record and an 8-byte blank do not both fit
// in what is left of a file, the writer ends the file with a blank — TOTALSIZE
// = bytes left, MAGICCODE = 0xCBD43194 — and continues at the start of the
// next file. Past the last record the preallocated file reads as zeros, so a
// zero TOTALSIZE marks the end of the written log.
//
//	segment: | record | record | … | record | blank (size = rest) 0 0 0 … |
//
// # Writing
//
// One append lock serialises writers. Inside it the record gets its physical
// offset, the next offset of its ConsumeQueue (topic, queue id) and the store
// timestamp; its checksum trailer is resealed; and its bytes are written by
// one of two paths:
//
//   - mmap: copied into the writable mapping, that is into the page cache:
//     an acknowledged record survives a crash of the process. Readable at
//     once; msync makes it durable. So that a store is only a copy, the
//     writer's part of the mapping reads no pages around a fault, a
//     goroutine makes the pages 4 MiB ahead of the writer present and
//     writable (MADV_POPULATE_WRITE, Linux 5.14; older kernels fault each
//     page in on its first store), having first written zeros into them
//     with pwrite, which puts them in the page cache for less than the
//     populating alone would cost (zeroahead.go; appends wait rather than
//     pass a range being zeroed), and a flush first unmaps the writer's
//     pages it writes back, so that write-back need not write-protect them
//     one by one (mmapwrite.go).
//   - pwrite: staged in memory and written with pwrite(2) into the same
//     file. In async mode the appender writes what is staged before it
//     returns (appenders arriving together share one pwrite), so an
//     acknowledged record is in the page cache and survives a crash of the
//     process; in sync mode the group-commit flusher writes and fdatasyncs
//     it. Readable once written; fdatasync makes it durable.
//
// WriteAuto (the default) uses mmap with FlushAsync and pwrite with
// FlushSync. An async append waits for no flush, and with the pages made
// writable ahead a copy costs less than a pwrite per append (one producer
// through a broker on this project's reference machine: 1.26× the messages
// a second at 0.8× the broker CPU per message). A durable append waits for
// its flush, and fdatasync of pwritten pages is several times cheaper than
// msync of stored ones. docs/BENCHMARKS.md has the measurements.
//
// # Flushing
//
// FlushSync is group commit: an append returns only when a flush covering
// its last byte has completed. One flusher goroutine flushes everything
// appended so far each time any appender waits, so concurrent appenders
// share one fdatasync. Before a flush it gathers appends one of two ways
// (groupcommit.go): eagerly, until the log stops growing (appenders in
// this process, back within microseconds), or by regrouping, until as many
// appends have come back as the last flush woke (appenders behind a
// network, back after a round trip longer than a flush); it measures the
// appends each way makes durable per second and keeps the better. So
// that the fdatasync writes the appended bytes alone, and not also the
// record of which preallocated extents now hold data, a goroutine writes
// zeros into the active segment up to ZeroAhead (32 MiB) ahead of the
// writer and waits for their write-back; an append never passes a range
// being zeroed (zeroahead.go).
//
// FlushAsync acknowledges at once; every FlushInterval
// (500 ms) the flusher flushes if at least FlushLeastPages (4) pages are
// dirty, and fully every FlushThoroughInterval (10 s).
//
// Three offsets describe the log: written (MaxOffset) ≥ committed (bytes in
// the file or mapping) ≥ flushed (durable). Readable — what readers and the
// dispatcher may see — is flushed in sync mode and committed in async mode,
// so with sync flush no consumer ever sees a record that is not durable.
//
// A failed write or sync is sticky: the log refuses every later append with
// ErrWriteFailed. Appends are refused with ErrDiskFull while the disk is more
// used than DiskFullRatio (90 %) or when a new segment cannot be allocated.
//
// # Recovery
//
// Open takes an offset from which to verify (the caller's checkpoint: a record
// boundary known to be durable). From there it walks the records, checking
// each one's size, magic, structure, body CRC, record checksum trailer and
// that its PHYSICALOFFSET field equals its position. The first record that
// fails ends the log: the rest of its segment is cleared (hole punched and
// reallocated, so it reads as zeros) and every later segment is deleted. A
// segment file shorter than the segment size (cut by a power loss) is
// re-extended first; an empty last one (a crash between making the next
// file and preallocating it) is removed, so that a full disk cannot keep
// the log from opening. The kept prefix is fdatasync'ed before appends resume.
// The time recovery takes depends on how far the checkpoint lags the end of
// the log, never on the log's total size.
//
// # Retention
//
// DeleteExpired deletes whole segments from the oldest: expired ones (last
// modified more than MaxAge ago) during the configured hours, or at any hour
// above the high-water disk ratio. A segment that has not expired is never
// deleted, however full the disk: appends are refused instead, so nothing
// acknowledged is lost to make room (RocketMQ would delete it). The active
// segment and segments not fully flushed are never deleted.
//
// # Replication
//
// A master ships its log to slaves (package ha) and a slave's log receives
// it; both stay byte-identical, segment boundaries and blanks included.
//
//   - CommittedOffset is the end of the bytes in the files (pwritten or in
//     the mapping), at a record boundary; CommittedChanged fires when it
//     moves. The master ships up to it, before its own flush completes.
//   - ReadChunk(off, max, dst) copies the whole records starting at off,
//     up to max bytes (at least one record), never across a segment end;
//     an end-of-segment blank comes alone, as its 8-byte header.
//   - AppendRaw(ctx, off, data) appends such bytes at off == MaxOffset,
//     verifying each record (structure, body and record checksums,
//     PHYSICALOFFSET equal to its position, fitting its segment as on the
//     master) and writing it unchanged; a blank header ends the segment.
//     It honours the log's flush mode like Append (AppendRawNoWait does
//     not wait). Queue offsets travel inside the records: AppendRaw does
//     not advance the map Append uses, so a slave that becomes master sets
//     it from its ConsumeQueues (SetQueueOffset) before its first Append.
//   - StartAt(off) makes an empty log start at off, a segment start, so a
//     new slave of a master whose oldest segments were deleted begins
//     where the master's log begins; reopening finds the first segment
//     there.
//   - LastRecord and RecordAt describe a record (offset, size, the
//     checksum in its trailer, store timestamp): the slave's handshake
//     names its last record and the master checks it has the same one at
//     the same offset.
//
// # Truncation
//
// Truncate(off) cuts the log back to a record boundary (CheckBoundary: the
// log's end, a segment start, or where a record — its PHYSICALOFFSET says
// so — or an end-of-segment blank starts), for a slave whose log forked
// from its new master's. It flushes everything first, deletes the segments
// that start above off (newest first, so the names stay contiguous, and
// the segment prepared in advance), clears the rest of off's segment (hole
// punched and reallocated, as recovery does for a torn tail), fsyncs the
// files and the directory, and sets the written, committed, flushed and
// readable offsets to off. It forgets the next queue offsets: the caller
// sets them again from its ConsumeQueues. A reopen that verifies from a
// boundary at or below off recovers exactly to off. Nothing may append
// meanwhile; readers may, and get ErrOffset (or a bad header) for what
// was cut. A failure part-way is sticky (ErrWriteFailed): the files are in
// an unknown state until a reopen, whose caller repeats the cut (the store
// keeps an intent file for that).
//
// # Read-ahead
//
// Reads go through the mapping, so a read of bytes the page cache does not
// hold waits on a page fault, one after another (and a goroutine in a page
// fault keeps its P). Prefetch(from, to) is a reader's hint that it is
// about to read [from, to) and will go on in order — the store gives it
// once per batch of ConsumeQueue units a pull looks at. For up to 16
// reading positions the log remembers how far ahead it has asked the
// kernel to read; once a reader is ReadAhead/4 past that, a
// background goroutine asks for the ReadAhead bytes (16 MiB by default)
// after what the reader reads with posix_fadvise(WILLNEED), which queues
// the reads and returns. A call asks for at most what the kernel reads per
// call, max(read_ahead_kb, max_sectors_kb) of the disk (128 KiB to 8 MiB).
// Nothing past Readable is asked for, so readers at the tail, and readers
// inside what was asked for, make no system call. Options.ReadAhead < 0
// turns it off.
//
// # A bounded page cache
//
// With Options.CacheWindow (512 MiB by default) a goroutine of the log drops,
// four times a second, the bytes more than the window behind the flushed
// end from the process's mappings (madvise DONTNEED) and then from the page
// cache (posix_fadvise DONTNEED; they are clean, being flushed), and raises
// ResidentFrom to that point, below which readers use pread. The appends
// that follow take the memory it gave back instead of fresh pages, so the
// log's share of the page cache stays near the window however much is
// written; reads further back go to the file (and read-ahead).
//
// ReadSpan (a run of records, one after another), PreadRecords (due
// timer messages read back a megabyte at a time), PreadRecord (one record,
// for a lookup) and ReadChunk (a slave catching up, up to 4 MiB a chunk)
// read what lies below CacheFrom, the point the window dropped the page
// cache up to, with O_DIRECT (direct.go): whole 4 KiB blocks into an
// aligned buffer, from which the bytes asked for are copied; the page
// cache is left alone, where a read through it costs the kernel a page
// allocation and a read request per 4 KiB in the reader's context. The
// segment's O_DIRECT descriptor is opened on first use and closed with the
// segment; a file system that refuses O_DIRECT (tmpfs) is read through the
// page cache.
//
// # Concurrency
//
// Append* serialise on the append lock. View, ReadRecord, ReadChunk and
// Scan may run concurrently with appends and with each other; they hold a
// read lock on the segment list so retention cannot unmap a file under
// them. Prefetch may be called from anywhere, under the segment list's
// read lock too; its goroutine takes that read lock once per fadvise call.
package commitlog
