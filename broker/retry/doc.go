// Package retry is Bolide's consumer retries and dead-letter queues, as
// RocketMQ's CONSUMER_SEND_MSG_BACK, with the dead-letter listing and the
// replay marks of the DLQ tools.
//
// # Retries and dead letters
//
//   - A consumer that fails a message sends it back (SendBack) with the
//     message's CommitLog offset on this broker. The broker reads the
//     message from its own log and stores a copy in %RETRY%<group> (one
//     queue) with the reconsume count + 1 and property DELAY = 3 + the count
//     (or the level the consumer asked for), so the copy waits in
//     SCHEDULE_TOPIC_XXXX first (the host stores it as any send, delay
//     rewriting included).
//   - When the count has reached the maximum (the consumer's, else the
//     group's setting, else 16), or the consumer asks for a negative level,
//     the copy goes to %DLQ%<group> (one queue, readable and writable)
//     instead, with DLQ_ORIGIN_TOPIC and DLQ_ORIGIN_MESSAGE_ID set.
//   - Every copy keeps the body, flag and properties: RETRY_TOPIC holds the
//     original topic, ORIGIN_MESSAGE_ID the id of the first delivery,
//     FIRST_FAILURE_MS and LAST_FAILURE_MS when the message failed first and
//     last, FAILURE_REASON the consumer's last reason.
//   - The retry topic of a clustering group is created when a consumer of
//     the group first heartbeats to a master (EnsureRetryTopics), so its
//     push consumers find a route for it at once; both topics are also
//     created on first use.
//
// # Dead-letter listing and replay marks
//
// A replayed dead letter is marked so that replaying the whole queue again
// skips it. The mark is a small JSON record appended to the CommitLog in
// queue 0 of ReplayMarkTopic, a topic kept out of the topic table (it is not
// routed, listed or pullable). Being a log record, a mark is flushed and
// replicated to slaves like any message, so a promoted slave knows it. The
// broker keeps the marks in memory, keyed by the dead letter's CommitLog
// offset (never reused, unlike a queue offset after the DLQ topic is
// deleted and created again), and catches up with the marker queue on
// every access, so marks that reached a slave by replication are seen too.
// A mark is always newer than its dead letter, so retention never deletes
// a mark while its dead letter is kept.
//
// The broker reaches the feature through a Service; the Service reaches the
// broker through the Host it is given. Errors carry errcode codes.
package retry
