package txn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// Names the transaction service uses.
const (
	// Group is the internal consumer group whose offsets in the half and
	// op queues are the transaction service's progress.
	Group = "CID_RMQ_SYS_TRANS"
	// opTag tags op records ("d" as in RocketMQ: delete the half message).
	opTag = "d"
	// PropertyOutcome is set on op records: COMMIT, ROLLBACK or DISCARD (a
	// Bolide addition; RocketMQ's op records carry only the offsets, which
	// Bolide writes too).
	PropertyOutcome = "TRAN_OUTCOME"
	// PropertyDiscardTime is set on the copy written to
	// TRANS_CHECK_MAX_TIME_TOPIC: when it was discarded (ms).
	PropertyDiscardTime = "TRAN_DISCARD_TIME"
)

// Options configure transactional messages.
type Options struct {
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

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 15}
}

// Validate checks the options.
func (o *Options) Validate() error {
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

// Host is what the transaction service needs from the broker. Topics are
// system topics of one queue (0): the half, op and discard topics; errors
// carry errcode codes.
type Host interface {
	// ReadMessage decodes the stored message at a CommitLog offset.
	ReadMessage(phys int64) (*message.Ext, error)
	// ReadRecord returns a copy of the stored record at a CommitLog offset.
	ReadRecord(phys int64) ([]byte, error)
	// GetMessages reads up to max records of topic's queue from offset.
	GetMessages(topic string, offset int64, max int) (store.GetResult, error)
	// QueueOffsets returns the min and max offsets of topic's queue.
	QueueOffsets(topic string) (minOff, maxOff int64)
	// QueryByKey finds messages of a topic (any topic) by key or unique
	// id, stored between begin and end (ms), newest first, at most max.
	QueryByKey(topic, key string, begin, end int64, max int) ([]*message.Ext, error)
	// WaitDispatched returns once everything already in the CommitLog is
	// in the queues.
	WaitDispatched(ctx context.Context) error
	// ConsumeOffset is Group's consume offset of topic's queue (-1 when
	// none was committed); CommitOffset records a new one.
	ConsumeOffset(topic string) int64
	CommitOffset(topic string, offset int64)
	// HalfArrival returns a channel closed when the half queue grows
	// (taken before a read, so no arrival is missed).
	HalfArrival() <-chan struct{}

	// Records are stored as an acknowledged send is: Writable and InSync
	// before, Append, then WaitReplicated.

	// Writable refuses (NOT_MASTER) when the broker does not take writes.
	Writable() error
	// InSync refuses when too few slaves are in sync to acknowledge.
	InSync() error
	// Append stores records under one CommitLog append and flush wait.
	Append(ctx context.Context, msgs []*message.Ext) ([]store.PutResult, error)
	// WaitReplicated returns once stored records are replicated as the
	// replication mode requires.
	WaitReplicated(ctx context.Context, res []store.PutResult) error

	// SyncRole applies the broker's role now (the role gate's Sync: a
	// request right after a promotion) and reports whether the master-only
	// services, this one among them, lead.
	SyncRole() bool
	// PushCheck hands a check to a live producer of group, waiting briefly
	// (until ctx ends at most) when every one is busy. It reports whether
	// one took it.
	PushCheck(ctx context.Context, group string, c Check) bool
}

// Check asks a producer how a transaction ended.
type Check struct {
	Group, Topic string
	QueueID      int32
	// CommitLogOffset and HalfQueueOffset locate the half message's newest
	// copy (RocketMQ's commitLogOffset and tranStateTableOffset).
	CommitLogOffset, HalfQueueOffset int64
	UniqueID, TransactionID          string
	OffsetMsgID                      string
	CheckTimes                       int32
	// Record is the stored record of that copy.
	Record []byte
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

// Rewrite turns half messages into their stored form: a plain message of
// the half topic, queue 0, that remembers its real topic and queue.
// Messages that are not transactional pass unchanged; a sysflag of COMMIT
// or ROLLBACK from a producer is refused (outcomes go through End).
func Rewrite(msgs []*message.Ext) error {
	for _, m := range msgs {
		switch message.TransactionType(m.SysFlag) {
		case message.SysFlagTransCommit, message.SysFlagTransRollback:
			return errcode.Errorf(errcode.MessageIllegal, "a producer sends transactional messages as half (PREPARED) messages; commit and rollback go through EndTransaction")
		}
		if !isHalfMessage(m) {
			continue
		}
		if len(msgs) > 1 {
			return errcode.Errorf(errcode.MessageIllegal, "transactional messages cannot be sent in a batch")
		}
		group := m.Properties[message.PropertyProducerGroup]
		if err := message.ValidateGroup(group); err != nil {
			return errcode.Errorf(errcode.MessageIllegal, "a transactional message needs its producer group in property %s: %v", message.PropertyProducerGroup, err)
		}
		id := m.Properties[message.PropertyUniqueKey]
		if id == "" || strings.ContainsAny(id, " \t\r\n") {
			return errcode.Errorf(errcode.MessageIllegal, "a transactional message needs a unique id (property %s) without spaces, got %q", message.PropertyUniqueKey, id)
		}
		for _, k := range delayProperties {
			if v := m.Properties[k]; v != "" && v != "0" {
				return errcode.Errorf(errcode.MessageIllegal, "a transactional message cannot be delayed (property %s)", k)
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
