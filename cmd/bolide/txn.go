package main

import (
	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
)

func newTxnCmd(a *app) *cobra.Command {
	return groupCmd("txn", "Inspect transactional messages",
		"  bolide txn list\n  bolide txn list --group order-producers",
		newTxnListCmd(a),
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
	f := c.Flags()
	f.StringSliceVar(&q.BrokerNames, "broker", nil, "only these broker groups (repeatable)")
	f.StringVar(&q.Group, "group", "", "only this producer group")
	f.StringVar(&q.Topic, "topic", "", "only this (real) topic")
	f.IntVar(&q.Max, "max", 1000, "at most this many entries per broker")
	return c
}
