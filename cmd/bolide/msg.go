package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

func newMsgCmd(a *app) *cobra.Command {
	return groupCmd("msg", "Find messages: by id, by key, by time, at a queue offset; read a queue; trace retries",
		`  bolide msg get 7F00000100002A9F0000000000000000
  bolide msg query --topic orders --key order-42 --since 1h
  bolide msg at --topic orders --broker broker-a --queue 3 --offset 120
  bolide msg range --topic orders --broker broker-a --queue 3 --from 100 --count 20
  bolide msg search --topic orders --begin 1h --end 30m
  bolide msg trace 0A0000017B2A18B4AAC2641F1E2A0000 --topic orders`,
		newMsgGetCmd(a),
		newMsgQueryCmd(a),
		newMsgAtCmd(a),
		newMsgRangeCmd(a),
		newMsgSearchCmd(a),
		newMsgTraceCmd(a),
	)
}

// idKindJSON names how msg get matched an id in JSON.
func idKindJSON(k client.IDKind) string {
	switch k {
	case client.ByOffsetMsgID:
		return "offsetMsgId"
	case client.ByMsgID:
		return "msgId"
	}
	return ""
}

func newMsgGetCmd(a *app) *cobra.Command {
	var topic string
	c := &cobra.Command{
		Use:   "get ID",
		Short: "Show a message by id: its msg id (unique id) or its offset msg id (the output says which matched)",
		Long: `Show a message by id. ID may be the msg id (msgId: the producer's unique id, UNIQ_KEY,
what RocketMQ's clients call msgId) or the offset msg id (offsetMsgId: the store host and
CommitLog offset); send prints both. Both are 32 hex characters (an offset id 56 for an
IPv6 store host): an id that reads as an offset id is first asked of the broker it names;
otherwise, or if that broker does not have it, it is looked up as a msg id in every topic
(or only in --topic). "Matched by" (JSON: matchedBy, "msgId" or "offsetMsgId") says which
it was. A msg id can match more than one stored copy of a message a producer sent twice.`,
		Example: `  bolide msg get 0A0000017B2A18B4AAC2641F1E2A0000 --topic orders
  bolide msg get 7F00000100002A9F00000000000A1B2C -o json`,
		Args:              exactArgs(1, "an ID"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(_ *cobra.Command, args []string) error {
			id := args[0]
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			var opts []client.ViewOption
			if topic != "" {
				opts = append(opts, client.InTopic(topic))
			}
			res, err := adm.ViewMessage(ctx, id, opts...)
			if errors.Is(err, client.ErrQueryNotFound) {
				return fmt.Errorf("no message with id %s", id)
			}
			if host, _, perr := message.ParseOffsetMsgID(id); perr == nil && errors.Is(err, context.DeadlineExceeded) {
				// The SDK asks the host an offset id names first, and a
				// host that does not answer takes the whole --timeout.
				return fmt.Errorf("message %s: no answer within %v; read as an offset msg id it names the broker at %s", id, a.timeout, host)
			}
			if err != nil {
				if topic != "" {
					return forTopic(topic, err)
				}
				return err
			}
			for i, m := range res.Messages {
				if a.json() {
					j := toMessageJSON(m)
					j.MatchedBy = idKindJSON(res.MatchedBy)
					if err := a.emit(j); err != nil {
						return err
					}
					continue
				}
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				writeMessageDetail(a.stdout, m, res.MatchedBy.String())
			}
			return nil
		},
	}
	c.Flags().StringVarP(&topic, "topic", "t", "", "look a msg id (unique id) up in this topic only")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

func newMsgQueryCmd(a *app) *cobra.Command {
	var topic, key, since, begin, end string
	var max int
	c := &cobra.Command{
		Use:   "query --topic TOPIC --key KEY [--since D | --begin T --end T] [--max N]",
		Short: "Find the messages of a topic with a key, oldest first",
		Long: `Find the messages of a topic that have KEY among their keys (or as their msg id),
through the brokers' key indexes, oldest first. --since limits the search to recent
messages ("1h": stored in the last hour); --begin and --end give a time range. An empty
result is not an error.`,
		Example: `  bolide msg query --topic orders --key order-42
  bolide msg query --topic orders --key order-42 --since 2h --max 10
  bolide msg query --topic orders --key order-42 --begin 2026-01-02T00:00:00Z --end 2026-01-03T00:00:00Z -o json`,
		Args: exactArgs(0, ""),
	}
	c.RunE = func(*cobra.Command, []string) error {
		if topic == "" || key == "" {
			return usageErrorf("--topic and --key are required")
		}
		if err := message.ValidateTopic(topic); err != nil {
			return usageErrorf("--topic: %v", err)
		}
		if max < 1 {
			return usageErrorf("--max must be positive, not %d", max)
		}
		if since != "" && (begin != "" || end != "") {
			return usageErrorf("give --since or --begin/--end, not both")
		}
		now := time.Now()
		var from, to time.Time
		var err error
		if since != "" {
			if from, err = parseTime(since, now); err != nil {
				return usageErrorf("--since: %v", err)
			}
		}
		if begin != "" {
			if from, err = parseTime(begin, now); err != nil {
				return usageErrorf("--begin: %v", err)
			}
		}
		if end != "" {
			if to, err = parseTime(end, now); err != nil {
				return usageErrorf("--end: %v", err)
			}
		}
		if !from.IsZero() && !to.IsZero() && to.Before(from) {
			return usageErrorf("--end %s is before --begin %s", formatTime(to), formatTime(from))
		}
		adm, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx()
		defer cancel()
		msgs, err := adm.QueryMessageByKey(ctx, topic, key, from, to, max)
		if err != nil {
			return forTopic(topic, err)
		}
		if a.json() {
			return a.emitMessages(msgs)
		}
		if len(msgs) == 0 {
			a.info("no message of %s has the key %s", topic, key)
			return nil
		}
		t := newTable("MSGID", "BROKER", "QUEUE", "OFFSET", "STORED", "TAG", "KEYS", "BODY")
		for _, m := range msgs {
			t.row(m.MsgID, m.BrokerName, m.QueueID, m.QueueOffset, m.StoreTimestamp, m.Tag, joinOrDash(m.Keys, ","),
				displayBody(m.Body, 40))
		}
		return t.write(a.stdout)
	}
	fs := c.Flags()
	fs.StringVarP(&topic, "topic", "t", "", "topic to search (required)")
	fs.StringVarP(&key, "key", "k", "", "key to find (required)")
	fs.StringVar(&since, "since", "", `only messages stored since this time ("1h": in the last hour)`)
	fs.StringVar(&begin, "begin", "", "only messages stored at or after this time")
	fs.StringVar(&end, "end", "", "only messages stored before this time")
	fs.IntVar(&max, "max", 64, "at most this many messages")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

func newMsgAtCmd(a *app) *cobra.Command {
	var topic, broker string
	var queue int32
	var offset int64
	c := &cobra.Command{
		Use:   "at --topic TOPIC [--broker B] --queue Q --offset O",
		Short: "Show the message at an offset of a queue",
		Long: `Show the message stored at --offset of queue --queue of a topic. Queue ids are per broker
group: --broker names the group, and may be left out when the topic lives on one group.`,
		Example: `  bolide msg at --topic orders --queue 3 --offset 120 --broker broker-a
  bolide msg at --topic orders --queue 0 --offset 0 -o json`,
		Args: exactArgs(0, ""),
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if topic == "" || !cmd.Flags().Changed("queue") || !cmd.Flags().Changed("offset") {
			return usageErrorf("--topic, --queue and --offset are required")
		}
		if queue < 0 || offset < 0 {
			return usageErrorf("--queue and --offset must not be negative")
		}
		mq, err := a.queueOf(topic, broker, queue)
		if err != nil {
			return err
		}
		adm, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx()
		defer cancel()
		m, err := adm.ViewMessageAt(ctx, mq, offset)
		if err != nil {
			return forTopic(topic, err)
		}
		if a.json() {
			return a.emit(toMessageJSON(m))
		}
		writeMessageDetail(a.stdout, m, "")
		return nil
	}
	fs := c.Flags()
	fs.StringVarP(&topic, "topic", "t", "", "topic (required)")
	fs.StringVar(&broker, "broker", "", "broker group of the queue (needed when the topic is on several)")
	fs.Int32Var(&queue, "queue", 0, "queue id (required)")
	fs.Int64Var(&offset, "offset", 0, "queue offset (required)")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

// queueOf resolves --topic, --broker and --queue to a queue of the topic's
// route: --broker may be left out when the topic lives on one broker
// group.
func (a *app) queueOf(topic, broker string, queue int32) (client.MessageQueue, error) {
	r, err := a.route(topic)
	if err != nil {
		return client.MessageQueue{}, err
	}
	var qd *client.QueueData
	var names []string
	for i := range r.Queues {
		names = append(names, r.Queues[i].BrokerName)
		if r.Queues[i].BrokerName == broker || broker == "" && len(r.Queues) == 1 {
			qd = &r.Queues[i]
		}
	}
	if qd == nil && broker == "" {
		return client.MessageQueue{}, usageErrorf("topic %s lives on broker groups %s: give --broker", topic, strings.Join(names, ", "))
	}
	if qd == nil {
		return client.MessageQueue{}, fmt.Errorf("topic %s is not on broker group %q (it is on %s)", topic, broker, strings.Join(names, ", "))
	}
	if queue >= qd.ReadQueues {
		return client.MessageQueue{}, fmt.Errorf("topic %s has queues 0..%d on %s, not %d", topic, qd.ReadQueues-1, qd.BrokerName, queue)
	}
	return client.MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: queue}, nil
}

// emitMessages prints msgs as JSON lines, one object each (toMessageJSON).
func (a *app) emitMessages(msgs []*client.MessageExt) error {
	for _, m := range msgs {
		if err := a.emit(toMessageJSON(m)); err != nil {
			return err
		}
	}
	return nil
}
