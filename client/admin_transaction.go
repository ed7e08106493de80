package client

import (
	"context"
	"fmt"
	"sort"
	"time"

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
