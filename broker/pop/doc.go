// Package pop is POP consumption in the broker core: the broker hands out
// messages with a receipt handle and keeps each invisible to its consumer
// group until it is acknowledged or its invisibility runs out, as RocketMQ
// 5 does (reference grpc_v5.md §6). Every front end uses it through the
// broker's Pop, PopAck, ChangeInvisible, PopNack, PopToDLQ, ReleaseClient
// and PopStats; docs/pop.md describes it for users. This comment is the
// reference for its rules and its three formats: the receipt handle, the
// POP log record and the snapshot.
//
// # State
//
// Per (group, topic, queue) the service keeps the next offset to hand out
// for the first time and the messages in flight below it: {offset,
// delivery attempt, visible-at time, handle sequence, first-pop time,
// invisible duration, auto-renewing client}. Every offset below next that
// is not in flight is done (acknowledged, dead-lettered, or skipped by the
// receive's tag filter: a group is expected to use one subscription per
// topic). The acknowledged low watermark is the smallest offset in flight,
// else next. Filters (a tag expression, matched on the tag code and then
// exactly on the record's tag, or an SQL92 condition: Request.ExpressionType)
// apply per receive. The watermark is committed to the consumer offset
// table every second, so
// lag, consume stats and remoting admin show POP progress. A queue first
// seen starts at the group's committed offset, else at the queue's min
// offset (RocketMQ's behaviour for a young queue).
//
// # Rules
//
//   - Non-FIFO group: a receive takes, per queue, the messages in flight
//     whose invisibility ran out (oldest first) and hands them out again
//     with attempt+1, then new messages from next. A queue's messages are
//     handed out concurrently to any number of receives.
//   - A message whose next delivery would exceed the group's maximum
//     delivery attempts (subgroup.Config.MaxDeliveryAttempts) goes to
//     %DLQ%<group> instead, through the retry service's dead-letter path
//     (body, flag, properties and ids kept, DLQ_ORIGIN_TOPIC and
//     DLQ_ORIGIN_MESSAGE_ID set), and is done. While it is written it is
//     held invisible under a new sequence.
//   - FIFO group (subgroup.Config.Fifo): a queue is blocked while any
//     message handed out from it is unacknowledged and invisible. A receive
//     with the attempt id of the blocked batch gets that batch again, same
//     handles (a client's retry after a lost answer). When the
//     invisibility runs out the same messages come again, in order, attempt
//     +1; new messages only once all are done. Nothing after a message
//     being dead-lettered is handed out before it is done.
//   - A handle is valid iff its message is in flight for that group with
//     the handle's sequence and its visibility has not run out. Each
//     delivery and each ChangeInvisible or Nack issues a new sequence; the
//     old handle is invalid from then on. Auto-renewal keeps the sequence,
//     so the original handle of an auto-renewed message stays valid.
//   - ChangeInvisible(d), d in [0, 12 h]: visible at now+d, auto-renewal
//     off. Nack: ChangeInvisible with the group's backoff for the attempt
//     (subgroup.Config.Backoff(attempt-1)).
//   - Auto-renewal (AutoRenew receives, v5 push consumers): while the
//     client is alive (not released, and connected to the broker — its
//     heartbeats keep a session — or receiving within the last 2 minutes;
//     a new master gives the clients in its state 2 minutes)
//     and for at most 3 hours, a message whose visibility ends within two
//     renewal periods (or a third of its invisible duration, up to 10 s) is
//     renewed to now + its invisible duration (at least four periods; the
//     renewal period is 1 s).
//     ReleaseClient makes a client's messages visible after 1 s.
//   - Long polling: a receive with nothing to hand out parks on the
//     topic's arrival signal (the store's dispatch, acks, changes) and on a
//     timer for the earliest visibility end among its queues, until its
//     poll time (capped by the broker's LongPollMax) ends.
//   - Sequences are 64-bit, strictly increasing, and never below the
//     clock in microseconds, so a sequence whose record was lost in a
//     crash is not issued again for another delivery.
//
// # Persistence and replication
//
// Every state change is a record in the POP log: queue 0 of the system
// topic rmq_sys_POP_LOG (message.PopLogTopic, outside the topic table,
// never routed or pulled), appended through the broker's put path as a
// send is (the in-sync check, the flush mode, the replication mode: an
// acknowledged ack is stored as an acknowledged send is). A receive that
// hands out messages answers only once its record is stored; so do ack,
// change, nack and dead-letter. The master applies a change to memory as
// it makes it and rolls it back if its append fails.
//
// A snapshot (config/popState.json in the broker's store directory; temp
// file, fsync, rename) is written every 5 s when the state changed and at
// Close. It holds the state and the POP log offset it covers: operations
// hold a shared lock from their first change to the end of their append,
// the snapshot an exclusive one, so the state it copies is exactly the log
// up to that offset (plus unlogged filter skips of next). On start the
// service loads the snapshot and applies the log records after it
// (everything, if there is none, it is unreadable, or it covers more of
// the log than the log holds after a crash cut the log's tail; from the
// log's min offset if retention removed older records).
//
// A slave receives the POP log with the CommitLog and applies its records
// as they are dispatched, with the same code the master uses (applyLocked),
// and writes snapshots of its own. When it becomes the master (the role
// gate's Lead) it waits for its dispatch, applies the rest of the log and
// serves: no acknowledged message is handed out again and no message in
// flight is lost; handles issued by the old master stay valid (the broker
// name of a group is shared). A slave refuses POP calls with NOT_MASTER.
//
// Record application is designed to be order-tolerant where the master's
// memory order and the log order of concurrent operations may differ: Pop
// records set their entries unconditionally; Ack, Change and Renew apply
// only to the sequence they name; DLQ records remove the offset.
//
// # Receipt handle (version 1)
//
// An ASCII token, fields separated by ':' (outside the name alphabet):
//
//	1:<broker>:<topic>:<queueId>:<offset>:<seq>:<visibleAtMs>:<check>
//
// queueId in decimal; offset, seq (≥ 1) and visibleAtMs (Unix ms, when the
// delivery was to become visible when the handle was issued) in lower-case
// base 36 without leading zeros; check is 8 upper-case hex digits of
// CRC-32C (Castagnoli) over the group name, a zero byte, and every byte of
// the token before the last ':'. A token that does not parse exactly so is
// malformed; one whose check fails belongs to another group (or was
// altered); one of another broker or topic is refused; all are
// INVALID_RECEIPT_HANDLE. Example:
//
//	1:broker-a:orders:3:21i3v9:hoomx1odaz:mx557zak:7F9F7A5E
//
// # POP log record (version 1)
//
// The body of one message in rmq_sys_POP_LOG (varint = encoding/binary
// signed varint, uvarint = unsigned; str = uvarint length + bytes, at most
// 255):
//
//	version u8 (1) | kind u8 | timeMs varint | group str | topic str | queueId uvarint
//	kind POP only: next varint | attemptId str | clientId str | invisibleMs uvarint
//	count uvarint (≤ 65536) | count entries
//
// A RESET record (kind 6) carries next (varint) after queueId and no
// entries. Entries by kind (1 POP, 2 ACK, 3 CHANGE, 4 RENEW, 5 DLQ):
//
//	POP    offset uvarint | seq uvarint | attempt uvarint | visibleAtMs varint
//	ACK    offset uvarint | seq uvarint
//	CHANGE offset uvarint | oldSeq uvarint | seq uvarint | visibleAtMs varint
//	RENEW  offset uvarint | seq uvarint | visibleAtMs varint
//	DLQ    offset uvarint | seq uvarint
//
// POP sets each entry in flight (attempt, seq, visible time, the record's
// time as first-pop time, its invisible duration, its client when it is
// auto-renewed) and raises next to the record's; ACK removes entries whose
// sequence matches; CHANGE replaces the sequence and visible time of
// entries whose sequence is oldSeq and turns auto-renewal off (releases
// are CHANGE records with seq = oldSeq); RENEW moves the visible time of
// entries whose sequence matches; DLQ removes the entries; RESET (an
// offset reset of the group) empties the queue's state and sets next.
// Trailing bytes
// are an error; an undecodable record is logged and skipped.
//
// # Snapshot (version 1)
//
// A JSON document:
//
//	{"version":1, "logOffset":<POP log queue offset covered>, "seq":<highest sequence>,
//	 "queues":[{"group","topic","queueId","next","attemptId","redelivered",
//	            "inFlight":[{"offset","attempt","seq","visibleAt","popTime","invisible","client"}]}],
//	 "crc":<CRC-32C of the document's JSON with crc 0>}
//
// A snapshot whose version or crc does not match is ignored (the whole
// POP log is applied instead).
//
// The package reaches the broker only through Host; it speaks domain types
// and errcode errors, no protocol.
package pop
