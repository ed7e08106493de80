// Package delay is Bolide's delayed delivery: the service a broker runs,
// the delay levels' offsets and clock, and the timer engine that delivers a
// message at any time up to the broker's maximum delay (400 days by
// default) through a durable timing wheel, after QMQ's delay server
// (reference delay.md §1 and §5.4).
//
// # On a broker
//
// The broker rewrites a send that asks for delayed delivery
// (BrokerOptions.Schedule, also on the retry path; BrokerOptions.TagCode
// gives the stored units their due time) and runs a Service over a
// BrokerHost, a small adapter over its store, topics and role. The
// Service delivers the delay levels (level_runner.go) and, through the
// Engine (timer_queue.go is its Host), the timer messages; it cancels
// timer messages (Service.Cancel) and keeps them alive across CommitLog
// retention (roll.go). Every broker runs it; it delivers only while the
// broker is the master: it subscribes to the broker's role gate
// (Service.Lead, package broker/rolegate). A slave keeps the timer index of
// its replicated timer queue and takes the master's progress by metadata
// sync (Service.Snapshot on the master, Service.Offer on the slave), so
// that once promoted it delivers what the master had not, never early,
// never what the master cancelled (see "Master and slaves").
//
// # Delay levels
//
// A message with property DELAY = n (1..18 by default, capped at the
// highest level) is stored by the broker in SCHEDULE_TOPIC_XXXX queue n−1
// (RocketMQ's layout) with REAL_TOPIC and REAL_QID; its ConsumeQueue tag
// code is its store time + the level's delay, in ms. The store time is the
// instant of the store truncated to the millisecond, so the message is due
// up to 1 ms after its tag code: it is due at tag code + 1 ms. One
// goroutine per level (level_runner.go) walks the queue from a persisted
// offset and stores due messages in their real topic, in order (copied
// and patched as timer messages are, below). The
// offsets are config/delayOffset.json:
//
//	{"offsetTable":{"1":1042,"2":0,...}}
//
// level (1-based, as a string) → next queue offset to deliver; written
// atomically (temp file, fsync, rename, fsync dir) every second and at
// close. After a crash, at most the last second of deliveries repeats.
//
// # Timer messages
//
// A message with TIMER_DELIVER_MS (absolute), TIMER_DELAY_MS or
// TIMER_DELAY_SEC is stored once, in the CommitLog, as a message of topic
// rmq_sys_wheel_timer queue 0 with REAL_TOPIC, REAL_QID and TIMER_OUT_MS
// (its due time, also its ConsumeQueue tag code; a delay counts from the
// broker's clock rounded up to the millisecond, so the due time is never
// before the send's instant + the delay). The send is acknowledged
// as any send is (flush mode, replication): durability comes from the
// CommitLog. A time in the past is delivered at once; one beyond the
// maximum delay is refused (ILLEGAL_DELIVERY_TIME), never clamped. The
// Engine then works in three stages:
//
//  1. Index. One goroutine tails the timer queue and appends a 32-byte
//     entry per message to a time bucket file. Every second the bucket
//     files are synced and the queue offset reached is checkpointed; after
//     a crash the queue is re-read from the checkpoint, so the index is
//     rebuilt from the ConsumeQueue and copies it leaves are folded
//     together when loaded.
//  2. Load. Buckets form a hierarchy of wheels on disk: level 0 spans 10 s,
//     level 1 10 min, level 2 one day. A message goes to the coarsest level
//     whose bucket is not yet due to be split; a level-1 bucket is split
//     into level-0 buckets 20 min before it starts, a level-2 bucket into
//     level-1 buckets a day before. Level-0 buckets starting within
//     LoadAhead (30 s) are loaded into memory: the in-memory wheel is these
//     10-second slots, each sorted by due time (Varghese & Lauck's scheme 5,
//     a hashed wheel with sorted slots), plus, per slot, for messages
//     indexed after it was loaded, a sorted run (those indexed in due-time
//     order, as messages sent with one delay are) and a heap (the others). Memory is bounded by the messages due in
//     the next ~40 s, not by how many are pending.
//  3. Fire. One goroutine takes due entries in (due time, CommitLog offset)
//     order, at most BatchSize at a time, reads their records back from the
//     CommitLog and copies each, patched, into a record of its real topic
//     (message.RestoreRecord: no decoding, no encoding; the batch in one
//     buffer), and hands the batch to the deliverer, which stores it in the
//     real topics (one append, store.Store.PutPrepared) and then appends the
//     entries' positions to the bucket's fired log. A crash between the two repeats at most
//     that batch. A level-0 bucket whose time is over, whose entries are
//     all fired or cancelled and which the checkpoint covers is deleted.
//
// Delivered messages keep their properties except DELAY, REAL_TOPIC,
// REAL_QID, TIMER_DELIVER_MS, TIMER_DELAY_MS, TIMER_DELAY_SEC and
// TIMER_ORIGIN; TIMER_OUT_MS tells the consumer when the message was due.
// A message is never stored in its topic before its due time: the engine
// fires an entry only when its clock reads at or after the due time.
//
// # Never early
//
// Wherever a due time comes from a millisecond timestamp of a finer clock,
// it is rounded up: a level's message is due 1 ms after its truncated
// store time + delay, a timer delay counts from the next millisecond, and
// the engine and the level runners fire when the clock reads at or after
// the due millisecond. A delivery may be up to 1 ms late, never early: a
// consumer that failed a message sees its retry no sooner than the level's
// delay after it failed.
//
// # Files (Options.Dir, <StoreDir>/timerwheel by default)
//
// All integers are big-endian.
//
//	L<level>-<start ms, 15 digits>.idx    bucket index file
//	L0-<start ms, 15 digits>.fired        fired log of a level-0 bucket
//	L<level>-<start>.<n>.split            a split bucket, deleted once the
//	                                      entries it gave away are synced
//	                                      (split again if found at start)
//	cancel.log                            cancellations
//	checkpoint.json                       how far the timer queue is indexed
//	inherited.json                        progress taken from a master
//
// A bucket index file is a sequence of 32-byte entries, appended:
//
//	0  8  due time, ms since the epoch
//	8  8  location: CommitLog offset of the stored message
//	16 8  origin: CommitLog offset of the message's first copy (= location
//	      unless the broker stored the message again); entries with the
//	      same origin are one message
//	24 4  size of the stored record
//	28 4  CRC-32C of bytes 0..28
//
// A torn last entry (not 32 bytes) is cut when the file is next opened; an
// entry that fails its CRC is skipped.
//
// A fired log is a sequence of 4-byte entry positions (index into the
// bucket file) of delivered entries, appended after each delivery batch is
// stored. When a bucket is loaded, an origin is delivered if any of its
// entries' positions is in the log.
//
// The cancel log is a sequence of 32-byte records, appended and fdatasync'ed
// before a cancel is acknowledged (concurrent cancels share the sync):
//
//	0  8  origin of the cancelled message
//	8  8  its due time, ms
//	16 8  its location
//	24 4  zero
//	28 4  CRC-32C of bytes 0..28
//
// Records failing the CRC are ignored (a torn record was never
// acknowledged). Cancellations whose bucket is reclaimed and which the
// checkpoint covers are forgotten, and the log is rewritten (atomically)
// when most of it is forgotten.
//
// checkpoint.json is {"version":1,"queueOffset":N,"location":L}: every
// message of the timer queue below offset N is in a synced bucket file; L
// is the CommitLog offset of the last one. It is written atomically after
// the bucket files and fired logs are synced.
//
// inherited.json is {"version":1,"progress":[{"location":L,"dueBeforeMs":W},...]}
// (see Progress), written atomically by Engine.Inherit.
//
// # Cancel
//
// The broker finds the stored copies of a message by its unique id (the
// IndexFile of the timer topic) and hands them to Engine.Cancel: a message
// pending anywhere (on disk, in the wheel, not yet indexed) is recorded in
// the cancel log, synced, and marked in the wheel before Cancel returns, so
// it is never delivered; one in flight or delivered is reported as such.
//
// The cancel log is local; slaves replicate the CommitLog. So the broker
// then stores, per cancelled copy, a cancel marker in the timer queue
// (PropertyTimerCancel = "<origin>:<location>", TIMER_OUT_MS = its due
// time, no body) and acknowledges the cancel only once the marker is
// stored as a send would be (flush mode; replication: in sync mode the
// in-sync slaves hold it). An engine that indexes a marker (Unit.Cancel)
// cancels the message as Cancel does, and syncs its cancel log before its
// checkpoint passes the marker; on the master that wrote it, it changes
// nothing. The roller never copies markers.
//
// # Master and slaves
//
// The engine runs on every broker. It delivers only while active
// (SetActive: the broker is the master); a standby engine indexes its
// broker's timer queue (a slave's is replicated, byte for byte and at the
// same CommitLog offsets) and loads and reclaims buckets, but delivers
// nothing. What it knows of the master's deliveries comes from the
// master's Progress, which a slave fetches every metadata sync interval
// (3 s) and applies (Inherit) once its own CommitLog is dispatched as far as
// the master's was when the Progress was read: a Progress {L, W} says that
// every message whose origin is ≤ L and that is due before W was delivered
// or cancelled, so the delivered copies are on the slave before it skips
// them. W is the earliest of the master's clock, its first pending entry
// per loaded bucket, the batches being delivered and the start of every
// bucket not loaded; L is the last unit indexed. A standby engine marks
// the due entries a Progress covers done (they are not delivered and their
// buckets are reclaimed), the others wait; Progress statements are kept
// (at most 8 that do not dominate one another), also once active.
//
// Promoted (SetActive(true)), the engine first indexes the timer queue to
// the end it had then (so every cancel marker the old master stored is
// applied), then delivers every indexed message that is neither covered
// nor cancelled, when due by its own clock, never before: so every timer
// message the old master acknowledged (and that reached the slave: with
// sync replication, all of them) and did not deliver is delivered, and none
// whose cancel it acknowledged.
//
// Duplicates. A message is delivered twice only if the old master
// delivered it and no Progress the slave applied covers it: it was
// delivered after the newest Progress the slave applied was read on the
// master (a window of about one metadata sync interval, 3 s by default,
// plus the slave's replication lag, before the master stopped), or before
// that while a message due earlier was still pending there (W stops at the
// earliest pending entry: a backlog of due messages, or the batches in
// flight, BatchSize each). So the bound is what the old master delivered in
// the last few seconds before it stopped, at its delivery rate. The delay
// levels have the same window: a level's offset moves, in queue order,
// past what it stored, so what a level stored after the offset the slave
// last applied is stored again. Both are at-least-once across a failover,
// as across a crash of a single broker; with the slave caught up on the
// master's progress, none is repeated.
//
// Cancels take the guarantee of a send: with sync replication a cancel the
// old master acknowledged is on the slave, as its marker; with async
// replication a cancel acknowledged in the replication lag before the
// master died may be lost, as a send acknowledged then may be.
//
// An engine that stands down (SetActive(false): a fenced master) stops
// taking due entries; the batch being stored completes and one that fails
// from then on goes back to pending.
//
// # Clock
//
// All timing goes through a Clock (Now, NewTimer); VirtualClock lets tests
// run 400 days in seconds. Timers fire at or after their time, never
// before.
package delay
