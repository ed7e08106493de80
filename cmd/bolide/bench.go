package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

func newBenchCmd(a *app) *cobra.Command {
	tr := &benchTransport{}
	c := groupCmd("bench", "Measure the cluster: produce or consume throughput, end-to-end latency",
		`  bolide bench produce --topic bench --count 100000 --producers 4
  bolide bench produce --topic bench --count 100000 --transport grpc
  bolide bench consume --topic bench
  bolide bench e2e --topic bench --rate 10000 --duration 30s
  bolide bench create-topics --topic scale --topics 10000`,
		newBenchProduceCmd(a, tr),
		newBenchConsumeCmd(a, tr),
		newBenchE2ECmd(a, tr),
		newBenchCreateTopicsCmd(a),
	)
	c.PersistentFlags().StringVar(&tr.name, "transport", client.TransportFrame.String(),
		"data path of sends and pulls: frame (Bolide's framed TCP protocol) or grpc")
	return c
}

// benchTransport is the --transport flag of every bench command.
type benchTransport struct{ name string }

// option returns the client option of the flag.
func (t *benchTransport) option() (client.Option, error) {
	tr, err := client.ParseTransport(t.name)
	if err != nil {
		return nil, usageErrorf("--transport must be frame or grpc, not %q", t.name)
	}
	return client.WithTransport(tr), nil
}

// benchJSON is the one object bench prints with -o json.
type benchJSON struct {
	Bench string `json:"bench"`
	Topic string `json:"topic"`
	// Topics: produce --topics N sent to Topic-0 … Topic-(N-1).
	Topics int    `json:"topics,omitempty"`
	Group  string `json:"group,omitempty"`
	// Groups: consume --groups N read with N groups, Group-0 …
	// Group-(N-1); GroupFields describe them.
	Groups    int    `json:"groups,omitempty"`
	Clients   int    `json:"clients"`
	Transport string `json:"transport"`
	Size      int    `json:"size,omitempty"`
	Batch     int    `json:"batch,omitempty"`
	Async     bool   `json:"async,omitempty"`
	// Delay and DelayLevel: produce --delay, --delay-level.
	Delay      string `json:"delay,omitempty"`
	DelayLevel int    `json:"delayLevel,omitempty"`
	// Pop: bench consume received over POP (simple consumers).
	Pop        bool        `json:"pop,omitempty"`
	Messages   int64       `json:"messages"`
	Bytes      int64       `json:"bytes"`
	Errors     int64       `json:"errors"`
	Seconds    float64     `json:"seconds"`
	MsgsPerSec float64     `json:"msgsPerSec"`
	MiBPerSec  float64     `json:"mibPerSec"`
	Latency    latencyJSON `json:"latencyMs"`
	// LatencyKind says what was timed: "ack" (send to acknowledgement,
	// one per request) or "end-to-end" (born timestamp to receipt).
	LatencyKind string `json:"latencyKind"`
	FirstError  string `json:"firstError,omitempty"`
	// E2EFields is set for an e2e run only; its fields are then always
	// printed, zeros included.
	*E2EFields
	// SQL is set for a consume through an SQL92 filter.
	SQL *SQLFields `json:"sql,omitempty"`
	// PerGroup is set for a consume with --groups above 1.
	PerGroup *GroupFields `json:"perGroup,omitempty"`
}

// GroupFields describe the groups of a consume with --groups: the
// messages each group received and its rate (its messages over the time
// from its first receipt to its last), the least, the median and the
// most; Complete counts the groups that received all they were to read.
type GroupFields struct {
	MinMessages      int64   `json:"minMessages"`
	MaxMessages      int64   `json:"maxMessages"`
	MinMsgsPerSec    float64 `json:"minMsgsPerSec"`
	MedianMsgsPerSec float64 `json:"medianMsgsPerSec"`
	MaxMsgsPerSec    float64 `json:"maxMsgsPerSec"`
	Complete         int     `json:"complete"`
}

// SQLFields describe a consume through an SQL92 filter: the condition, the
// backlog the broker went through and at what rate (over the same time as
// the matching messages' rate).
type SQLFields struct {
	Condition     string  `json:"condition"`
	Scanned       int64   `json:"scanned"`
	ScannedPerSec float64 `json:"scannedPerSec"`
}

// E2EFields describe an e2e run (exported: encoding/json sets an embedded
// pointer only to an exported type): the rate asked for, the messages
// acknowledged, those of them never received, the acknowledgement latency
// of the timed messages (from the time each was scheduled to be sent to
// its send's callback), which splits the end-to-end figure into the way in
// and the rest, and how late each timed send started against its schedule:
// the part of both that is the bench's own, waking on a busy machine.
type E2EFields struct {
	TargetRate float64     `json:"targetRate"`
	Sent       int64       `json:"sent"`
	Missing    int64       `json:"missing"`
	AckLatency latencyJSON `json:"ackLatencyMs"`
	SendLag    latencyJSON `json:"sendLagMs"`
}

type benchProduceFlags struct {
	topic      string
	topics     int
	delay      time.Duration
	delayLevel int
	size       int
	count      int
	duration   time.Duration
	producers  int
	batch      int
	profile    string
	allocs     string
	async      bool
	inflight   int
	rate       int
	buckets    int
	transport  *benchTransport
}

func newBenchProduceCmd(a *app, tr *benchTransport) *cobra.Command {
	f := &benchProduceFlags{transport: tr}
	c := &cobra.Command{
		Use:   "produce --topic TOPIC [--topics N] [--size B] [--count N | --duration D] [--producers N] [--batch N] [--async]",
		Short: "Send messages as fast as possible and report throughput and ack latency",
		Long: `Send --count messages (or for --duration) of --size bytes with --producers producers,
each its own client, and report messages/s, MiB/s and the latency of acknowledgements
(p50, p90, p99, p99.9: one per request, so one per batch with --batch). --batch N sends N
messages per request (to one queue); --async keeps up to --inflight requests in flight per
producer instead of one. --rate caps the messages sent per second, all producers together
(to compare at one load: a broker's CPU per message depends on it). --buckets N gives each
message a property bucket = its number modulo N (0..N-1), for filters to select a known share
(bench consume --sql "bucket = 7": 1 % with --buckets 100). Progress goes to stderr while it
runs (not with -o json).

--topics N sends to the topics TOPIC-0 … TOPIC-(N-1) (make them with 'bench create-topics')
instead of TOPIC, spread evenly: with at least as many topics as producers, producer i
takes the topics i, i+P, i+2P, … (P producers) and sends to them in turn; with fewer, the
producers take one topic each, in turn, so that every topic has producers.

--delay D sends timer messages, delivered D after the broker stores them; --delay-level L
sends them with RocketMQ's delay level L (1-based: 1s 5s 10s 30s 1m … by default). The
acknowledgement comes when the broker has stored them for later; they reach the topic when
due.`,
		Example: `  bolide topic create bench --queues 8
  bolide bench produce --topic bench --count 100000
  bolide bench produce --topic bench --duration 30s --producers 4 --size 4096 --async
  bolide bench produce --topic bench --count 1000000 --batch 32 -o json
  bolide bench create-topics --topic scale --topics 10000
  bolide bench produce --topic scale --topics 10000 --producers 1000 --count 200000
  bolide bench produce --topic bench --delay 10s --rate 100000 --batch 100 --async --duration 60s`,
		Args: exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error { return a.runBenchProduce(f) },
	}
	fs := c.Flags()
	fs.StringVarP(&f.topic, "topic", "t", "", "topic to send to (required; create it first), or with --topics the prefix of the topics' names")
	fs.IntVar(&f.topics, "topics", 0, "send to the topics TOPIC-0 … TOPIC-(N-1), spread evenly over the producers (0: to TOPIC)")
	fs.IntVar(&f.size, "size", 1024, "message body size in bytes")
	fs.IntVarP(&f.count, "count", "c", 100000, "messages to send in all (ignored with --duration)")
	fs.DurationVar(&f.duration, "duration", 0, "send for this long instead of --count messages")
	fs.IntVar(&f.producers, "producers", 1, "concurrent producers (each its own client)")
	fs.IntVar(&f.batch, "batch", 1, "messages per send request")
	fs.BoolVar(&f.async, "async", false, "keep --inflight requests in flight per producer")
	fs.IntVar(&f.inflight, "inflight", 256, "requests in flight per producer with --async")
	fs.IntVar(&f.rate, "rate", 0, "at most this many messages per second, all producers together (0: as fast as possible)")
	fs.IntVar(&f.buckets, "buckets", 0, "give message i the property bucket=i%N, for SQL92 filters (0: no property)")
	fs.DurationVar(&f.delay, "delay", 0, "send timer messages, delivered this long after the broker stores them (0: none)")
	fs.IntVar(&f.delayLevel, "delay-level", 0, "send delayed messages of this delay level, 1-based (0: none)")
	fs.StringVar(&f.profile, "cpu-profile", "", "write a CPU profile of this process during the sends to this file")
	fs.StringVar(&f.allocs, "alloc-profile", "", "write a profile of this process's allocations to this file after the sends")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

// validate checks the flags (no cluster needed).
func (f *benchProduceFlags) validate() error {
	switch {
	case f.topic == "":
		return usageErrorf("--topic is required")
	case f.size < 1 || f.size > message.DefaultMaxBodySize:
		return usageErrorf("--size must be in 1..%d", message.DefaultMaxBodySize)
	case f.count < 1 && f.duration == 0:
		return usageErrorf("--count must be positive")
	case f.duration < 0:
		return usageErrorf("--duration must not be negative")
	case f.producers < 1 || f.batch < 1 || f.inflight < 1:
		return usageErrorf("--producers, --batch and --inflight must be positive")
	case f.rate < 0:
		return usageErrorf("--rate must not be negative")
	case f.buckets < 0:
		return usageErrorf("--buckets must not be negative")
	case f.batch*f.size > message.DefaultMaxBodySize:
		return usageErrorf("--batch %d × --size %d exceeds the %d bytes a request may carry", f.batch, f.size, message.DefaultMaxBodySize)
	case f.topics < 0:
		return usageErrorf("--topics must not be negative")
	case f.delay < 0 || f.delayLevel < 0:
		return usageErrorf("--delay and --delay-level must not be negative")
	case f.delay > 0 && f.delayLevel > 0:
		return usageErrorf("give --delay or --delay-level, not both")
	}
	if f.topics > 0 {
		return checkTopicPrefix(f.topic, f.topics)
	}
	return nil
}

// sendOptions are the options of every send: the delay asked for.
func (f *benchProduceFlags) sendOptions() []client.SendOption {
	switch {
	case f.delay > 0:
		return []client.SendOption{client.WithDelay(f.delay)}
	case f.delayLevel > 0:
		return []client.SendOption{client.WithDelayLevel(f.delayLevel)}
	}
	return nil
}

// producerTopics returns the topics each producer sends to, in turn.
func (f *benchProduceFlags) producerTopics() [][]string {
	if f.topics == 0 {
		out := make([][]string, f.producers)
		for i := range out {
			out[i] = []string{f.topic}
		}
		return out
	}
	return spreadTopics(f.topic, f.topics, f.producers)
}

// spreadTopics spreads the topics PREFIX-0 … PREFIX-(n-1) over p
// producers: with n >= p, producer i takes the topics i, i+p, i+2p, …
// (each topic one producer, the counts within one of each other); with
// n < p, producer i takes topic i mod n (each topic has producers, their
// counts within one of each other).
func spreadTopics(prefix string, n, p int) [][]string {
	out := make([][]string, p)
	if n < p {
		for i := range out {
			out[i] = []string{benchName(prefix, i%n)}
		}
		return out
	}
	for t := range n {
		out[t%p] = append(out[t%p], benchName(prefix, t))
	}
	return out
}

func (a *app) runBenchProduce(f *benchProduceFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	transport, err := f.transport.option()
	if err != nil {
		return err
	}
	if f.topics == 0 {
		if err := a.checkTopic(f.topic); err != nil {
			return err
		}
	} else {
		// The first and the last: a run of create-topics that did not
		// finish leaves a gap at the end.
		for _, name := range []string{benchName(f.topic, f.topics-1), benchName(f.topic, 0)} {
			if _, err := a.route(name); err != nil {
				return err
			}
		}
	}
	topicsOf := f.producerTopics()
	sendOpts := f.sendOptions()
	body := make([]byte, f.size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	producers, err := a.startProducers(f.producers, transport)
	if err != nil {
		return err
	}

	ctx := a.ctx
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(a.ctx, f.duration)
		defer cancel()
	}
	var (
		remaining atomic.Int64 // messages not yet claimed (count mode)
		acked     atomic.Int64
		errs      atomic.Int64
		errMu     sync.Mutex
		firstErr  error
	)
	remaining.Store(int64(f.count))
	claim := func() int {
		if f.duration > 0 {
			if ctx.Err() != nil {
				return 0
			}
			return f.batch
		}
		left := remaining.Add(-int64(f.batch))
		return int(min(int64(f.batch), max(0, left+int64(f.batch))))
	}
	fail := func(err error) {
		if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return // the duration ended (or Ctrl-C) while the request was in flight
		}
		errs.Add(1)
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	hists := make([]*histogram, f.producers)
	histMu := make([]sync.Mutex, f.producers)
	stopProgress := a.progress(func() string {
		if f.duration > 0 {
			return fmt.Sprintf("sent %d msgs", acked.Load())
		}
		return fmt.Sprintf("sent %d/%d msgs", acked.Load(), f.count)
	}, acked.Load)

	stopProfiles, err := startProfiles(f.profile, f.allocs)
	if err != nil {
		return err
	}
	defer stopProfiles()
	start := time.Now()
	// pace holds a claim of k messages until its turn under --rate: the
	// i-th message is due i/rate seconds after the start.
	var paced atomic.Int64
	pace := func(k int) bool {
		if f.rate <= 0 {
			return true
		}
		i := paced.Add(int64(k)) - int64(k)
		due := start.Add(time.Duration(float64(i) * float64(time.Second) / float64(f.rate)))
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	// newMsg builds the next message: with --buckets, each its number.
	var seq atomic.Int64
	newMsg := func(topic string) *client.Message {
		m := &client.Message{Topic: topic, Tag: "bench", Body: body}
		if f.buckets > 0 {
			m.Properties = map[string]string{"bucket": strconv.FormatInt((seq.Add(1)-1)%int64(f.buckets), 10)}
		}
		return m
	}
	var wg sync.WaitGroup
	for i, p := range producers {
		hists[i] = newHistogram()
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, mu := hists[i], &histMu[i]
			// Each request goes to the producer's next topic (the SDK
			// keeps a round-robin position per topic, so each topic's
			// sends still go round all its queues).
			turn := 0
			nextTopic := func() string {
				t := topicsOf[i][turn%len(topicsOf[i])]
				turn++
				return t
			}
			sendOne := func(k int, topic string) {
				t0 := time.Now()
				var err error
				if k == 1 {
					_, err = p.Send(ctx, newMsg(topic), sendOpts...)
				} else {
					msgs := make([]*client.Message, k)
					for j := range msgs {
						msgs[j] = newMsg(topic)
					}
					_, err = p.SendBatch(ctx, msgs, sendOpts...)
				}
				lat := time.Since(t0)
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				h.record(lat)
				mu.Unlock()
				acked.Add(int64(k))
			}
			if !f.async {
				for k := claim(); k > 0 && pace(k); k = claim() {
					sendOne(k, nextTopic())
				}
				return
			}
			// Asynchronous: up to --inflight requests at once, each timed
			// from when it is sent (not from when it waited for a slot).
			sem := make(chan struct{}, f.inflight)
			var inner sync.WaitGroup
			for k := claim(); k > 0 && pace(k); k = claim() {
				sem <- struct{}{}
				inner.Add(1)
				topic := nextTopic()
				go func() {
					defer func() { <-sem; inner.Done() }()
					sendOne(k, topic)
				}()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	if a.ctx.Err() != nil {
		a.handledInterrupt = true // report what was measured until Ctrl-C
	}
	h := newHistogram()
	for _, x := range hists {
		h.merge(x)
	}
	n := acked.Load()
	out := benchJSON{Bench: "produce", Topic: f.topic, Topics: f.topics, Clients: f.producers, Transport: f.transport.name, Size: f.size,
		Batch: f.batch, Async: f.async, DelayLevel: f.delayLevel, Messages: n, Bytes: n * int64(f.size), Errors: errs.Load(),
		Seconds: elapsed.Seconds(), Latency: h.summary(), LatencyKind: "ack"}
	if f.delay > 0 {
		out.Delay = f.delay.String()
	}
	out.MsgsPerSec, out.MiBPerSec = rates(n, out.Bytes, elapsed)
	if firstErr != nil {
		out.FirstError = oneLine(firstErr.Error())
	}
	if n == 0 && firstErr != nil {
		return forTopic(f.topic, fmt.Errorf("no message was sent: %w", firstErr))
	}
	return a.printBench(out)
}

// startProducers starts n producers, each its own client, a few at a time
// (a thousand started one after another take a while).
func (a *app) startProducers(n int, transport client.Option) ([]*client.Producer, error) {
	producers := make([]*client.Producer, n)
	err := forEachLimited(n, 16, func(i int) error {
		p, err := client.NewProducer("bolide-bench", a.producerOptions(transport)...)
		if err != nil {
			return err
		}
		a.onClose(p.Close)
		if err := p.Start(a.ctx); err != nil {
			return err
		}
		producers[i] = p
		return nil
	})
	return producers, err
}

// forEachLimited calls fn(0) … fn(n-1), at most limit at a time, and
// returns the first error (the calls not yet begun are then skipped).
func forEachLimited(n, limit int, fn func(i int) error) error {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for range min(n, limit) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				mu.Lock()
				failed := firstErr != nil
				mu.Unlock()
				if failed {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func rates(msgs, bytes int64, elapsed time.Duration) (float64, float64) {
	s := elapsed.Seconds()
	if s <= 0 {
		return 0, 0
	}
	return float64(msgs) / s, float64(bytes) / s / (1 << 20)
}

type benchConsumeFlags struct {
	topic     string
	group     string
	groups    int
	count     int
	duration  time.Duration
	consumers int
	idle      time.Duration
	pullBatch int
	sql       string
	pop       bool
	invisible time.Duration
	transport *benchTransport
}

func newBenchConsumeCmd(a *app, tr *benchTransport) *cobra.Command {
	f := &benchConsumeFlags{transport: tr}
	c := &cobra.Command{
		Use:   "consume --topic TOPIC [--count N | --duration D] [--consumers N] [--groups N]",
		Short: "Read a topic's backlog with a fresh group and report throughput and end-to-end latency",
		Long: `Read the messages already stored in a topic (the backlog when the command starts, or
--count messages) with a fresh consumer group starting from the first message, and report
messages/s, MiB/s of bodies, and end-to-end latency: from each message's born timestamp
(set by its producer, in milliseconds) to its receipt — for an old backlog this is mostly
the backlog's age. Offsets are not committed. Progress goes to stderr (not with -o json).

--groups N reads with N fresh groups at once, GROUP-0 … GROUP-(N-1) (GROUP: --group, or
bolide-bench-<time>), each of --consumers consumers and each reading the whole backlog (or
--count messages), as N applications subscribed to one topic would: the figures are then
for all groups together (N times the backlog), with each group's rate (its messages over
the time from its first receipt to its last) as median, least and most. A group that has
read its share closes its consumers; one that receives nothing for --idle stops. With
--groups above 1 each queue of a consumer buffers at most four pulls (4 × --pull-batch
messages), so that a thousand groups fit in memory.

--sql COND subscribes with an SQL92 condition, evaluated by the broker: messages/s are then
the matching messages received, and "scanned" the backlog when the command starts over the
same time, the rate at which the broker went through it; both are timed from the consumers'
start (not the first receipt) to the last receipt. With --count give the number of matches
expected, else the command ends --idle after the last.

With --pop the consumers are simple consumers (POP, as RocketMQ 5's): each receives up to
--pull-batch messages at a time, invisible for --invisible, and acknowledges them in one
request per broker group; messages it could not acknowledge count as errors.`,
		Example: `  bolide bench produce --topic bench --count 100000
  bolide bench consume --topic bench
  bolide bench consume --topic bench --consumers 2 --count 50000 -o json
  bolide bench consume --topic bench --groups 1000
  bolide bench produce --topic bench --count 1000000 --buckets 100
  bolide bench consume --topic bench --sql "bucket = 7" --count 10000
  bolide bench consume --topic bench --consumers 4 --pop`,
		Args: exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error { return a.runBenchConsume(f) },
	}
	fs := c.Flags()
	fs.StringVarP(&f.topic, "topic", "t", "", "topic to read (required)")
	fs.StringVarP(&f.group, "group", "g", "", "consumer group, or with --groups the prefix of the groups' names (default: a fresh bolide-bench-<time>)")
	fs.IntVar(&f.groups, "groups", 1, "fresh groups reading the backlog at once, each all of it")
	fs.IntVarP(&f.count, "count", "c", 0, "messages each group reads (default: the backlog when the command starts)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long")
	fs.IntVar(&f.consumers, "consumers", 1, "concurrent consumers of each group (each its own client)")
	fs.DurationVar(&f.idle, "idle", 5*time.Second, "stop when nothing arrives for this long")
	fs.IntVar(&f.pullBatch, "pull-batch", 32, "messages asked for per pull request (the broker caps it: 1024 unless configured)")
	fs.StringVar(&f.sql, "sql", "", `read through an SQL92 filter evaluated by the broker, e.g. "bucket = 7"`)
	fs.BoolVar(&f.pop, "pop", false, "consume over POP with simple consumers (receive, acknowledge)")
	fs.DurationVar(&f.invisible, "invisible", 30*time.Second, "with --pop: how long received messages stay invisible")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

// validate checks the flags (no cluster needed).
func (f *benchConsumeFlags) validate() error {
	switch {
	case f.topic == "":
		return usageErrorf("--topic is required")
	case f.count < 0 || f.duration < 0 || f.idle <= 0:
		return usageErrorf("--count and --duration must not be negative, --idle must be positive")
	case f.consumers < 1 || f.pullBatch < 1:
		return usageErrorf("--consumers and --pull-batch must be positive")
	case f.groups < 1:
		return usageErrorf("--groups must be positive")
	case f.pop && f.sql != "":
		return usageErrorf("--sql and --pop do not go together (simple consumers filter by tag)")
	case f.pop && (f.invisible <= 0 || f.invisible > client.MaxInvisibleDuration):
		return usageErrorf("--invisible must be in (0, %s], not %s", client.MaxInvisibleDuration, f.invisible)
	}
	if f.group == "" {
		return nil
	}
	last := f.group
	if f.groups > 1 {
		last = benchName(f.group, f.groups-1)
	}
	if err := message.ValidateGroup(last); err != nil {
		return usageErrorf("--group: %v", err)
	}
	return nil
}

// groupNames names the groups of a run: --group (or a fresh name), or with
// --groups N that name followed by -0 … -(N-1).
func (f *benchConsumeFlags) groupNames(now time.Time) []string {
	base := f.group
	if base == "" {
		base = fmt.Sprintf("bolide-bench-%d", now.UnixMilli())
	}
	if f.groups == 1 {
		return []string{base}
	}
	out := make([]string, f.groups)
	for i := range out {
		out[i] = benchName(base, i)
	}
	return out
}

// benchPoll is one consumer of a bench consume run: it returns the next
// messages, or context.DeadlineExceeded when none came before ctx ended.
type benchPoll func(ctx context.Context) ([]*client.MessageExt, error)

// benchGroup is one group of a bench consume run.
type benchGroup struct {
	name     string
	polls    []benchPoll
	closers  []func() error
	received atomic.Int64
	first    atomic.Int64 // unix nanos of the group's first receipt
	last     atomic.Int64
}

// close closes the group's consumers (each once: they are also on the
// app's close list).
func (g *benchGroup) close() {
	for _, c := range g.closers {
		_ = c()
	}
}

// ackTally counts the messages POP consumers could not acknowledge.
type ackTally struct {
	errors atomic.Int64
	first  atomic.Value // string
}

// newPoll starts one consumer of group and returns its poll function and
// its close function (also registered with the app).
func (a *app) newPoll(f *benchConsumeFlags, group string, transport client.Option, acks *ackTally) (benchPoll, func() error, error) {
	if f.pop {
		c, err := client.NewSimpleConsumer(group, map[string]string{f.topic: "*"}, f.idle, a.clientOption())
		if err != nil {
			return nil, nil, err
		}
		closeOnce := sync.OnceValue(c.Close)
		a.onClose(closeOnce)
		if err := c.Start(a.ctx); err != nil {
			return nil, nil, forTopic(f.topic, err)
		}
		poll := func(ctx context.Context) ([]*client.MessageExt, error) {
			views, err := c.Receive(ctx, f.pullBatch, f.invisible)
			if err != nil {
				return nil, err
			}
			if len(views) == 0 {
				return nil, context.DeadlineExceeded
			}
			if err := c.Ack(context.WithoutCancel(ctx), views...); err != nil {
				n := 1
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					n = len(j.Unwrap())
				}
				acks.errors.Add(int64(n))
				acks.first.CompareAndSwap(nil, err.Error())
			}
			msgs := make([]*client.MessageExt, len(views))
			for i, v := range views {
				msgs[i] = &v.MessageExt
			}
			return msgs, nil
		}
		return poll, closeOnce, nil
	}
	opts := []client.ConsumerOption{transport, client.WithConsumeFrom(client.ConsumeFromFirst), client.WithAutoCommit(false),
		client.WithPollBatchSize(max(256, f.pullBatch)), client.WithPullBatchSize(f.pullBatch)}
	if f.groups > 1 {
		opts = append(opts, client.WithPullThreshold(4*f.pullBatch, 64<<20))
	}
	c, err := client.NewPullConsumer(group, a.consumerOptions(opts...)...)
	if err != nil {
		return nil, nil, err
	}
	closeOnce := sync.OnceValue(c.Close)
	a.onClose(closeOnce)
	sel := client.ByTag("*")
	if f.sql != "" {
		sel = client.SQL92(f.sql)
	}
	if err := c.SubscribeSelector(f.topic, sel); err != nil {
		if errors.Is(err, client.ErrSubscriptionParse) {
			return nil, nil, usageErrorf("--sql: %v", err)
		}
		return nil, nil, forTopic(f.topic, err)
	}
	if err := c.Start(a.ctx); err != nil {
		return nil, nil, err
	}
	return c.Poll, closeOnce, nil
}

func (a *app) runBenchConsume(f *benchConsumeFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	transport, err := f.transport.option()
	if err != nil {
		return err
	}
	names := f.groupNames(time.Now())
	target := int64(f.count) // per group
	var backlog int64
	if target == 0 || f.sql != "" {
		adm, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx()
		qs, err := adm.QueueStatus(ctx, f.topic)
		cancel()
		if err != nil {
			return forTopic(f.topic, err)
		}
		for _, q := range qs {
			backlog += q.MaxOffset - q.MinOffset
		}
		if target == 0 && f.sql != "" {
			target = math.MaxInt64 // matches unknown: until idle
		} else if target == 0 {
			target = backlog
		}
		if backlog == 0 {
			return fmt.Errorf("topic %s is empty: fill it first, e.g. with 'bolide bench produce --topic %s'", f.topic, f.topic)
		}
	} else if err := a.checkTopic(f.topic); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	if f.duration > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, f.duration)
		defer c2()
	}
	started := time.Now()
	groups := make([]*benchGroup, len(names))
	for i, name := range names {
		groups[i] = &benchGroup{name: name, polls: make([]benchPoll, f.consumers), closers: make([]func() error, f.consumers)}
	}
	var (
		acks     ackTally
		received atomic.Int64
		bytes    atomic.Int64
		first    atomic.Int64 // unix nanos of the first receipt
		lastNs   atomic.Int64
		done     atomic.Int64 // groups finished
	)
	stopProgress := a.progress(func() string {
		var s string
		if target == math.MaxInt64 {
			s = fmt.Sprintf("received %d msgs", received.Load())
		} else {
			s = fmt.Sprintf("received %d/%d msgs", received.Load(), target*int64(len(groups)))
		}
		if len(groups) > 1 {
			s += fmt.Sprintf(", %d/%d groups done", done.Load(), len(groups))
		}
		return s
	}, received.Load)
	hists := make([]*histogram, len(groups)*f.consumers)
	var wg sync.WaitGroup
	// run starts reading with the group's consumers.
	run := func(gi int, g *benchGroup) {
		gctx, gcancel := context.WithCancel(ctx)
		var gwg sync.WaitGroup
		for ci, poll := range g.polls {
			h := newHistogram()
			hists[gi*f.consumers+ci] = h
			gwg.Add(1)
			go func() {
				defer gwg.Done()
				for gctx.Err() == nil {
					pctx, pcancel := context.WithTimeout(gctx, f.idle)
					msgs, err := poll(pctx)
					pcancel()
					if err != nil {
						if gctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
							gcancel() // idle: the group's backlog is read
						}
						return
					}
					now := time.Now()
					first.CompareAndSwap(0, now.UnixNano())
					lastNs.Store(now.UnixNano())
					g.first.CompareAndSwap(0, now.UnixNano())
					g.last.Store(now.UnixNano())
					var nb int64
					for _, m := range msgs {
						h.record(now.Sub(m.BornTimestamp))
						nb += int64(len(m.Body))
					}
					bytes.Add(nb)
					received.Add(int64(len(msgs)))
					if g.received.Add(int64(len(msgs))) >= target {
						gcancel()
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			gwg.Wait()
			gcancel()
			if len(groups) > 1 {
				g.close() // free its connections while the others read
			}
			done.Add(1)
		}()
	}
	// A thousand groups are started a few at a time; each reads as soon as
	// its consumers have started, while the next ones start.
	ready := make([]atomic.Int32, len(groups)) // consumers started, by group
	err = forEachLimited(len(names)*f.consumers, 16, func(i int) error {
		gi := i / f.consumers
		g := groups[gi]
		poll, closeFn, err := a.newPoll(f, g.name, transport, &acks)
		if err != nil {
			return err
		}
		g.polls[i%f.consumers], g.closers[i%f.consumers] = poll, closeFn
		if int(ready[gi].Add(1)) == f.consumers {
			run(gi, g)
		}
		return nil
	})
	if err != nil {
		cancel()
		wg.Wait()
		stopProgress()
		return err
	}
	wg.Wait()
	stopProgress()
	if a.ctx.Err() != nil {
		a.handledInterrupt = true
	}
	h := newHistogram()
	for _, x := range hists {
		h.merge(x)
	}
	n := received.Load()
	var elapsed time.Duration
	if f.sql != "" && first.Load() > 0 {
		// Through a filter the first match may come only when the broker
		// has gone through much of the backlog: timed from the start.
		first.Store(started.UnixNano())
	}
	if f0 := first.Load(); f0 > 0 {
		elapsed = time.Duration(lastNs.Load() - f0)
	}
	out := benchJSON{Bench: "consume", Topic: f.topic, Group: names[0], Clients: len(groups) * f.consumers, Transport: f.transport.name,
		Messages: n, Bytes: bytes.Load(), Seconds: elapsed.Seconds(), Latency: h.summary(), LatencyKind: "end-to-end", Errors: acks.errors.Load()}
	if len(groups) > 1 {
		out.Group = strings.TrimSuffix(names[0], "-0")
		out.Groups = len(groups)
		var from int64
		if f.sql != "" {
			from = started.UnixNano()
		}
		out.PerGroup = groupFields(groups, target, from)
	}
	if f.pop {
		out.Pop, out.Transport = true, "grpc" // POP calls go over gRPC
		if e, ok := acks.first.Load().(string); ok {
			out.FirstError = oneLine(e)
		}
	}
	out.MsgsPerSec, out.MiBPerSec = rates(n, out.Bytes, elapsed)
	if f.sql != "" {
		out.SQL = &SQLFields{Condition: f.sql, Scanned: backlog}
		out.SQL.ScannedPerSec, _ = rates(backlog, 0, elapsed)
	}
	if n == 0 {
		return fmt.Errorf("no message received from %s within %v", f.topic, f.idle)
	}
	return a.printBench(out)
}

// groupFields sums up the groups of a run: each group's messages and rate
// (timed from its first receipt, or from from if not 0, to its last; the
// rates are those of the groups that received in more than one poll).
func groupFields(groups []*benchGroup, target int64, from int64) *GroupFields {
	g := &GroupFields{MinMessages: math.MaxInt64}
	rates := make([]float64, 0, len(groups))
	for _, x := range groups {
		n := x.received.Load()
		g.MinMessages = min(g.MinMessages, n)
		g.MaxMessages = max(g.MaxMessages, n)
		if n >= target {
			g.Complete++
		}
		f0 := x.first.Load()
		if from != 0 && f0 != 0 {
			f0 = from
		}
		// A group that got everything in one poll has no rate of its own.
		if d := time.Duration(x.last.Load() - f0); f0 != 0 && d > 0 {
			rates = append(rates, float64(n)/d.Seconds())
		}
	}
	if len(rates) == 0 {
		return g
	}
	sort.Float64s(rates)
	g.MinMsgsPerSec, g.MaxMsgsPerSec = rates[0], rates[len(rates)-1]
	g.MedianMsgsPerSec = rates[len(rates)/2]
	if len(rates)%2 == 0 {
		g.MedianMsgsPerSec = (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
	}
	return g
}

// progress prints a progress line on stderr every second until the
// returned function is called (nothing with -o json). On a terminal the
// line is redrawn in place.
func (a *app) progress(status func() string, count func() int64) func() {
	if a.json() {
		return func() {}
	}
	tty := isTerminal(a.stderr)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		prev, prevT := count(), time.Now()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprint(a.stderr, "\r\033[K")
				}
				return
			case now := <-t.C:
				n := count()
				rate := float64(n-prev) / now.Sub(prevT).Seconds()
				prev, prevT = n, now
				line := fmt.Sprintf("bench: %s, %.0f msgs/s", status(), rate)
				if tty {
					fmt.Fprint(a.stderr, "\r\033[K"+line)
				} else {
					fmt.Fprintln(a.stderr, line)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

func (a *app) printBench(b benchJSON) error {
	if a.json() {
		return a.emit(b)
	}
	w := a.stdout
	switch b.Bench {
	case "produce":
		mode := "sync"
		if b.Async {
			mode = "async"
		}
		to := b.Topic
		if b.Topics > 0 {
			to = fmt.Sprintf("%d topics (%s … %s)", b.Topics, benchName(b.Topic, 0), benchName(b.Topic, b.Topics-1))
		}
		fmt.Fprintf(w, "Produced %d messages of %d bytes to %s in %.2fs: %d producer(s), batch %d, %s\n",
			b.Messages, b.Size, to, b.Seconds, b.Clients, b.Batch, mode)
	case "e2e":
		fmt.Fprintf(w, "Sent %d messages of %d bytes to %s at %.0f msgs/s for %.2fs and consumed them\n",
			b.Sent, b.Size, b.Topic, b.TargetRate, b.Seconds)
	default:
		kind := "consumer(s)"
		if b.Pop {
			kind = "simple consumer(s), POP"
		}
		if b.Groups > 1 {
			fmt.Fprintf(w, "Consumed %d messages (%s) from %s in %.2fs: %d groups (%s … %s) of %d %s\n",
				b.Messages, humanBytes(b.Bytes), b.Topic, b.Seconds, b.Groups, benchName(b.Group, 0), benchName(b.Group, b.Groups-1),
				b.Clients/b.Groups, kind)
			break
		}
		fmt.Fprintf(w, "Consumed %d messages (%s) from %s in %.2fs: %d %s, group %s\n",
			b.Messages, humanBytes(b.Bytes), b.Topic, b.Seconds, b.Clients, kind, b.Group)
	}
	t := &table{} // no header: label and value rows
	t.row("Throughput:", fmt.Sprintf("%.0f msgs/s, %.2f MiB/s", b.MsgsPerSec, b.MiBPerSec))
	switch {
	case b.Delay != "":
		t.row("Delay:", "timer messages, delivered "+b.Delay+" after they are stored")
	case b.DelayLevel > 0:
		t.row("Delay:", fmt.Sprintf("delay level %d", b.DelayLevel))
	}
	if g := b.PerGroup; g != nil {
		t.row("Per group:", fmt.Sprintf("%.0f msgs/s median (min %.0f, max %.0f); %d to %d messages; %d of %d groups read all",
			g.MedianMsgsPerSec, g.MinMsgsPerSec, g.MaxMsgsPerSec, g.MinMessages, g.MaxMessages, g.Complete, b.Groups))
	}
	if b.SQL != nil {
		t.row("SQL92 filter:", fmt.Sprintf("%s: backlog of %d scanned at %.0f msgs/s", b.SQL.Condition, b.SQL.Scanned, b.SQL.ScannedPerSec))
	}
	t.row("Transport:", b.Transport)
	if b.Bench == "e2e" {
		t.row("Received:", fmt.Sprintf("%d (%d missing)", b.Messages, b.Missing))
	}
	t.row(strings.ToUpper(b.LatencyKind[:1])+b.LatencyKind[1:]+" latency:", fmtLatency(b.Latency))
	if b.Bench == "e2e" {
		t.row("Sends started late:", fmtLatency(b.SendLag))
	}
	t.row("Errors:", b.Errors)
	if b.FirstError != "" {
		t.row("First error:", b.FirstError)
	}
	return t.write(w)
}

func fmtMs(v float64) string { return fmt.Sprintf("%.3fms", v) }

// fmtLatency writes a latency summary on one line.
func fmtLatency(l latencyJSON) string {
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  p99.9 %s  (min %s, mean %s, max %s; %d samples)",
		fmtMs(l.P50), fmtMs(l.P90), fmtMs(l.P99), fmtMs(l.P999), fmtMs(l.Min), fmtMs(l.Mean), fmtMs(l.Max), l.Count)
}
