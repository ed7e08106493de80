// Package dedup is the broker's deduplication window: it remembers, for a
// few minutes, where each message stored with a producer-supplied unique id
// (property UNIQ_KEY) went, so that a producer's retry of a message the
// broker already stored — the answer was lost, or came after the
// producer's timeout — is answered with the first copy's result and not
// stored again. NATS JetStream drops republished message ids the same way
// (its duplicate window, two minutes by default); Kafka's idempotent
// producer does it with producer ids and sequence numbers.
//
// The window is memory only, and bounded: a hash table from a 64-bit hash
// of (topic, unique id) to the stored copy's CommitLog offset (table.go:
// open addressing over one flat array, so that a lookup costs one cache
// miss, not the several of a Go map this size), and a ring of the same
// keys in the order they were stored with the time each leaves the window.
// About 48 bytes an entry: a million ids take about 48 MB. When the ring
// is full the oldest entry is dropped early (counted): above a million
// sends per window length the window is as long as the newest million
// sends, and bolide_dedup_evicted_total says so. The messages of one send
// are looked up and recorded together (LookupAll, CommitAll): one hold of
// the lock and one reading of the clock per send, not two per message.
//
// A hit is a candidate: the broker reads the record at the offset and
// checks its topic and unique id, so a hash collision never drops a
// message. A miss is final only when the window has watched the log for a
// whole window length (Stats.Complete); until then — after a restart,
// after a promotion — the broker also looks the id up in its IndexFile,
// which is rebuilt from the CommitLog and so survives restarts and
// failovers, and which every replica builds for itself.
//
// Concurrent sends of one id are serialised by a reservation: the second
// waits for the first and is answered with its result (or, if the first
// failed, stores the message itself).
package dedup
