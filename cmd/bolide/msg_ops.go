package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

func newMsgRangeCmd(a *app) *cobra.Command {
	var topic, broker string
	var queue int32
	var from int64
	var count int
	var body bool
	c := &cobra.Command{
		Use:   "range --topic TOPIC [--broker B] --queue Q [--from N] [--count M] [--body]",
		Short: "Print a range of a queue, in queue order, without committing any offset",
		Long: `Print up to --count messages of queue --queue of a topic from offset --from on, in queue
order (RocketMQ's printMsgByQueue). Nothing is committed: the queue is read without a
consumer group, so no group's offset moves. Queue ids are per broker group: --broker
names the group, and may be left out when the topic lives on one group. An offset below
the queue's first message (removed by retention) starts at the first message; the
table output ends with the offset to give --from for the next page (on stderr).`,
		Example: `  bolide msg range --topic orders --broker broker-a --queue 0
  bolide msg range --topic orders --broker broker-a --queue 0 --from 100 --count 20 --body
  bolide msg range --topic orders --queue 0 -o json`,
		Args: exactArgs(0, ""),
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if topic == "" || !cmd.Flags().Changed("queue") {
			return usageErrorf("--topic and --queue are required")
		}
		if queue < 0 || from < 0 {
			return usageErrorf("--queue and --from must not be negative")
		}
		if count < 1 {
			return usageErrorf("--count must be positive, not %d", count)
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
		msgs, next, err := adm.BrowseQueue(ctx, mq, from, count)
		if err != nil {
			return forTopic(topic, err)
		}
		if a.json() {
			return a.emitMessages(msgs)
		}
		if len(msgs) == 0 {
			a.info("queue %s has no message at or after offset %d (its next offset is %d)", mq, from, next)
			return nil
		}
		header := []string{"OFFSET", "MSGID", "TAG", "KEYS", "STORED", "SIZE"}
		if body {
			header = append(header, "BODY")
		}
		t := newTable(header...)
		for _, m := range msgs {
			row := []any{m.QueueOffset, m.MsgID, m.Tag, joinOrDash(m.Keys, ","), m.StoreTimestamp, len(m.Body)}
			if body {
				row = append(row, displayBody(m.Body, 60))
			}
			t.row(row...)
		}
		if err := t.write(a.stdout); err != nil {
			return err
		}
		noun := "messages"
		if len(msgs) == 1 {
			noun = "message"
		}
		a.info("%d %s of %s; next offset %d", len(msgs), noun, mq, next)
		return nil
	}
	fs := c.Flags()
	fs.StringVarP(&topic, "topic", "t", "", "topic (required)")
	fs.StringVar(&broker, "broker", "", "broker group of the queue (needed when the topic is on several)")
	fs.Int32Var(&queue, "queue", 0, "queue id (required)")
	fs.Int64Var(&from, "from", 0, "first queue offset to print")
	fs.IntVar(&count, "count", 32, "at most this many messages")
	fs.BoolVar(&body, "body", false, "add a BODY column (the start of each body)")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

func newMsgSearchCmd(a *app) *cobra.Command {
	var topic, begin, end string
	var max int
	c := &cobra.Command{
		Use:   "search --topic TOPIC --begin TIME [--end TIME] [--max N]",
		Short: "Find the messages of a topic stored in a time range, oldest first",
		Long: `Find the messages of a topic stored at or after --begin and before --end (default: now),
in every queue of every broker group, oldest first. Each queue's range is found by store
time on its broker and read without a consumer group (nothing is committed). At most --max
messages are printed, the oldest; when the range holds more, a line on stderr says so.`,
		Example: `  bolide msg search --topic orders --begin 1h
  bolide msg search --topic orders --begin 2026-01-02T10:00:00Z --end 2026-01-02T10:05:00Z --max 500
  bolide msg search --topic orders --begin 15m -o json`,
		Args: exactArgs(0, ""),
	}
	c.RunE = func(*cobra.Command, []string) error {
		if topic == "" || begin == "" {
			return usageErrorf("--topic and --begin are required")
		}
		if err := message.ValidateTopic(topic); err != nil {
			return usageErrorf("--topic: %v", err)
		}
		if max < 1 {
			return usageErrorf("--max must be positive, not %d", max)
		}
		now := time.Now()
		from, err := parseTime(begin, now)
		if err != nil {
			return usageErrorf("--begin: %v", err)
		}
		to := now
		if end != "" {
			if to, err = parseTime(end, now); err != nil {
				return usageErrorf("--end: %v", err)
			}
		}
		if !to.After(from) {
			return usageErrorf("--end %s is not after --begin %s", formatTime(to), formatTime(from))
		}
		adm, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx()
		defer cancel()
		// One more than shown tells whether the range holds more.
		msgs, err := adm.MessagesByTime(ctx, topic, from, to, max+1)
		if err != nil {
			return forTopic(topic, err)
		}
		capped := len(msgs) > max
		if capped {
			msgs = msgs[:max]
		}
		if a.json() {
			if err := a.emitMessages(msgs); err != nil {
				return err
			}
		} else if len(msgs) == 0 {
			a.info("no message of %s was stored between %s and %s", topic, formatTime(from), formatTime(to))
			return nil
		} else {
			t := newTable("MSGID", "BROKER", "QUEUE", "OFFSET", "STORED", "TAG", "KEYS", "BODY")
			for _, m := range msgs {
				t.row(m.MsgID, m.BrokerName, m.QueueID, m.QueueOffset, m.StoreTimestamp, m.Tag, joinOrDash(m.Keys, ","),
					displayBody(m.Body, 40))
			}
			if err := t.write(a.stdout); err != nil {
				return err
			}
		}
		if capped {
			a.warn("the range holds more than %d messages: these are the oldest %d; raise --max or narrow the range (the last one shown was stored at %s)",
				max, max, formatTime(msgs[len(msgs)-1].StoreTimestamp))
		}
		return nil
	}
	fs := c.Flags()
	fs.StringVarP(&topic, "topic", "t", "", "topic to search (required)")
	fs.StringVar(&begin, "begin", "", `messages stored at or after this time (required; "1h": an hour ago)`)
	fs.StringVar(&end, "end", "", "messages stored before this time (default now)")
	fs.IntVar(&max, "max", 64, "at most this many messages")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

// traceHopJSON is one hop of msg trace -o json (the console's names).
type traceHopJSON struct {
	Kind           string `json:"kind"`
	Topic          string `json:"topic"`
	Group          string `json:"group"`
	Broker         string `json:"broker"`
	QueueID        int32  `json:"queueId"`
	QueueOffset    int64  `json:"queueOffset"`
	StoreTime      string `json:"storeTime"`
	ReconsumeTimes int32  `json:"reconsumeTimes"`
	MsgID          string `json:"msgId"` // the offset msg id of this copy
}

// traceJSON is msg trace -o json: the message and its hops, oldest first.
type traceJSON struct {
	Message messageJSON    `json:"message"`
	Hops    []traceHopJSON `json:"hops"`
}

func newMsgTraceCmd(a *app) *cobra.Command {
	var topic string
	c := &cobra.Command{
		Use:   "trace ID [--topic T]",
		Short: "Show a message's way through retries and dead letters: its origin, retry copies and dead letters",
		Long: `Show where a message went: its origin (the copy its producer stored), the copies in
%RETRY%<group> each consumer group that failed it had delivered again, and its dead
letters in %DLQ%<group>, oldest first. ID is either id of any copy (the msg id, which
every copy keeps, or a copy's offset msg id, as msg get takes); --topic limits a msg id
lookup to a topic (the retry and dead-letter topics are always searched). Copies are
found through the brokers' key indexes by the message's msg id. The OFFSET MSGID column
gives each copy's offset msg id, for msg get.`,
		Example: `  bolide msg trace 0A0000017B2A18B4AAC2641F1E2A0000 --topic orders
  bolide msg trace 7F00000100002A9F00000000000A1B2C -o json`,
		Args:              exactArgs(1, "an ID"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(_ *cobra.Command, args []string) error {
			id := args[0]
			if topic != "" {
				if err := message.ValidateTopic(topic); err != nil {
					return usageErrorf("--topic: %v", err)
				}
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			tr, err := adm.TraceMessage(ctx, id, topic)
			if errors.Is(err, client.ErrQueryNotFound) {
				return fmt.Errorf("no message with id %s", id)
			}
			if host, _, perr := message.ParseOffsetMsgID(id); perr == nil && errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("message %s: no answer within %v; read as an offset msg id it names the broker at %s", id, a.timeout, host)
			}
			if err != nil {
				if topic != "" {
					return forTopic(topic, err)
				}
				return err
			}
			if a.json() {
				j := traceJSON{Message: toMessageJSON(tr.Message), Hops: []traceHopJSON{}}
				for _, h := range tr.Hops {
					j.Hops = append(j.Hops, traceHopJSON{Kind: h.Kind, Topic: h.Topic, Group: h.Group, Broker: h.BrokerName,
						QueueID: h.QueueID, QueueOffset: h.QueueOffset, StoreTime: jsonTime(h.StoreTime),
						ReconsumeTimes: h.ReconsumeTimes, MsgID: h.MsgID})
				}
				return a.emit(j)
			}
			m := tr.Message
			field := func(name string, v any) { fmt.Fprintf(a.stdout, "%-8s %s\n", name+":", cell(v)) }
			field("Msg id", m.MsgID)
			field("Topic", m.Topic)
			field("Tag", m.Tag)
			field("Keys", joinOrDash(m.Keys, " "))
			field("Body", fmt.Sprintf("%d bytes: %s", len(m.Body), displayBody(m.Body, 60)))
			fmt.Fprintln(a.stdout)
			t := newTable("KIND", "TOPIC", "GROUP", "BROKER", "QUEUE", "OFFSET", "STORED", "RECONSUMES", "OFFSET MSGID")
			for _, h := range tr.Hops {
				t.row(h.Kind, h.Topic, h.Group, h.BrokerName, h.QueueID, h.QueueOffset, h.StoreTime, h.ReconsumeTimes, h.MsgID)
			}
			return t.write(a.stdout)
		},
	}
	c.Flags().StringVarP(&topic, "topic", "t", "", "look a msg id up in this topic only (retry and dead-letter topics are always searched)")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}
