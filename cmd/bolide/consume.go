package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

type consumeFlags struct {
	topic     string
	group     string
	tag       string
	sql       string
	from      string
	count     int
	idle      time.Duration
	broadcast bool
	pop       bool
	invisible time.Duration
	// fromSet, invisibleSet, tagSet and sqlSet: the flags were given.
	fromSet, invisibleSet, tagSet, sqlSet bool
}

func newConsumeCmd(a *app) *cobra.Command {
	f := &consumeFlags{}
	c := &cobra.Command{
		Use:   "consume --topic TOPIC --group GROUP [flags]",
		Short: "Consume messages as a member of a consumer group and print them",
		Long: `Consume messages of a topic as a member of a consumer group, print each one, and exit
after --count messages or when --timeout passes with nothing new (0: run until Ctrl-C).
Before exiting the group's offsets are committed, so the next consume of the same group
continues where this one stopped.

Several consumes of one group share the topic's queues (each message goes to one of
them); with --broadcast each gets every message and offsets are kept in
~/.bolide/offsets instead of on the brokers. --from says where a group starts on queues
it has never consumed: first (the default here), last, or a time.

--tag selects messages by tag; --sql instead by an SQL92 condition over their properties
(RocketMQ's language: =, <>, <, <=, >, >=, BETWEEN, IN, IS [NOT] NULL, AND, OR, NOT,
'strings', numbers, TRUE/FALSE; TAGS is the tag), evaluated by the brokers: the others are
never sent, and the group's offsets move past them. A condition the brokers refuse is a
usage error that gives the position of the mistake.

With -o json each line is one message: msgId (the unique id, UNIQ_KEY), offsetMsgId
(store host and CommitLog offset), topic, broker, queueId,
queueOffset, commitLogOffset, tags, keys, properties, body (text; base64 with
"bodyEncoding":"base64" when the body is not UTF-8), bodySize, bornTimestamp and
storeTimestamp (RFC 3339 with milliseconds, UTC), bornHost, storeHost, reconsumeTimes.

With --pop the group consumes over POP, as RocketMQ 5's simple consumers do: each message
received stays invisible to the group's other consumers for --invisible and is acknowledged
once printed; one that is not (the command was killed first) is delivered again when its
invisibility runs out, with a higher delivery attempt (ATTEMPT, "deliveryAttempt"). The
group's subscription-group settings apply (bolide group create --fifo ...); --from and
--broadcast do not.`,
		Example: `  bolide consume --topic orders --group billing
  bolide consume --topic orders --group billing --tag 'paid || refunded' --count 10
  bolide consume --topic orders --group eu-large --sql "region = 'eu' AND amount > 100"
  bolide consume --topic orders --group audit --from -1h --timeout 0    # follow
  bolide consume --topic orders --group replay --from 2026-01-02T15:00:00Z -o json | jq .body
  bolide consume --topic orders --group ledger --pop --invisible 1m --count 10`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.fromSet, f.invisibleSet = cmd.Flags().Changed("from"), cmd.Flags().Changed("invisible")
			f.tagSet, f.sqlSet = cmd.Flags().Changed("tag"), cmd.Flags().Changed("sql")
			return a.runConsume(f)
		},
	}
	fs := c.Flags()
	fs.StringVarP(&f.topic, "topic", "t", "", "topic to consume (required)")
	fs.StringVarP(&f.group, "group", "g", "", "consumer group (required)")
	fs.StringVar(&f.tag, "tag", "*", `tag expression: "*" or tags joined by "||"`)
	fs.StringVar(&f.sql, "sql", "", `SQL92 condition over the message properties instead of --tag, e.g. "region = 'eu' AND amount > 100"`)
	fs.StringVar(&f.from, "from", "first", "where a new group starts: first, last or a time")
	fs.IntVarP(&f.count, "count", "c", 0, "exit after this many messages (0: no limit)")
	fs.DurationVar(&f.idle, "timeout", 5*time.Second, "exit when nothing new arrives for this long (0: never); also bounds each request")
	fs.BoolVar(&f.broadcast, "broadcast", false, "broadcasting: get every message, keep offsets locally")
	fs.BoolVar(&f.pop, "pop", false, "consume over POP (a simple consumer): receive, print, acknowledge")
	fs.DurationVar(&f.invisible, "invisible", 30*time.Second, "with --pop: how long a received message stays invisible to the group")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	_ = c.RegisterFlagCompletionFunc("from", fixedCompletion("first", "last", "-1h", "now"))
	return c
}

func (a *app) runConsume(f *consumeFlags) error {
	if f.topic == "" || f.group == "" {
		return usageErrorf("--topic and --group are required")
	}
	if err := message.ValidateTopic(f.topic); err != nil {
		return usageErrorf("--topic: %v", err)
	}
	if err := message.ValidateGroup(f.group); err != nil {
		return usageErrorf("--group: %v", err)
	}
	if f.count < 0 || f.idle < 0 {
		return usageErrorf("--count and --timeout must not be negative")
	}
	if f.sqlSet && f.tagSet {
		return usageErrorf("--sql and --tag are exclusive: select by tag in the condition with TAGS = 'paid'")
	}
	if f.sqlSet && strings.TrimSpace(f.sql) == "" {
		return usageErrorf("--sql: empty condition")
	}
	if f.pop {
		if f.broadcast || f.fromSet {
			return usageErrorf("--from and --broadcast do not apply to --pop")
		}
		if f.idle > 0 {
			a.timeout = f.idle
		}
		return a.runPopConsume(f)
	}
	if f.invisibleSet {
		return usageErrorf("--invisible needs --pop")
	}
	from, err := parseFrom(f.from, time.Now())
	if err != nil {
		return usageErrorf("%v", err)
	}
	if f.idle > 0 {
		// consume's --timeout shadows the global one: it bounds the wait
		// for the cluster to answer as well.
		a.timeout = f.idle
	}
	if err := a.checkTopic(f.topic); err != nil {
		return err
	}
	// Poll hands out at most this many messages at once; with --count the
	// batch never exceeds what is still wanted (but see leftovers below).
	batch := 32
	if f.count > 0 {
		batch = min(batch, f.count)
	}
	model := client.Clustering
	if f.broadcast {
		model = client.Broadcasting
	}
	c, err := client.NewPullConsumer(f.group, a.consumerOptions(
		client.WithConsumeFrom(from),
		client.WithMessageModel(model),
		client.WithPollBatchSize(batch),
		client.WithCommitInterval(time.Second),
	)...)
	if err != nil {
		return err
	}
	sel, flag := client.ByTag(f.tag), "--tag"
	if f.sqlSet {
		sel, flag = client.SQL92(f.sql), "--sql"
	}
	if err := c.SubscribeSelector(f.topic, sel); err != nil {
		_ = c.Close()
		if errors.Is(err, client.ErrSubscriptionParse) {
			return usageErrorf("%s: %v", flag, err)
		}
		return forTopic(f.topic, err)
	}
	if err := c.Start(a.ctx); err != nil {
		_ = c.Close()
		return err
	}
	stopWatch := a.watchAssignment(c)

	n := 0
	headerDone := false
	last := time.Now()
	var leftovers []*client.MessageExt
	var loopErr error
	for f.count == 0 || n < f.count {
		pctx, cancel := a.ctx, context.CancelFunc(func() {})
		if f.idle > 0 {
			pctx, cancel = context.WithDeadline(a.ctx, last.Add(f.idle))
		}
		msgs, err := c.Poll(pctx)
		cancel()
		if err != nil {
			if a.ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
				loopErr = err
			}
			break // idle, interrupted (Ctrl-C ends a consume normally) or failed
		}
		last = time.Now()
		for i, m := range msgs {
			if f.count > 0 && n >= f.count {
				leftovers = msgs[i:]
				break
			}
			if err := a.printMessage(m, &headerDone); err != nil {
				loopErr = err
				break
			}
			n++
		}
		if loopErr != nil {
			break
		}
	}
	a.handledInterrupt = true
	stopWatch()
	// Commit what was printed, and nothing else: Poll may have returned
	// more than --count wanted; rewind those queues to the first message
	// not printed. (Interrupted or not: a fresh context.)
	cctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	cerr := a.rewind(cctx, c, leftovers)
	if cerr == nil {
		cerr = c.Commit(cctx)
	}
	if err := c.Close(); err != nil && cerr == nil {
		cerr = err
	}
	if loopErr != nil {
		return forTopic(f.topic, loopErr)
	}
	if cerr != nil {
		return fmt.Errorf("commit the offsets of group %s: %w", f.group, cerr)
	}
	a.info("consumed %d messages from %s as group %s", n, f.topic, f.group)
	return nil
}

// rewind moves each queue of msgs back to its first message in msgs, so
// that a commit does not pass messages that were fetched but not printed.
func (a *app) rewind(ctx context.Context, c *client.PullConsumer, msgs []*client.MessageExt) error {
	first := make(map[client.MessageQueue]int64)
	for _, m := range msgs {
		q := m.Queue()
		if off, ok := first[q]; !ok || m.QueueOffset < off {
			first[q] = m.QueueOffset
		}
	}
	for q, off := range first {
		if err := c.Seek(ctx, q, off); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) printMessage(m *client.MessageExt, headerDone *bool) error {
	if a.json() {
		return a.emit(toMessageJSON(m))
	}
	if !*headerDone {
		*headerDone = true
		writeMessageLineHeader(a.stdout)
	}
	writeMessageLine(a.stdout, m)
	return nil
}

// watchAssignment reports on stderr, with --verbose, the queues the
// consumer holds each time they change. The returned function stops it.
func (a *app) watchAssignment(c interface{ Assignment() []client.MessageQueue }) func() {
	if !a.verbose {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		var prev []client.MessageQueue
		for {
			cur := c.Assignment()
			if !slices.Equal(cur, prev) {
				prev = cur
				names := make([]string, len(cur))
				for i, q := range cur {
					names[i] = fmt.Sprintf("%s#%d", q.BrokerName, q.QueueID)
				}
				fmt.Fprintf(a.stderr, "bolide: assigned %d queues: %s\n", len(cur), strings.Join(names, " "))
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
