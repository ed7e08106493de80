// Package ha replicates a master broker's CommitLog to its slaves so that
// each slave holds a byte-identical copy.
//
// The package knows nothing of the CommitLog's implementation: the master's
// Server reads through the Source interface and the slave's Client writes
// through the ReplicaLog interface; the broker adapts its log to both. The
// wire protocol is encoded and decoded by pure functions (frame.go).
//
// # Transport
//
// One plain TCP connection per slave, to the master's HA address (by
// default the broker's listen port + 1, RocketMQ's 10912 next to 10911).
// Replication is one ordered bulk stream with a tiny ack stream the other
// way; a raw socket moves it with one writev per frame (13-byte header plus
// the records, straight from a copy of the log) and no per-message framing,
// HTTP/2 flow control or protobuf encoding of a general RPC layer.
//
// # Session
//
//	slave                                   master
//	  HELLO  (who, where my log ends) ───────▶  check the slave's log is a prefix of ours
//	         ◀─────── WELCOME (start, epoch)    or REFUSE (code, reason) and close
//	  ACK    (applied offset) ───────────────▶
//	         ◀─────── DATA (offset, records)    as soon as bytes are committed
//	  ACK    after every applied batch ──────▶
//	         ◀─────── BEAT every HeartbeatInterval while idle
//	  ACK    every HeartbeatInterval ────────▶
//
// The slave's HELLO carries its maximum CommitLog offset and, when that is
// above 0, the start, size and stored checksum (the record's checksum
// trailer) of its last record. The master accepts when that record is a
// record of its own log with the same size and checksum and the slave's end
// is where that record ends (or, when the slave's log ends with a segment's
// end-of-file blank, the end of that segment). It then streams from the
// slave's end. A slave whose log is empty (offset 0) gets the master's whole
// retained log: WELCOME's start is the master's minimum offset, and the
// slave's log starts its first segment there. Anything else is refused:
//
//	RefuseDiverged     the slave holds bytes the master does not have (its
//	                   last record differs, or it is ahead of the master);
//	                   the slave stops replicating and reports it: it never
//	                   truncates its log by itself
//	RefuseTooOld       the slave's end is below the master's minimum offset
//	                   (retention deleted what it needs)
//	RefuseMismatch     wrong broker name, segment size or protocol version
//	RefuseNotMaster    the broker is not (or no longer) a master; the slave
//	                   retries later, possibly with another master
//
// The master ships whole records only, up to MaxFrameBytes (256 KiB) per
// DATA frame (a larger record travels alone). An end-of-segment blank
// travels as its 8-byte header in a DATA frame of its own; the slave writes
// it and continues at the next segment, so segment boundaries, and with them
// every byte, match. Bytes are shipped once they are in the master's file,
// before the master's flush completes, so replication and flushing overlap.
//
// When woken by new bytes the master yields briefly (at most 100 µs, until
// its committed offset stops growing) so that appends arriving together —
// every producer sends again right after a sync acknowledgement — travel
// in one frame and are written and acknowledged once by the slave.
//
// The slave verifies every record (structure, checksums, physical offset
// equal to its position) as it appends it and acks the offset up to which
// its log holds the master's bytes, honouring its own flush mode: with
// async flush the reader acks right after appending (once no further frame
// is already buffered); with sync flush another goroutine waits for the
// fsync and acks, while the reader goes on appending. Either side drops a
// connection on which nothing arrived for Timeout (5 s); the slave
// reconnects with backoff (100 ms doubling to 5 s) and a new HELLO, which
// re-verifies where the two logs meet.
//
// # In-sync slaves
//
// A connected slave joins the in-sync set when it acks an offset at least
// as high as the master's committed offset was at its previous ack (it is
// within one round trip of the head); it leaves when its lag exceeds
// MaxLagBytes or when its connection drops (silence for Timeout included).
// WaitReplicated, which the broker calls in sync replication mode, returns
// once enough in-sync slaves acked an offset, and fails with
// ErrNotEnoughInSync when too few slaves are in sync (at the start or
// while waiting) or with ErrSlaveTimeout when the wait is longer than the
// caller's timeout. It never degrades to asynchronous replication.
//
// # Frames
//
// Every frame starts with a one-byte kind. All integers are big-endian;
// strings are UTF-8 with a 2-byte length.
//
//	HELLO 'H' (0x48), slave → master, 41 + n bytes
//	  0  1  kind
//	  1  4  magic 0x424C4841 ("BLHA")
//	  5  2  protocol version (1)
//	  7  8  slave broker id
//	 15  8  slave's maximum CommitLog offset
//	 23  8  start offset of the slave's last record (-1: none)
//	 31  4  size of that record (0: none)
//	 35  4  its stored record checksum (the trailer's value)
//	 39  2  n = length of the broker name
//	 41  n  broker name (must equal the master's)
//
//	WELCOME 'W' (0x57), master → slave, 49 + n bytes
//	  0  1  kind
//	  1  4  magic 0x424C4841
//	  5  2  protocol version (1)
//	  7  8  start: the offset the first DATA frame starts at
//	 15  8  master's minimum CommitLog offset
//	 23  8  master's committed CommitLog offset
//	 31  8  master's segment size (must equal the slave's)
//	 39  8  master's epoch
//	 47  2  n = length of the master's client address
//	 49  n  master's client (gRPC) address, for metadata sync
//
//	REFUSE 'R' (0x52), master → slave, 5 + n bytes; the master then closes
//	  0  1  kind
//	  1  2  code (RefuseDiverged 1, RefuseTooOld 2, RefuseMismatch 3,
//	        RefuseNotMaster 4, RefuseBadHello 5, RefuseInternal 6)
//	  3  2  n = length of the reason
//	  5  n  reason (text for logs and status)
//
//	DATA 'D' (0x44), master → slave, 13 + length bytes
//	  0  1  kind
//	  1  8  offset of the first byte (the slave's current end)
//	  9  4  length (1 .. MaxDataLen)
//	 13  …  whole records, or one 8-byte end-of-segment blank header
//
//	BEAT 'B' (0x42), master → slave, 17 bytes
//	  0  1  kind
//	  1  8  master's committed offset
//	  9  8  master's clock (ms since the epoch)
//
//	ACK 'A' (0x41), slave → master, 17 bytes
//	  0  1  kind
//	  1  8  applied offset: the slave's log holds the master's bytes up to
//	        here (durably when the slave flushes synchronously)
//	  9  8  store timestamp of the slave's last record (for lag in time)
package ha
