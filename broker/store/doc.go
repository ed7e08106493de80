// Package store wires Bolide's storage together: the CommitLog, the
// ConsumeQueues, the IndexFiles, the dispatcher that builds the latter from
// the former, the checkpoint and abort marker, recovery and retention. It is
// the broker's message store; it knows nothing of the wire protocol.
//
// # Directory
//
//	<dir>/commitlog/<20-digit offset>     CommitLog segments (package commitlog)
//	<dir>/consumequeue/<topic>/<queue>/…  ConsumeQueues (package consumequeue)
//	<dir>/index/<yyyyMMddHHmmssSSS>       IndexFiles (package indexfile)
//	<dir>/checkpoint                      what is durable, see below
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
//	 12  4  version (1)
//	 16  8  LogFrom        record boundary ≤ the durable end of the log;
//	                       recovery verifies records from here
//	 24  8  DispatchFrom   every record below it has durable ConsumeQueue
//	                       and IndexFile entries
//	 32  8  FlushedOffset  the log's durable end when taken (informational)
//	 40  8  StoreTimestamp of the last dispatched record
//	 48  8  WrittenAt      ms since the epoch
//	 56  4  CRC-32 (IEEE) of bytes 8..56
//
// A checkpoint is taken every CheckpointInterval (1 s) and at Close: the
// queues and index are flushed first, then the slot is written and
// fdatasync'ed. LogFrom trails the durable end by at least RecoverWindow
// (4 MiB) so damage to the last records is found even after a clean stop.
//
// # Dispatch
//
// One goroutine tails the CommitLog up to its readable end (the flushed end
// in sync mode, so consumers never see what is not durable) and for every
// record writes the ConsumeQueue unit (plain and committed messages) and one
// index entry per KEYS value and unique id (all but rolled-back
// transactional records), then wakes parked pulls. A transient failure
// (full disk, I/O error) stops dispatch at that record and retries it later;
// an inconsistency a retry cannot fix is logged, counted and skipped.
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
// # Retention
//
// Every RetentionInterval (10 s) the CommitLog's retention policy runs; when
// it deletes segments, queue and index files that only point below the new
// minimum offset are deleted too.
package store
