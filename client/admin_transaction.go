package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TransactionQuery selects transactions to list.
type TransactionQuery struct {
	// BrokerNames limits the listing to these broker groups (default:
	// every group the NameServers know).
	BrokerNames []string
	// Group and Topic filter by producer group and real topic ("" = any).
	Group, Topic string
	// Max bounds the entries returned per broker (default 1000).
	Max int
}

// DiscardedTransaction is a half message a broker discarded after the
// maximum number of checks (it sits in TRANS_CHECK_MAX_TIME_TOPIC).
type DiscardedTransaction struct {
	BrokerName string
	// Offset is the entry's offset in TRANS_CHECK_MAX_TIME_TOPIC.
	Offset        int64
	Queue         MessageQueue // the real topic and queue
	Group         string
	TransactionID string
	CheckTimes    int32
	BornTime      time.Time
	DiscardedAt   time.Time
	// Message is the discarded half message (Topic and QueueID are the
	// real ones).
	Message *MessageExt
}

// PendingTransaction is a half message without an outcome yet.
type PendingTransaction struct {
	BrokerName      string
	Queue           MessageQueue // the real topic and queue
	Group           string
	TransactionID   string
	CommitLogOffset int64 // of the newest copy of the half message
	HalfQueueOffset int64
	CheckTimes      int32
	BornTime        time.Time
	NextCheck       time.Time
}

// TransactionStats are a broker's transaction counters (since it started)
// and positions.
type TransactionStats struct {
	BrokerName, Addr      string
	Pending               int64
	OldestPendingAge      time.Duration
	HalfMessages          int64
	Checks, ChecksSent    int64
	ChecksWithoutProducer int64
	Commits, Rollbacks    int64
	Discards              int64
	DuplicateEnds         int64
	ConflictingEnds       int64
	UnknownAnswers        int64
	HalfConsumeOffset     int64
	HalfMaxOffset         int64
	OpConsumeOffset       int64
	OpMaxOffset           int64
	DiscardedTotal        int64
}

// txnMasters returns the masters to ask: name → address.
func (a *Admin) txnMasters(ctx context.Context, names []string) ([][2]string, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var bds []BrokerData
	if len(names) > 0 {
		bds, err = ci.targets("", names)
		if err != nil {
			return nil, err
		}
	} else {
		bds = ci.allBrokers()
	}
	var out [][2]string
	for _, bd := range bds {
		if addr := bd.MasterAddr(); addr != "" {
			out = append(out, [2]string{bd.BrokerName, addr})
		}
	}
	if len(out) == 0 {
		return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "no master broker registered")
	}
	return out, nil
}

func (a *Admin) txnClient(addr string) (pb.TransactionClient, error) {
	cc, err := a.b.pool.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewTransactionClient(cc), nil
}

// DiscardedTransactions lists the half messages discarded after the
// maximum number of checks, per broker oldest first (RPC
// Transaction.ListDiscarded on every master).
func (a *Admin) DiscardedTransactions(ctx context.Context, q TransactionQuery) ([]DiscardedTransaction, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	limit := q.Max
	if limit <= 0 {
		limit = 1000
	}
	masters, err := a.txnMasters(ctx, q.BrokerNames)
	if err != nil {
		return nil, err
	}
	var out []DiscardedTransaction
	for _, m := range masters {
		name, addr := m[0], m[1]
		cli, err := a.txnClient(addr)
		if err != nil {
			return nil, err
		}
		n, offset := 0, int64(0)
		for n < limit {
			rctx, cancel := a.b.rpcContext(ctx)
			resp, err := cli.ListDiscarded(rctx, &pb.ListDiscardedRequest{Offset: offset, Max: int32(min(limit-n, 1024)),
				ProducerGroup: q.Group, Topic: q.Topic})
			cancel()
			if err == nil {
				err = fromStatus(resp.GetStatus())
			}
			if err != nil {
				return nil, fmt.Errorf("list discarded transactions on %s (%s): %w", name, addr, err)
			}
			for _, d := range resp.GetTransactions() {
				msg, err := extFromRecord(d.GetRecord(), name)
				if err != nil {
					return nil, err
				}
				msg.Topic, msg.QueueID = d.GetTopic(), d.GetQueueId()
				out = append(out, DiscardedTransaction{
					BrokerName: name, Offset: d.GetQueueOffset(),
					Queue: MessageQueue{Topic: d.GetTopic(), BrokerName: name, QueueID: d.GetQueueId()},
					Group: d.GetProducerGroup(), TransactionID: d.GetTransactionId(), CheckTimes: d.GetCheckTimes(),
					BornTime: time.UnixMilli(d.GetBornTimestampMs()), DiscardedAt: time.UnixMilli(d.GetDiscardedAtMs()),
					Message: msg,
				})
				n++
			}
			if resp.GetNextOffset() <= offset || resp.GetNextOffset() >= resp.GetMaxOffset() {
				break
			}
			offset = resp.GetNextOffset()
		}
	}
	return out, nil
}

// PendingTransactions lists the half messages without an outcome yet,
// per broker oldest first (RPC Transaction.ListPending on every master).
func (a *Admin) PendingTransactions(ctx context.Context, q TransactionQuery) ([]PendingTransaction, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	limit := q.Max
	if limit <= 0 {
		limit = 1000
	}
	masters, err := a.txnMasters(ctx, q.BrokerNames)
	if err != nil {
		return nil, err
	}
	var out []PendingTransaction
	for _, m := range masters {
		name, addr := m[0], m[1]
		cli, err := a.txnClient(addr)
		if err != nil {
			return nil, err
		}
		rctx, cancel := a.b.rpcContext(ctx)
		resp, err := cli.ListPending(rctx, &pb.ListPendingRequest{ProducerGroup: q.Group, Topic: q.Topic, Max: int32(min(limit, 10000))})
		cancel()
		if err == nil {
			err = fromStatus(resp.GetStatus())
		}
		if err != nil {
			return nil, fmt.Errorf("list pending transactions on %s (%s): %w", name, addr, err)
		}
		for _, p := range resp.GetTransactions() {
			out = append(out, PendingTransaction{
				BrokerName: name, Queue: MessageQueue{Topic: p.GetTopic(), BrokerName: name, QueueID: p.GetQueueId()},
				Group: p.GetProducerGroup(), TransactionID: p.GetTransactionId(), CommitLogOffset: p.GetCommitLogOffset(),
				HalfQueueOffset: p.GetTranStateTableOffset(), CheckTimes: p.GetCheckTimes(),
				BornTime: time.UnixMilli(p.GetBornTimestampMs()), NextCheck: time.UnixMilli(p.GetNextCheckMs()),
			})
		}
	}
	return out, nil
}

// TransactionStats returns the transaction counters of every master (or
// of the named broker groups), sorted by broker name.
func (a *Admin) TransactionStats(ctx context.Context, brokerNames ...string) ([]TransactionStats, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	masters, err := a.txnMasters(ctx, brokerNames)
	if err != nil {
		return nil, err
	}
	var out []TransactionStats
	for _, m := range masters {
		name, addr := m[0], m[1]
		cli, err := a.txnClient(addr)
		if err != nil {
			return nil, err
		}
		rctx, cancel := a.b.rpcContext(ctx)
		r, err := cli.Stats(rctx, &pb.TransactionStatsRequest{})
		cancel()
		if err == nil {
			err = fromStatus(r.GetStatus())
		}
		if err != nil {
			return nil, fmt.Errorf("transaction stats of %s (%s): %w", name, addr, err)
		}
		out = append(out, TransactionStats{
			BrokerName: name, Addr: addr, Pending: r.GetPending(),
			OldestPendingAge: time.Duration(r.GetOldestPendingAgeMs()) * time.Millisecond,
			HalfMessages:     r.GetHalfMessages(), Checks: r.GetChecks(), ChecksSent: r.GetChecksSent(),
			ChecksWithoutProducer: r.GetChecksWithoutProducer(), Commits: r.GetCommits(), Rollbacks: r.GetRollbacks(),
			Discards: r.GetDiscards(), DuplicateEnds: r.GetDuplicateEnds(), ConflictingEnds: r.GetConflictingEnds(),
			UnknownAnswers: r.GetUnknownAnswers(), HalfConsumeOffset: r.GetHalfConsumeOffset(), HalfMaxOffset: r.GetHalfMaxOffset(),
			OpConsumeOffset: r.GetOpConsumeOffset(), OpMaxOffset: r.GetOpMaxOffset(), DiscardedTotal: r.GetDiscardedTotal(),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BrokerName < out[j].BrokerName })
	return out, nil
}

// PendingTransactionAt returns the half message stored at commitLogOffset
// on the master of broker group brokerName (the offset `bolide txn
// pending` prints: any copy of the half message, as the broker's checks
// store it again, names it), ready for ResolveTransaction. An offset that
// holds no half message is TRANSACTION_NOT_FOUND. The transaction may
// have ended already: ResolveTransaction says so.
func (a *Admin) PendingTransactionAt(ctx context.Context, brokerName string, commitLogOffset int64) (*PendingTransaction, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if brokerName == "" {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "a pending transaction needs its broker name")
	}
	if commitLogOffset < 0 {
		return nil, codeErr(pb.Code_INVALID_PARAMETER, "CommitLog offset %d is negative", commitLogOffset)
	}
	masters, err := a.txnMasters(ctx, []string{brokerName})
	if err != nil {
		return nil, err
	}
	if len(masters) == 0 {
		return nil, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no master", brokerName)
	}
	addr := masters[0][1]
	var resp *pb.ViewMessageResponse
	err = a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		resp, err = c.ViewMessage(ctx, &pb.ViewMessageRequest{CommitLogOffset: commitLogOffset})
		return resp.GetStatus(), err
	})
	if errors.Is(err, ErrQueryNotFound) {
		return nil, codeErr(pb.Code_TRANSACTION_NOT_FOUND, "broker %s holds no message at CommitLog offset %d", brokerName, commitLogOffset)
	}
	if err != nil {
		return nil, fmt.Errorf("half message at %d on %s: %w", commitLogOffset, brokerName, err)
	}
	m, err := message.Decode(resp.GetRecord())
	if err != nil {
		return nil, fmt.Errorf("half message at %d on %s: %w", commitLogOffset, brokerName, err)
	}
	if m.Topic != message.TransHalfTopic {
		return nil, codeErr(pb.Code_TRANSACTION_NOT_FOUND, "the message at CommitLog offset %d on %s is not a half message (its topic is %s)",
			commitLogOffset, brokerName, m.Topic)
	}
	qid, _ := strconv.Atoi(m.Properties[message.PropertyRealQueueID])
	checks, _ := strconv.Atoi(m.Properties[message.PropertyTransactionCheckTimes])
	id := m.Properties[message.PropertyTransactionID]
	if id == "" {
		id = m.UniqueID()
	}
	return &PendingTransaction{
		BrokerName: brokerName, Queue: MessageQueue{Topic: m.Properties[message.PropertyRealTopic], BrokerName: brokerName, QueueID: int32(qid)},
		Group: m.Properties[message.PropertyProducerGroup], TransactionID: id, CommitLogOffset: m.PhysicalOffset,
		HalfQueueOffset: m.QueueOffset, CheckTimes: int32(checks), BornTime: time.UnixMilli(m.BornTimestamp),
	}, nil
}

// ResolveTransaction commits or rolls back a pending transaction as its
// producer would (RPC Transaction.EndTransaction on the master of
// t.BrokerName), for an operator who knows its outcome when no producer
// of its group answers the broker's checks. t is one of
// PendingTransactions or PendingTransactionAt. A transaction that already
// ended the same way is no error; one that ended the other way (or was
// discarded after the maximum number of checks) is
// ErrTransactionConflict; an unknown one ErrTransactionNotFound.
func (a *Admin) ResolveTransaction(ctx context.Context, t PendingTransaction, commit bool) error {
	if err := a.check(); err != nil {
		return err
	}
	if t.BrokerName == "" || t.Group == "" {
		return codeErr(pb.Code_INVALID_PARAMETER, "a pending transaction needs its broker name and producer group")
	}
	masters, err := a.txnMasters(ctx, []string{t.BrokerName})
	if err != nil {
		return err
	}
	if len(masters) == 0 {
		return codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no master", t.BrokerName)
	}
	addr := masters[0][1]
	cli, err := a.txnClient(addr)
	if err != nil {
		return err
	}
	state := pb.TransactionState_TRANSACTION_STATE_ROLLBACK
	if commit {
		state = pb.TransactionState_TRANSACTION_STATE_COMMIT
	}
	rctx, cancel := a.b.rpcContext(ctx)
	defer cancel()
	resp, err := cli.EndTransaction(rctx, &pb.EndTransactionRequest{
		ProducerGroup: t.Group, Topic: t.Queue.Topic, CommitLogOffset: t.CommitLogOffset,
		TranStateTableOffset: t.HalfQueueOffset, TransactionId: t.TransactionID, State: state,
	})
	if err != nil {
		err = brokerFailure(ctx, addr, err)
	} else {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return fmt.Errorf("end transaction %s on %s: %w", t.TransactionID, t.BrokerName, err)
	}
	return nil
}
