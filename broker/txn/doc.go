// Package txn is Bolide's transactional messages, after RocketMQ
// (reference rocketmq.md §4):
//
//   - A producer sends a half message: property TRAN_MSG=true, PGROUP=<its
//     group>, sysflag PREPARED. The broker's Send rewrites it (Rewrite) into
//     a plain message of RMQ_SYS_TRANS_HALF_TOPIC queue 0 with properties
//     REAL_TOPIC, REAL_QID and __transactionId__ (= UNIQ_KEY). It is
//     dispatched like any message, to a queue nobody may pull (Pull refuses
//     system topics), so consumers never see it.
//   - End validates the request against the stored half message and, for a
//     commit, writes the real message (real topic and queue, properties
//     minus REAL_* and TRAN_MSG, sysflag COMMIT). Commit and rollback both
//     append an op record to RMQ_SYS_TRANS_OP_HALF_TOPIC queue 0: tag "d",
//     body = the half-queue offsets of every copy of the half message
//     ("12,40,"), plus properties naming the transaction and its outcome.
//     The real message and the op record go in one CommitLog append and one
//     flush wait.
//   - The Service tails the half queue, keeps the transactions without an
//     outcome in memory, and checks back the ones older than the timeout: it
//     re-appends the half message with TRANSACTION_CHECK_TIMES+1 (as RocketMQ
//     does, so the count is persisted) and pushes a Check to a live producer
//     of the group (Host.PushCheck). After CheckMax checks the half message is
//     discarded into TRANS_CHECK_MAX_TIME_TOPIC (with an op record saying so).
//   - Restart: the consume offsets of the internal group CID_RMQ_SYS_TRANS in
//     the consumer offset table say where to resume: the half queue from the
//     oldest copy still pending, the op queue from the oldest op record that
//     may name it. Everything else (check counts, outcomes) is in the log.
//     Op records carry the transaction id in KEYS, so an outcome no longer
//     in memory is found through the IndexFile: a late repeat of an end is
//     answered correctly, and before its first check a transaction is
//     looked up (op record, committed message, discarded copy) so that a
//     torn append or a producer's late duplicate half message never leads
//     to a second commit.
//   - The Service runs while the broker is the master: it subscribes to the
//     broker's role gate (broker/rolegate), which calls Lead on becoming
//     master and cancels it on losing that. A promoted slave loads the state
//     from its replicated half and op queues; a slave or fenced master
//     refuses ends with NOT_MASTER.
//
// The package reaches the broker only through Host; it speaks domain types
// and errcode errors, no protocol.
package txn
