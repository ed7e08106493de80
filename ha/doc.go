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
// One TCP connection per slave, to the master's HA address (by default the
// broker's listen port + 1, RocketMQ's 10912 next to 10911), in plain text
// or TLS: ServerOptions.WrapListener lets the broker apply its TLS mode to
// the HA listener (off, permissive, enforcing, as on its client port), and
// a slave with ClientOptions.TLS dials with TLS, verifying the master's
// certificate for the host of its HA address unless its configuration says
// otherwise.
// Replication is one ordered bulk stream with a tiny ack stream the other
// way; a raw socket moves it with one writev per frame (13-byte header plus
// the records, straight from a copy of the log) and no per-message framing,
// HTTP/2 flow control or protobuf encoding of a general RPC layer.
//
// # Session
//
//	slave                                   master
//	  AUTH   (credentials; only a slave ─────▶ (kept for the HELLO's check)
//	          that has some)
//	  HELLO  (who, where my log ends,  ─────▶  check the credentials (REFUSE
//	          v2: my epoch entries)            UNAUTHENTICATED), then that the
//	                                           slave's log is a prefix of ours
//	         ◀─────── WELCOME (start, epoch,    or TRUNCATE (fork, epoch) and close (v2),
//	                  v2: master's entries)     or REFUSE (code, reason) and close
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
// slave's log starts its first segment there. Anything else is refused
// (version 2 first applies the fork rule below):
//
//	RefuseDiverged     the slave holds bytes the master does not have (its
//	                   last record differs, or it is ahead of the master)
//	                   and no TRUNCATE applies; the slave stops replicating
//	                   and reports it: it never truncates its log by itself
//	RefuseTooOld       the slave's end, or the fork point, is below the
//	                   master's minimum offset (retention deleted what it
//	                   needs)
//	RefuseMismatch     wrong broker name, segment size or protocol version
//	RefuseNotMaster    the broker is not (or no longer) a master, or a
//	                   version 2 slave knows a newer epoch than the
//	                   master's; the slave retries later, possibly with
//	                   another master
//	RefuseUnauthenticated  the master checks credentials
//	                   (ServerOptions.Authenticate: the broker's ACL is on)
//	                   and the slave sent no AUTH or one that was refused;
//	                   checked before anything else, so a refused slave
//	                   learns nothing of the master's log. The slave logs
//	                   the reason at ERROR and retries with its backoff
//	                   (the master's users may change)
//
// A slave stopped by RefuseDiverged, RefuseTooOld or RefuseMismatch stays
// stopped until Client.Reconnect (a new master) or Close.
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
// reconnects with backoff (100 ms doubling to 5 s; at most 500 ms after a
// RefuseNotMaster or a master epoch below MinEpoch, which a failover in
// progress clears) and a new HELLO, which re-verifies where the two logs
// meet.
//
// # Authentication: AUTH
//
// A slave with credentials (ClientOptions.Credentials: the broker's access
// key and secret key) sends an AUTH frame right before its HELLO, in the
// same write, on every connection: the signed-date header of Bolide's
// protocols (package auth: "MQv2-HMAC-SHA1 Credential=<AK>, ..." over a
// UTC date), signed afresh for the connection. The ha package carries the
// two values and does not interpret them: the master hands them to
// ServerOptions.Authenticate (the broker's guard: the signature, the
// date's skew and replay, then that the user may make calls between
// daemons, an admin user). AUTH does not depend on the protocol version.
// A master without Authenticate (ACL off) reads an AUTH and ignores it, so
// version 1 and 2 slaves without AUTH keep working with it; a master from
// before AUTH refuses a slave that sends one (RefuseBadHello): leave the
// slave's credentials unset until its master is upgraded.
//
// # Protocol version 2: epochs and TRUNCATE
//
// Version 2 exists for failover under a controller. Every replica keeps
// epoch entries (EpochEntry: the epoch of a master and the CommitLog offset
// where it started writing); a master appends one when it takes over, and
// a slave takes its master's entries from every WELCOME. A slave speaks
// version 2 when ClientOptions.Epochs is set: its HELLO carries its
// entries. A master answers in the HELLO's version; with
// ServerOptions.Epochs set, its version 2 WELCOME carries its entries, and
// when the prefix check finds the slave diverged it applies the fork rule:
//
//	fork = ForkPoint(slave's entries, slave's end, master's entries,
//	                 master's committed offset)
//	  (the newest epoch both hold with the same start, cut at the smaller
//	  of the two ends of that epoch)
//	no shared epoch                        ⇒ REFUSE RefuseDiverged
//	fork ≥ the slave's end                 ⇒ REFUSE RefuseDiverged
//	fork < the master's minimum offset     ⇒ REFUSE RefuseTooOld
//	fork below the master's end and not
//	where a record or blank of its log
//	starts                                 ⇒ REFUSE RefuseDiverged
//	otherwise                              ⇒ TRUNCATE (fork, master's epoch)
//
// Before that, a version 2 slave whose newest entry's epoch is above the
// master's epoch (ServerOptions.Epoch, or the master's newest entry if
// higher) is refused with RefuseNotMaster: a newer master exists.
//
// A slave told TRUNCATE cuts its log at fork only when the master's epoch
// is at least ClientOptions.MinEpoch and above the slave's newest entry,
// and the fork is below its end: ClientOptions.OnTruncate does it (the
// broker truncates its store crash-safely and drops its entries above the
// fork), then the client connects again at once and the prefix check now
// passes. Without OnTruncate a TRUNCATE stops the slave as a divergence
// does. A WELCOME whose epoch is below MinEpoch is refused by the slave
// ("master epoch X below Y") and retried with backoff. A version 1 slave
// is served exactly as before (no entries, never TRUNCATE), and so is
// every slave of a master without ServerOptions.Epochs. A version 2 slave
// of a version 1 master is refused (RefuseMismatch): brokers that may
// meet older masters leave ClientOptions.Epochs nil.
//
// A slave that took its master's entries before catching up holds entries
// that start beyond its own end; ForkPoint allows for them. A replica that
// becomes master must drop such entries (those starting above its end)
// before it appends its own, or its entries are out of order. Entries
// describe the log as of the last handshake: a master whose epoch changes
// drops its slaves (DropSlaves) so that they take the new entries.
//
// # In-sync slaves and the sync state set
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
// Under a controller the set of slaves a write waits for is the sync state
// set, decided elsewhere: WaitReplicatedBy waits until every listed slave
// has a connected session that acked an offset, asks for the list again
// at every wake-up (an ack, a disconnection, Server.Wake), and fails only
// with ErrSlaveTimeout, ErrClosed or the context's error. AckedBy is the
// lowest offset the listed slaves acked (-1 when one is not connected),
// the confirm offset of the set.
//
// Client.Reconnect drops the current connection, or cuts a backoff wait
// short, resets the backoff and connects again at once: a slave told to
// follow a new master re-attaches within a round trip.
//
// # Frames
//
// Every frame starts with a one-byte kind. All integers are big-endian;
// strings are UTF-8 with a 2-byte length.
//
//	HELLO 'H' (0x48), slave → master, 41 + n bytes (version 1),
//	                  43 + n + 16·k bytes (version 2)
//	  0  1  kind
//	  1  4  magic 0x424C4841 ("BLHA")
//	  5  2  protocol version (1 or 2)
//	  7  8  slave broker id (its replica id under a controller)
//	 15  8  slave's maximum CommitLog offset
//	 23  8  start offset of the slave's last record (-1: none)
//	 31  4  size of that record (0: none)
//	 35  4  its stored record checksum (the trailer's value)
//	 39  2  n = length of the broker name
//	 41  n  broker name (must equal the master's)
//	  version 2 only:
//	 41+n        2  k = number of epoch entries (at most MaxEpochEntries)
//	 43+n+16·i   8  entry i's epoch   (i = 0 .. k-1, oldest first; epochs
//	 51+n+16·i   8  entry i's start    strictly increasing, starts not
//	                                   decreasing, none negative)
//
//	WELCOME 'W' (0x57), master → slave, 49 + n bytes (version 1),
//	                    51 + n + 16·k bytes (version 2)
//	  0  1  kind
//	  1  4  magic 0x424C4841
//	  5  2  protocol version (the HELLO's)
//	  7  8  start: the offset the first DATA frame starts at
//	 15  8  master's minimum CommitLog offset
//	 23  8  master's committed CommitLog offset
//	 31  8  master's segment size (must equal the slave's)
//	 39  8  master's epoch
//	 47  2  n = length of the master's client address
//	 49  n  master's client (gRPC) address, for metadata sync
//	  version 2 only:
//	 49+n        2  k = number of the master's epoch entries (0: none)
//	 51+n+16·i   8  entry i's epoch
//	 59+n+16·i   8  entry i's start
//
//	TRUNCATE 'T' (0x54), master → slave (version 2), 17 bytes; the master
//	then closes
//	  0  1  kind
//	  1  8  fork: the offset to cut the slave's log at (below its end)
//	  9  8  master's epoch
//
//	AUTH 'U' (0x55), slave → master, before HELLO, 9 + a + d bytes
//	  0  1  kind
//	  1  4  magic 0x424C4841
//	  5  2  a = length of the authorization
//	  7  a  authorization ("MQv2-HMAC-SHA1 Credential=..., Signature=...")
//	7+a  2  d = length of the date
//	9+a  d  date (x-mq-date-time: "20261202T031500Z", UTC)
//
//	REFUSE 'R' (0x52), master → slave, 5 + n bytes; the master then closes
//	  0  1  kind
//	  1  2  code (RefuseDiverged 1, RefuseTooOld 2, RefuseMismatch 3,
//	        RefuseNotMaster 4, RefuseBadHello 5, RefuseInternal 6,
//	        RefuseUnauthenticated 7)
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
