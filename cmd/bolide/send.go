package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

// cliProducerGroup is the producer group of the messages bolide sends.
const cliProducerGroup = "bolide-cli"

// maxLine bounds one stdin line: the largest body plus some slack.
const maxLine = message.DefaultMaxBodySize + 1024

// sendJSON is one sent message.
type sendJSON struct {
	MsgID       string `json:"msgId"`       // the unique id (UNIQ_KEY)
	OffsetMsgID string `json:"offsetMsgId"` // store host + CommitLog offset
	Topic       string `json:"topic"`
	Broker      string `json:"broker"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
}

type sendFlags struct {
	topic       string
	tag         string
	keys        string
	props       []string
	shardingKey string
	dedupID     string
	count       int
	concurrency int
	delayLevel  int
	deliverAt   string
	delay       string
}

func newSendCmd(a *app) *cobra.Command {
	f := &sendFlags{}
	c := &cobra.Command{
		Use:   "send --topic TOPIC [flags] BODY|-",
		Short: "Send messages: one BODY (--count times), or one message per line of stdin with -",
		Long: `Send messages and print, for each, its ids, broker, queue and offset: MSGID is the
message's unique id (UNIQ_KEY, what RocketMQ's clients call msgId), OFFSETMSGID where it
was stored (store host and CommitLog offset).

BODY is sent --count times (default once). With - instead of a BODY every line of stdin
is one message (empty lines are skipped) and --count, if given, stops after that many.
"{{Count}}" in BODY, --tag, --keys, --property and --sharding-key is replaced by the
message's number (1, 2, ...), so that --count can send distinct messages (lines of stdin
are sent as they are).

Messages are sent --concurrency at a time and printed in input order. With
--sharding-key every message goes to the queue the key selects, one at a time, so that
they stay in order.

Delayed delivery (at most one of): --delay-level N uses the broker's delay levels
(1s 5s 10s 30s 1m 2m ... 2h by default); --delay D delivers D after the broker stores
the message (1500ms, 90s, 2h, 3d); --deliver-at T delivers at a point in time (RFC 3339,
"+10m", or epoch milliseconds). Timer messages (--delay, --deliver-at) can be cancelled
until they are due with 'bolide delay cancel' and the MSGID printed here.`,
		Example: `  bolide send --topic orders --tag paid --keys order-42 'hello'
  bolide send --topic orders --keys 'order-{{Count}}' --count 1000 'order {{Count}}'
  bolide send --topic orders --property source=web --property region=eu '{"id":42}'
  bolide send --topic orders --sharding-key customer-7 'step 1'
  bolide send --topic orders --dedup-id order-42-paid 'sent once, however often it is resent'
  seq 1 100 | bolide send --topic orders -o json -
  bolide send --topic orders --delay-level 3 'in 10 seconds'
  bolide send --topic orders --delay 90m 'in an hour and a half'
  bolide send --topic orders --deliver-at 2027-01-01T00:00:00Z 'happy new year'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runSend(cmd, f, args)
		},
	}
	fs := c.Flags()
	fs.StringVarP(&f.topic, "topic", "t", "", "topic to send to (required)")
	fs.StringVar(&f.tag, "tag", "", "the messages' tag")
	fs.StringVarP(&f.keys, "keys", "k", "", "keys to index the messages by, comma-separated")
	fs.StringArrayVarP(&f.props, "property", "p", nil, "a user property key=value (repeatable)")
	fs.StringVar(&f.shardingKey, "sharding-key", "", "send in order to the queue this key selects")
	fs.StringVar(&f.dedupID, "dedup-id", "", "the message's unique id (MSGID; {{Count}} expands): a resend of an id the broker stored within its deduplication window (2 minutes) is not stored again")
	fs.IntVarP(&f.count, "count", "c", 0, "how many messages to send (BODY: default 1; stdin: default all lines)")
	fs.IntVar(&f.concurrency, "concurrency", 16, "messages in flight at once (1 with --sharding-key)")
	fs.IntVar(&f.delayLevel, "delay-level", 0, "deliver after this delay level (1 = 1s, 2 = 5s, 3 = 10s, ...)")
	fs.StringVar(&f.delay, "delay", "", "deliver this long after the broker stores the message (90s, 2h, 3d)")
	fs.StringVar(&f.deliverAt, "deliver-at", "", `deliver at this time (RFC 3339, "+10m", epoch ms)`)
	c.MarkFlagsMutuallyExclusive("delay-level", "delay", "deliver-at")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

type sendJob struct {
	seq int
	msg *client.Message
}

type sendOut struct {
	seq int
	res *client.SendResult
	err error
}

func (a *app) runSend(cmd *cobra.Command, f *sendFlags, args []string) error {
	if f.topic == "" {
		return usageErrorf("--topic is required")
	}
	if err := message.ValidateTopic(f.topic); err != nil {
		return usageErrorf("--topic: %v", err)
	}
	if len(args) == 0 {
		return usageErrorf("give a BODY to send, or - to send one message per line of stdin")
	}
	if f.count < 0 || cmd.Flags().Changed("count") && f.count == 0 {
		return usageErrorf("--count must be positive, not %d", f.count)
	}
	if f.concurrency < 1 {
		return usageErrorf("--concurrency must be positive, not %d", f.concurrency)
	}
	props, err := parseProperties(f.props)
	if err != nil {
		return usageErrorf("--property: %v", err)
	}
	sendOpts, err := sendDelayOptions(f, time.Now())
	if err != nil {
		return err
	}
	fromStdin := args[0] == "-"
	if !fromStdin && args[0] == "" {
		return usageErrorf("the BODY is empty: Bolide does not store empty messages")
	}
	conc := f.concurrency
	if f.shardingKey != "" {
		conc = 1
	}

	// Fail fast, with a clear message, on an unknown topic or an
	// unreachable NameServer.
	if err := a.checkTopic(f.topic); err != nil {
		return err
	}
	p, err := client.NewProducer(cliProducerGroup, a.producerOptions()...)
	if err != nil {
		return err
	}
	if err := p.Start(a.ctx); err != nil {
		return err
	}
	a.onClose(p.Close)

	build := func(n int, body string) *client.Message {
		if !fromStdin { // lines of stdin are sent as they are
			body = expandCount(body, n)
		}
		m := &client.Message{Topic: f.topic, Tag: expandCount(f.tag, n), Body: []byte(body),
			ShardingKey: expandCount(f.shardingKey, n), UniqueID: expandCount(f.dedupID, n)}
		for _, k := range splitList(f.keys) {
			m.Keys = append(m.Keys, expandCount(k, n))
		}
		if len(props) > 0 {
			m.Properties = make(map[string]string, len(props))
			for k, v := range props {
				m.Properties[expandCount(k, n)] = expandCount(v, n)
			}
		}
		return m
	}

	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	jobs := make(chan sendJob)
	readErr := make(chan error, 1)
	go func() {
		defer close(jobs)
		readErr <- a.readSendJobs(ctx, f, args[0], fromStdin, build, jobs)
	}()
	results := make(chan sendOut, conc)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				res, err := p.Send(ctx, j.msg, sendOpts...)
				results <- sendOut{seq: j.seq, res: res, err: err}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(results)
	}()

	start := time.Now()
	pending := make(map[int]sendOut)
	next, sent := 1, 0
	var firstErr error
	firstErrSeq := 0
	headerDone := false
	for r := range results {
		pending[r.seq] = r
		for {
			o, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if o.err != nil {
				if firstErr == nil && !(errors.Is(o.err, context.Canceled) && ctx.Err() != nil) {
					firstErr, firstErrSeq = o.err, o.seq
					cancel()
				}
				continue
			}
			sent++
			if err := a.printSent(f.topic, o.res, &headerDone); err != nil {
				cancel()
				return err
			}
		}
	}
	rerr := <-readErr
	elapsed := time.Since(start)
	switch {
	case firstErr != nil:
		return forTopic(f.topic, fmt.Errorf("message %d: %w (%d sent)", firstErrSeq, firstErr, sent))
	case rerr != nil:
		return fmt.Errorf("%w (%d sent)", rerr, sent)
	case a.ctx.Err() != nil:
		return fmt.Errorf("interrupted after %d messages", sent)
	}
	switch {
	case sent >= 1000:
		a.info("sent %d messages to %s in %v (%.0f msg/s)", sent, f.topic, elapsed.Round(time.Millisecond),
			float64(sent)/elapsed.Seconds())
	case sent > 1:
		a.info("sent %d messages to %s in %v", sent, f.topic, elapsed.Round(time.Millisecond))
	}
	return nil
}

// sendDelayOptions turns --delay-level, --delay and --deliver-at into send
// options (cobra refuses more than one of them).
func sendDelayOptions(f *sendFlags, now time.Time) ([]client.SendOption, error) {
	switch {
	case f.delayLevel < 0:
		return nil, usageErrorf("--delay-level must be positive, not %d", f.delayLevel)
	case f.delayLevel > 0:
		return []client.SendOption{client.WithDelayLevel(f.delayLevel)}, nil
	case f.delay != "":
		d, err := parseDuration(f.delay)
		if err != nil || d < 0 {
			return nil, usageErrorf("--delay %q: want a duration such as 1500ms, 90s, 2h or 3d", f.delay)
		}
		return []client.SendOption{client.WithDelay(d)}, nil
	case f.deliverAt != "":
		s := f.deliverAt
		if d, sign, ok := parseRelative(s); ok && sign < 0 && !strings.HasPrefix(s, "-") {
			// A bare duration means from now on here, not ago.
			return []client.SendOption{client.WithDeliverAt(now.Add(d))}, nil
		}
		t, err := parseTime(s, now)
		if err != nil {
			return nil, usageErrorf("--deliver-at: %v", err)
		}
		return []client.SendOption{client.WithDeliverAt(t)}, nil
	}
	return nil, nil
}

// readSendJobs produces the messages to send: BODY count times, or the
// lines of stdin.
func (a *app) readSendJobs(ctx context.Context, f *sendFlags, body string, fromStdin bool,
	build func(int, string) *client.Message, jobs chan<- sendJob) error {
	put := func(n int, m *client.Message) bool {
		select {
		case jobs <- sendJob{seq: n, msg: m}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !fromStdin {
		count := max(f.count, 1)
		for n := 1; n <= count; n++ {
			if !put(n, build(n, body)) {
				return nil
			}
		}
		return nil
	}
	sc := bufio.NewScanner(a.stdin)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n, line := 0, 0
	for sc.Scan() {
		line++
		text := strings.TrimSuffix(sc.Text(), "\r")
		if text == "" {
			continue
		}
		n++
		if !put(n, build(n, text)) {
			return nil
		}
		if f.count > 0 && n >= f.count {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("stdin line %d is longer than %d bytes", line+1, maxLine)
		}
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("read stdin: %w", err)
		}
	}
	return nil
}

const sendLineFormat = "%-32s  %-32s  %-10s  %5v  %8v\n"

func (a *app) printSent(topic string, r *client.SendResult, headerDone *bool) error {
	if a.json() {
		return a.emit(sendJSON{MsgID: r.MsgID, OffsetMsgID: r.OffsetMsgID, Topic: topic, Broker: r.BrokerName,
			QueueID: r.QueueID, QueueOffset: r.QueueOffset})
	}
	if !*headerDone {
		*headerDone = true
		fmt.Fprintf(a.stdout, sendLineFormat, "MSGID", "OFFSETMSGID", "BROKER", "QUEUE", "OFFSET")
	}
	_, err := fmt.Fprintf(a.stdout, sendLineFormat, r.MsgID, r.OffsetMsgID, r.BrokerName, r.QueueID, r.QueueOffset)
	return err
}

// checkTopic fails with a clear error when the topic has no route (or no
// NameServer answers).
func (a *app) checkTopic(topic string) error {
	_, err := a.route(topic)
	return err
}

// route returns a topic's route, bounded by --timeout.
func (a *app) route(topic string) (*client.TopicRoute, error) {
	adm, err := a.adminClient()
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.opCtx()
	defer cancel()
	r, err := adm.Route(ctx, topic)
	return r, forTopic(topic, err)
}
