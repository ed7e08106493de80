// Package store wires Bolide's storage together: the CommitLog, the
// ConsumeQueues, the IndexFiles, the dispatcher that builds the latter from
// the former, the checkpoint and abort marker, recovery and retention. It is
// the broker's message store; it knows nothing of the wire protocol.
//
// # Directory
//
//	<dir>/commitlog/<20-digit offset>     CommitLog segments (package commitlog)
//	<dir>/consumequeue/<topic>/<queue>/…  ConsumeQueues (package consumequeue)
//	<dir>/consumequeue/staged.journal     their staging journal (see Checkpoint file)
//	<dir>/index/<yyyyMMddHHmmssSSS>       IndexFiles (package indexfile)
//	<dir>/reserve/consumequeue-<n>        spare full-size ConsumeQueue files, see Full disk
//	<dir>/reserve/cqfirst-<n>             spare first ConsumeQueue files
//	<dir>/reserve/index-<n>               spare IndexFiles
//	<dir>/checkpoint                      what is durable, see below
//	<dir>/ha-truncate.json                a truncation in progress, see Truncation
//	<dir>/abort                           exists while the store is open
//	<dir>/lock                            flock'ed while the store is open
//
// # Checkpoint file
//
// 1024 bytes: two 512-byte slots written alternately in place (the file is
// allocated once, so checkpoints keep working on a full disk). All integers
// big-endian.
//
//	slot (at 0 and at 512):
//	  0  8  sequence number (the valid slot with the higher one wins)
//	  8  4  magic 0x424C4350 ("BLCP")
//	 12  4  version (2; version 1 ends after WrittenAt with its CRC at 56,
//	        and is read as StagedFrom = DispatchFrom, no journal)
//	 16  8  LogFrom        record boundary ≤ the durable end of the log;
//	                       recovery verifies records from here
//	 24  8  DispatchFrom   every record below it has durable ConsumeQueue
//	                       and IndexFile entries (ConsumeQueue units in
//	                       their files or in the staging journal)
//	 32  8  FlushedOffset  the log's durable end when taken; a log that
//	                       recovers to below it lost records and is
//	                       reported torn
//	 40  8  StoreTimestamp of the last dispatched record
//	 48  8  WrittenAt      ms since the epoch
//	 56  8  StagedFrom     ≤ DispatchFrom: units of records from here on may
//	                       be in the staging journal only
//	 64  8  JournalGen     the staging journal's generation and the bytes
//	 72  8  JournalEnd     of its blocks that the checkpoint relies on
//	 80  4  CRC-32 (IEEE) of bytes 8..80
//
// A checkpoint is taken every CheckpointInterval (1 s) and at Close: the
// queues and index are flushed first (with many queues written since the
// last one, the queues' flush ends in one syncfs of the file system rather
// than an fdatasync per file: consumequeue/doc.go), then the slot is
// written and fdatasync'ed. With many queues written, a periodic
// checkpoint also leaves staged the units of a queue that has less than a
// page of them, while they point less than QueueFlushLag (1 GiB) behind
// the dispatched end, and appends them to the ConsumeQueues' staging
// journal, which the same syncfs makes durable; it records the journal's
// position and StagedFrom, the first unit so left. Every
// QueueFlushEvery-th (60th) checkpoint, and the one at Close, flush
// everything and empty the journal. A queue written now and then is so
// written to its file about once a minute instead of once a second.
// Recovery takes the units back from the journal and dispatches again
// from DispatchFrom; when the journal does not hold all that the
// checkpoint relied on (consumequeue.JournalState.Covers: damaged, cut,
// or contradicting the files), it dispatches again from StagedFrom
// instead, at most about QueueFlushLag more. LogFrom trails the durable
// end by at least RecoverWindow (4 MiB) so damage to the last records is
// found even after a clean stop; a recovery that goes back to StagedFrom
// reads the records below LogFrom, which were durable when it was taken.
//
// # Dispatch
//
// Dispatch runs up to the CommitLog's readable end (the flushed end in sync
// mode, so consumers never see what is not durable) and for every record
// writes the ConsumeQueue unit (plain and committed messages) and one index
// entry per KEYS value and unique id (all but rolled-back transactional
// records), then wakes parked pulls. It never passes the planned offset (see
// Full disk). A transient failure (an I/O error) stops dispatch at that
// record and retries it later; an inconsistency a retry cannot fix is
// logged, counted and skipped.
//
// Whoever holds pauseMu dispatches. A Put dispatches its own records (and
// any planned before them) once they are planned: on its own goroutine, or,
// when the server that took the request runs work after its answers
// (internal/afterreply: the frame and remoting servers for requests served
// on the connection's reader), right after the acknowledgement is written.
// It only tries the lock: when the lock is held, its holder looks again
// after letting go (a Put loops; the dispatcher goroutine, told through
// plannedSig, steps again). The dispatcher goroutine does the rest —
// replicated records (AppendRaw fires the log's ReadableChanged; local
// appends do not, commitlog.Options.AppendersDispatch), the records of a
// failed put, those held back by the dispatch limit, retries — so a lone
// producer's sends wake no other goroutine.
//
// SetDispatchLimit bounds dispatch: only records that end at or below the
// limit are dispatched (default math.MaxInt64, no limit). A master in
// controller sync mode sets it to its confirm offset, so consumers (pulls,
// POP, the delay and transaction services, which all read through the
// ConsumeQueues) never see a record a failover could truncate. Raising the
// limit wakes the dispatcher; lowering it below what is dispatched takes
// nothing back. The limit lives in memory only: Open dispatches the whole
// log. WaitDispatched waits as before, so a caller waiting for the end of
// the log waits for the limit to pass it.
//
// # Full disk
//
// CommitLog segments are preallocated, so the log fails only when it needs
// a new segment (or when the disk is above DiskFullRatio). The ConsumeQueues
// and IndexFiles, though, are built after the fact: a message acknowledged
// while the disk fills may need a new queue or index file when the
// dispatcher reaches it. The store makes sure that room exists before it
// acknowledges the message:
//
//   - Reserve: <dir>/reserve holds ReserveQueueFiles (4) spare full-size
//     ConsumeQueue files, ReserveFirstQueueFiles (64) spare first
//     ConsumeQueue files (a queue's files grow from a small first one:
//     consumequeue/doc.go, "Files") and ReserveIndexFiles (1) spare
//     IndexFiles, preallocated and synced at Open (by default 24 MB, 2.6 MB
//     and 420 MB). Queue and index files are created as usual; only when
//     that fails for lack of space is a spare renamed in the new file's
//     place: a first file takes a first-file spare while there is one, any
//     other queue file (and a first file after that) a full-size one, cut
//     to the file's size.
//   - Planning: records are planned in log order, and for every record not
//     yet dispatched the plan holds what its dispatch will need: one spare
//     ConsumeQueue file for each record that will start a queue file (a
//     full-size spare for a file larger than a first file, either kind for
//     a first file), and room for its index entries in the newest IndexFile
//     or the spare ones. When these do not fit, the planner adds spares (32
//     first-file spares at a time, sharing one directory sync); when the
//     disk has no room for one, it stops. Once the files they were added
//     for exist, the keeper removes the surplus: the reserve goes back to
//     its target (or to what the files still planned hold; twice that for
//     first files, which come in streams). Put acknowledges messages (after their flush
//     in sync mode) only once they are planned: it plans them itself, from
//     the messages, after the records before them. The dispatcher plans
//     what no put does (replicated records, those of a failed put) and
//     never passes the planned offset; a record decoded for planning is not
//     decoded again for dispatch. So every acknowledged message is
//     dispatched, full disk or not. A queue whose first file CreateQueues
//     made when its topic was created (the broker's CreateTopic) needs
//     nothing of the plan: no directory, no spare, no new file for the
//     dispatcher, so the first sends to a new topic wait for none of that
//     work. CreateQueues on a full disk fails; the queues it could not
//     make are planned as above.
//   - Refusal: from the moment a spare is taken (a file could not be
//     created) or cannot be replaced, or a record could not be planned, Put
//     fails at once with an error wrapping commitlog.ErrDiskFull (the
//     broker's DISK_FULL), appending nothing. A keeper retries every
//     DiskCheckInterval (at most a second apart) and accepts puts again
//     once the reserve is whole. The CommitLog's own checks still apply.
//   - A Put that passed that check just as the reserve ran out may find its
//     message appended but not planned: it fails with ErrDiskFull like a
//     flush timeout, and the message becomes visible once there is room (a
//     producer that retries it may store it twice). Nothing acknowledged is
//     ever hidden.
//   - Restart: recovery needs no new space for what was acknowledged: the
//     queue and index files it rebuilds after truncating take the space the
//     truncation freed, or the reserve. On a full disk Open recovers and
//     serves reads with puts refused. If the records at the end of the log
//     (never acknowledged) have no room, Open still succeeds, logs it, and
//     the dispatcher finishes once there is room; puts wait until it has.
//   - A slave plans before it dispatches too, but replication into its log
//     is not refused: on a full disk its consumers lag until there is room.
//
// # Resources
//
// Open logs what the store needs of the process's limits: its CommitLog
// segments and IndexFiles are mapped and hold a descriptor each; its
// ConsumeQueue files are not mapped and hold a descriptor only while in
// use, at most consumequeue.Options.MaxOpenFiles (1024) between flushes.
// It warns when those come within half of RLIMIT_NOFILE or
// vm.max_map_count.
//
// # Recovery
//
// Open reads the checkpoint (none: verify everything), lets the CommitLog
// verify records from LogFrom and cut a torn tail, drops ConsumeQueue units
// and index entries from min(DispatchFrom, log end) on, rebuilds them from
// the log, restores every queue's next offset, writes a checkpoint and only
// then accepts appends. The abort marker says whether the last stop was
// clean; recovery does the same work either way, so a clean stop whose files
// were damaged afterwards is still caught. Recovery time depends on how far
// the checkpoint trails the log, not on the log's size.
//
// # Replicas
//
// A slave's store is an ordinary store whose CommitLog is fed by
// replication (CommitLog().AppendRaw) instead of Put: the dispatcher builds
// its ConsumeQueues and IndexFiles from the replicated records as from its
// own, since records carry their queue offsets. StartAt starts an empty
// store at the master's minimum offset. AdoptQueueOffsets, called when a
// slave becomes master, waits until everything is dispatched and makes the
// CommitLog's next queue offsets those of the ConsumeQueues.
//
// # Truncation
//
// TruncateTo(off) cuts the store back to a CommitLog record boundary: a
// slave whose log went past its fork point with the new master's drops its
// tail there. An off that is not a boundary (a record start, the start of
// an end-of-segment blank, a segment start or the log's end) is refused
// with an error wrapping ErrNotBoundary, one outside the log with
// commitlog.ErrOffset; nothing changes then. The caller stops replication
// into the store first; readers may run on and get errors or nothing for
// what was cut. Retention and dispatch are paused while it runs, in this
// order:
//
//  1. <dir>/ha-truncate.json is written ({"version":1,"offset":off},
//     temporary file, fsync, rename, directory fsync);
//  2. the CommitLog is cut (commitlog.Log.Truncate: flushed, segments
//     above off deleted, the rest of off's segment cleared, synced);
//  3. ConsumeQueue units and then index entries at or above off are
//     dropped and their files flushed;
//  4. the dispatch state (dispatched and planned offsets, room held for
//     records past off) follows, and the CommitLog's next queue offsets
//     are those of the ConsumeQueues, raised by the records below off not
//     yet dispatched;
//  5. a checkpoint is written (DispatchFrom and LogFrom at or below off);
//  6. the intent file is removed and the directory fsynced.
//
// Open finishes a truncation it finds pending before anything else: it
// verifies the CommitLog from the checkpoint's LogFrom or the start of
// off's segment, whichever is lower (a checkpoint from before the cut may
// point past it), cuts it at off (an intent that does not parse or does
// not name a record boundary fails Open, naming the file), and lets the
// usual recovery drop queue and index entries past the log's end and
// rebuild the rest; it removes the intent file once its checkpoint is
// written. So a crash at any step leaves, after the reopen, a store that
// ends exactly at off with no stale queue unit or index entry.
//
// # Retention
//
// Every RetentionInterval (10 s) the CommitLog's retention policy runs; when
// it deletes segments, queue and index files that only point below the new
// minimum offset are deleted too, and every queue's min offset moves up to
// its first unit whose message is still in the log (RocketMQ's
// correctMinOffset: a binary search in the queue's first file, which, once
// the files are full-size, holds 300 000 units and so usually outlives many
// segments). Min offsets live in
// memory only; Open corrects them the same way after recovery (and deletes
// what a crash left behind). Everything that reports a queue's min offset
// (QueueOffsets, Queues) reports the corrected one, and a read below it is
// answered OffsetTooSmall with NextOffset at the min offset, also when
// retention emptied the queue.
package store
