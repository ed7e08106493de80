package broker

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Transactional messages, after RocketMQ (reference rocketmq.md §4):
//
//   - A producer sends a half message: property TRAN_MSG=true, PGROUP=<its
//     group>, sysflag PREPARED. Send rewrites it (rewriteTransactional) into a
//     plain message of RMQ_SYS_TRANS_HALF_TOPIC queue 0 with properties
//     REAL_TOPIC, REAL_QID and __transactionId__ (= UNIQ_KEY). It is dispatched
//     like any message, to a queue nobody may pull (Pull refuses system
//     topics), so consumers never see it.
//   - EndTransaction validates the request against the stored half message
//     and, for a commit, writes the real message (real topic and queue,
//     properties minus REAL_* and TRAN_MSG, sysflag COMMIT). Commit and
//     rollback both append an op record to RMQ_SYS_TRANS_OP_HALF_TOPIC queue
//     0: tag "d", body = the half-queue offsets of every copy of the half
//     message ("12,40,"), plus properties naming the transaction and its
//     outcome. The real message and the op record go in one CommitLog append
//     and one flush wait.
//   - The transaction service (transaction_service.go) tails the half queue,
//     keeps the transactions without an outcome in memory, and checks back
//     the ones older than the timeout: it re-appends the half message with
//     TRANSACTION_CHECK_TIMES+1 (as RocketMQ does, so the count is persisted)
//     and pushes a TransactionCheck over the Connect stream of a live producer
//     of the group. After CheckMax checks the half message is discarded into
//     TRANS_CHECK_MAX_TIME_TOPIC (with an op record saying so).
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
//   - The service runs while the broker is a master (Broker.IsMaster) and
//     follows role changes: a promoted slave loads the state from its
//     replicated half and op queues; a slave or fenced master refuses ends
//     with NOT_MASTER.

// Names the transaction service uses.
const (
	// TransactionGroup is the internal consumer group whose offsets in the
	// half and op queues are the transaction service's progress.
	TransactionGroup = "CID_RMQ_SYS_TRANS"
	// opTag tags op records ("d" as in RocketMQ: delete the half message).
	opTag = "d"
	// PropertyTransactionOutcome is set on op records: COMMIT, ROLLBACK or
	// DISCARD (a Bolide addition; RocketMQ's op records carry only the
	// offsets, which Bolide writes too).
	PropertyTransactionOutcome = "TRAN_OUTCOME"
	// PropertyDiscardTime is set on the copy written to
	// TRANS_CHECK_MAX_TIME_TOPIC: when it was discarded (ms).
	PropertyDiscardTime = "TRAN_DISCARD_TIME"
)

// TransactionOptions configure transactional messages.
type TransactionOptions struct {
	// Timeout is how long a half message may wait for its outcome before
	// it is first checked back (6 s). A message's
	// CHECK_IMMUNITY_TIME_IN_SECONDS property, when longer, replaces it.
	Timeout time.Duration
	// CheckInterval is the time between two checks of a half message that
	// is still without an outcome (30 s).
	CheckInterval time.Duration
	// CheckMax is how many checks a half message gets; at the next due
	// check it is discarded into TRANS_CHECK_MAX_TIME_TOPIC (15).
	CheckMax int
}

func defaultTransactionOptions() TransactionOptions {
	return TransactionOptions{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 15}
}

func (o *TransactionOptions) validate() error {
	var errs []error
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("broker: transaction timeout %v must be positive", o.Timeout))
	}
	if o.CheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("broker: transaction check interval %v must be positive", o.CheckInterval))
	}
	if o.CheckMax < 0 || o.CheckMax > 10000 {
		errs = append(errs, fmt.Errorf("broker: transaction check max %d not in 0..10000", o.CheckMax))
	}
	return errors.Join(errs...)
}

// isHalfMessage reports whether a producer sent m as a transactional half
// message.
func isHalfMessage(m *message.Ext) bool {
	return message.TransactionType(m.SysFlag) == message.SysFlagTransPrepared ||
		m.Properties[message.PropertyTransactionPrepared] == "true"
}

// delayProperties are the properties that ask for delayed delivery; a half
// message must not carry them (RocketMQ's client clears DELAY on
// transactional sends; Bolide refuses instead of dropping it silently).
var delayProperties = []string{message.PropertyDelayLevel, message.PropertyTimerDeliverMS,
	message.PropertyTimerDelaySec, message.PropertyTimerDelayMS}

// rewriteTransactional turns half messages into their stored form: a plain
// message of the half topic, queue 0, that remembers its real topic and
// queue. Messages that are not transactional pass unchanged; a sysflag of
// COMMIT or ROLLBACK from a producer is refused (outcomes go through
// EndTransaction).
func (b *Broker) rewriteTransactional(msgs []*message.Ext) error {
	for _, m := range msgs {
		switch message.TransactionType(m.SysFlag) {
		case message.SysFlagTransCommit, message.SysFlagTransRollback:
			return wire.Errorf(pb.Code_MESSAGE_ILLEGAL, "a producer sends transactional messages as half (PREPARED) messages; commit and rollback go through EndTransaction")
		}
		if !isHalfMessage(m) {
			continue
		}
		if len(msgs) > 1 {
			return wire.Errorf(pb.Code_MESSAGE_ILLEGAL, "transactional messages cannot be sent in a batch")
		}
		group := m.Properties[message.PropertyProducerGroup]
		if err := message.ValidateGroup(group); err != nil {
			return wire.Errorf(pb.Code_MESSAGE_ILLEGAL, "a transactional message needs its producer group in property %s: %v", message.PropertyProducerGroup, err)
		}
		id := m.Properties[message.PropertyUniqueKey]
		if id == "" || strings.ContainsAny(id, " \t\r\n") {
			return wire.Errorf(pb.Code_MESSAGE_ILLEGAL, "a transactional message needs a unique id (property %s) without spaces, got %q", message.PropertyUniqueKey, id)
		}
		for _, k := range delayProperties {
			if v := m.Properties[k]; v != "" && v != "0" {
				return wire.Errorf(pb.Code_MESSAGE_ILLEGAL, "a transactional message cannot be delayed (property %s)", k)
			}
		}
		props := make(map[string]string, len(m.Properties)+4)
		for k, v := range m.Properties {
			props[k] = v
		}
		delete(props, message.PropertyTransactionCheckTimes)
		props[message.PropertyTransactionPrepared] = "true"
		props[message.PropertyTransactionID] = id
		m.Properties = props
		message.Reroute(m, message.TransHalfTopic, 0)
		m.SysFlag -= message.TransactionType(m.SysFlag) // NOT_TYPE: dispatched to the half queue
	}
	return nil
}

// startTransactions starts the transaction service (on a master; a slave
// only replicates the half and op queues).
func (b *Broker) startTransactions() error {
	return b.txn.start()
}

// stopTransactions stops the check service and records its progress in the
// consumer offset table (persisted by Close).
func (b *Broker) stopTransactions() error {
	b.txn.stop()
	return nil
}

// producersOf returns the connected clients that said (in their last
// heartbeat) they are producers of group, sorted by client id.
func (r *consumerRegistry) producersOf(group string) []*clientConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*clientConn
	for c := range r.clients {
		if c.producer[group] {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id }) // c.id changes under r.mu
	return out
}
