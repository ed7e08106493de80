package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
)

func newTxnCmd(a *app) *cobra.Command {
	return groupCmd("txn", "Inspect transactional messages; commit or roll back one a producer left undecided",
		"  bolide txn list\n  bolide txn pending --group order-producers\n  bolide txn stats\n  bolide txn commit --broker broker-a --offset 40213",
		newTxnListCmd(a),
		newTxnPendingCmd(a),
		newTxnStatsCmd(a),
		newTxnResolveCmd(a, true),
		newTxnResolveCmd(a, false),
	)
}

// discardedJSON is one discarded half message of txn list.
type discardedJSON struct {
	Broker        string            `json:"broker"`
	Offset        int64             `json:"offset"`
	Topic         string            `json:"topic"`
	QueueID       int32             `json:"queueId"`
	Group         string            `json:"group"`
	TransactionID string            `json:"transactionId"`
	CheckTimes    int32             `json:"checkTimes"`
	BornTimestamp string            `json:"bornTimestamp"`
	DiscardedAt   string            `json:"discardedAt"`
	Tags          string            `json:"tags"`
	Keys          []string          `json:"keys"`
	Properties    map[string]string `json:"properties"`
	Body          string            `json:"body"`
}

func newTxnListCmd(a *app) *cobra.Command {
	var q client.TransactionQuery
	c := &cobra.Command{
		Use:   "list",
		Short: "List half messages discarded after the maximum number of check-backs",
		Long: `List the half messages brokers discarded because no producer of their group decided them
within the maximum number of check-backs (they sit in TRANS_CHECK_MAX_TIME_TOPIC).`,
		Example: "  bolide txn list\n  bolide txn list --group order-producers --topic orders -o json",
		Args:    exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			list, err := adm.DiscardedTransactions(ctx, q)
			if err != nil {
				return err
			}
			t := newTable("BROKER", "OFFSET", "TOPIC", "QUEUE", "GROUP", "TRANSACTION ID", "CHECKS", "BORN", "DISCARDED", "KEYS", "TAG")
			for _, d := range list {
				j := discardedJSON{Broker: d.BrokerName, Offset: d.Offset, Topic: d.Queue.Topic, QueueID: d.Queue.QueueID,
					Group: d.Group, TransactionID: d.TransactionID, CheckTimes: d.CheckTimes,
					BornTimestamp: formatTime(d.BornTime), DiscardedAt: formatTime(d.DiscardedAt), Keys: []string{},
					Properties: map[string]string{}}
				if m := d.Message; m != nil {
					j.Tags, j.Body = m.Tag, string(m.Body)
					if m.Keys != nil {
						j.Keys = m.Keys
					}
					if m.Properties != nil {
						j.Properties = m.Properties
					}
				}
				if a.json() {
					if err := a.emit(j); err != nil {
						return err
					}
					continue
				}
				t.row(j.Broker, j.Offset, j.Topic, j.QueueID, j.Group, j.TransactionID, j.CheckTimes,
					j.BornTimestamp, j.DiscardedAt, joinOrDash(j.Keys, ","), cell(j.Tags))
			}
			if a.json() {
				return nil
			}
			return t.write(a.stdout)
		},
	}
	txnQueryFlags(c, &q)
	return c
}

// pendingJSON is one pending transaction of txn pending.
type pendingJSON struct {
	Broker string `json:"broker"`
	// Offset is the half message's CommitLog offset: what txn commit and
	// txn rollback take.
	Offset          int64  `json:"offset"`
	HalfQueueOffset int64  `json:"halfQueueOffset"`
	Topic           string `json:"topic"`
	QueueID         int32  `json:"queueId"`
	Group           string `json:"group"`
	TransactionID   string `json:"transactionId"`
	CheckTimes      int32  `json:"checkTimes"`
	BornTimestamp   string `json:"bornTimestamp"`
	NextCheck       string `json:"nextCheck"`
}

func newTxnPendingCmd(a *app) *cobra.Command {
	var q client.TransactionQuery
	c := &cobra.Command{
		Use:   "pending",
		Short: "List half messages whose transaction has no outcome yet",
		Long: `List the half messages that wait for their producer's outcome (commit or rollback), oldest
first on each master: the broker checks them back with a producer of their group until one
decides or the maximum number of checks discards them (see txn list). OFFSET is the half
message's CommitLog offset: give it with --broker to 'bolide txn commit' or 'bolide txn rollback'
to decide for the producer.`,
		Example: "  bolide txn pending\n  bolide txn pending --group order-producers --topic orders -o json",
		Args:    exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			list, err := adm.PendingTransactions(ctx, q)
			if err != nil {
				return err
			}
			t := newTable("BROKER", "OFFSET", "TOPIC", "QUEUE", "GROUP", "TRANSACTION ID", "CHECKS", "BORN", "NEXT CHECK")
			for _, p := range list {
				j := pendingJSON{Broker: p.BrokerName, Offset: p.CommitLogOffset, HalfQueueOffset: p.HalfQueueOffset,
					Topic: p.Queue.Topic, QueueID: p.Queue.QueueID, Group: p.Group, TransactionID: p.TransactionID,
					CheckTimes: p.CheckTimes, BornTimestamp: jsonTime(p.BornTime), NextCheck: jsonTime(p.NextCheck)}
				if a.json() {
					if err := a.emit(j); err != nil {
						return err
					}
					continue
				}
				t.row(j.Broker, j.Offset, j.Topic, j.QueueID, j.Group, j.TransactionID, j.CheckTimes, p.BornTime, p.NextCheck)
			}
			if a.json() {
				return nil
			}
			return t.write(a.stdout)
		},
	}
	txnQueryFlags(c, &q)
	return c
}

// resolvedJSON is what txn commit and txn rollback print.
type resolvedJSON struct {
	Broker        string `json:"broker"`
	Offset        int64  `json:"offset"`
	Topic         string `json:"topic"`
	Group         string `json:"group"`
	TransactionID string `json:"transactionId"`
	Outcome       string `json:"outcome"` // commit or rollback
}

func newTxnResolveCmd(a *app, commit bool) *cobra.Command {
	var (
		brokerName string
		offset     int64
	)
	verb, outcome, done := "rollback", "rollback", "rolled back"
	if commit {
		verb, outcome, done = "commit", "commit", "committed"
	}
	c := &cobra.Command{
		Use: verb + " --broker BROKER --offset OFFSET",
		Short: map[bool]string{true: "Commit a pending transaction for its producer: its message goes to its topic",
			false: "Roll back a pending transaction for its producer: its message is dropped"}[commit],
		Long: `Decide a transaction its producer left undecided, as the producer would (EndTransaction):
commit writes the message to its topic, rollback drops it. --broker and --offset name the half
message as 'bolide txn pending' prints it (BROKER and OFFSET, its CommitLog offset; an older
copy's offset works too). Deciding a transaction again the same way changes nothing and is no
error; deciding it the other way than it ended (or after the broker discarded it) fails with
TRANSACTION_STATE_CONFLICT; an offset that holds no half message with TRANSACTION_NOT_FOUND.`,
		Example: fmt.Sprintf("  bolide txn pending --group order-producers\n  bolide txn %s --broker broker-a --offset 40213", verb),
		Args:    exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if brokerName == "" || !cmd.Flags().Changed("offset") {
				return usageErrorf("--broker and --offset are required (see 'bolide txn pending')")
			}
			if offset < 0 {
				return usageErrorf("--offset must not be negative, not %d", offset)
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			t, err := adm.PendingTransactionAt(ctx, brokerName, offset)
			if errors.Is(err, client.ErrTransactionNotFound) {
				return fmt.Errorf("%w (see 'bolide txn pending')", err)
			}
			if err != nil {
				return err
			}
			if err := adm.ResolveTransaction(ctx, *t, commit); err != nil {
				var ce *errcode.Error
				if errors.Is(err, client.ErrTransactionConflict) && errors.As(err, &ce) {
					// The broker's own words say how it ended.
					return &shortError{msg: fmt.Sprintf("%s on %s (%s)", ce.Msg, brokerName, ce.Code), err: err}
				}
				return err
			}
			j := resolvedJSON{Broker: brokerName, Offset: offset, Topic: t.Queue.Topic, Group: t.Group,
				TransactionID: t.TransactionID, Outcome: outcome}
			if a.json() {
				return a.emit(j)
			}
			fmt.Fprintf(a.stdout, "%s transaction %s (topic %s, producer group %s, %s offset %d)\n", done, j.TransactionID,
				j.Topic, j.Group, j.Broker, j.Offset)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&brokerName, "broker", "", "the broker group holding the half message (BROKER of txn pending)")
	f.Int64Var(&offset, "offset", 0, "the half message's CommitLog offset (OFFSET of txn pending)")
	return c
}

// shortError is an error printed as msg that still matches what err
// matches (errors.Is): for a broker's answer whose chain repeats itself.
type shortError struct {
	msg string
	err error
}

func (e *shortError) Error() string { return e.msg }
func (e *shortError) Unwrap() error { return e.err }

// txnQueryFlags are the filters of txn list and txn pending.
func txnQueryFlags(c *cobra.Command, q *client.TransactionQuery) {
	f := c.Flags()
	f.StringSliceVar(&q.BrokerNames, "broker", nil, "only these broker groups (repeatable)")
	f.StringVar(&q.Group, "group", "", "only this producer group")
	f.StringVar(&q.Topic, "topic", "", "only this (real) topic")
	f.IntVar(&q.Max, "max", 1000, "at most this many entries per broker")
}

// txnStatsJSON is one master's line of txn stats.
type txnStatsJSON struct {
	Broker                string `json:"broker"`
	Addr                  string `json:"addr"`
	Pending               int64  `json:"pending"`
	OldestPendingAge      string `json:"oldestPendingAge"`
	HalfMessages          int64  `json:"halfMessages"`
	Checks                int64  `json:"checks"`
	ChecksSent            int64  `json:"checksSent"`
	ChecksWithoutProducer int64  `json:"checksWithoutProducer"`
	Commits               int64  `json:"commits"`
	Rollbacks             int64  `json:"rollbacks"`
	Discards              int64  `json:"discards"`
	DuplicateEnds         int64  `json:"duplicateEnds"`
	ConflictingEnds       int64  `json:"conflictingEnds"`
	UnknownAnswers        int64  `json:"unknownAnswers"`
	DiscardedTotal        int64  `json:"discardedTotal"`
}

func newTxnStatsCmd(a *app) *cobra.Command {
	var brokers []string
	c := &cobra.Command{
		Use:   "stats",
		Short: "Show each master's transaction figures: pending, checks, outcomes",
		Long: `Show, for every master (or --broker groups), its transactional figures: half messages
pending and the age of the oldest, check-backs made (sent to a producer, or with no producer of
the group connected), outcomes since the broker started (commits, rollbacks, discards after the
maximum number of checks, outcomes that came twice or contradicted an earlier one, answers
UNKNOWN) and the half messages discarded in total (what txn list shows).`,
		Example: "  bolide txn stats\n  bolide txn stats --broker broker-a -o json",
		Args:    exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			stats, err := adm.TransactionStats(ctx, brokers...)
			if err != nil {
				return err
			}
			t := newTable("BROKER", "PENDING", "OLDEST", "CHECKS", "NO PRODUCER", "COMMITS", "ROLLBACKS", "DISCARDS", "DUPLICATE", "CONFLICTING", "UNKNOWN")
			for _, s := range stats {
				j := txnStatsJSON{Broker: s.BrokerName, Addr: s.Addr, Pending: s.Pending, OldestPendingAge: s.OldestPendingAge.String(),
					HalfMessages: s.HalfMessages, Checks: s.Checks, ChecksSent: s.ChecksSent,
					ChecksWithoutProducer: s.ChecksWithoutProducer, Commits: s.Commits, Rollbacks: s.Rollbacks,
					Discards: s.Discards, DuplicateEnds: s.DuplicateEnds, ConflictingEnds: s.ConflictingEnds,
					UnknownAnswers: s.UnknownAnswers, DiscardedTotal: s.DiscardedTotal}
				if a.json() {
					if err := a.emit(j); err != nil {
						return err
					}
					continue
				}
				oldest := "-"
				if s.Pending > 0 {
					oldest = shortDuration(s.OldestPendingAge)
				}
				t.row(j.Broker, j.Pending, oldest, j.Checks, j.ChecksWithoutProducer, j.Commits, j.Rollbacks, j.Discards,
					j.DuplicateEnds, j.ConflictingEnds, j.UnknownAnswers)
			}
			if a.json() {
				return nil
			}
			return t.write(a.stdout)
		},
	}
	c.Flags().StringSliceVar(&brokers, "broker", nil, "only these broker groups (repeatable)")
	return c
}
