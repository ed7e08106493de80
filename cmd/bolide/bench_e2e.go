package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/pace"
	"github.com/bolide-mq/bolide/message"
)

// benchSentProperty carries a message's scheduled send time (Unix
// nanoseconds) from the e2e producer to its consumer.
const benchSentProperty = "BENCH_SENT_NS"

type benchE2EFlags struct {
	topic     string
	size      int
	rate      int
	duration  time.Duration
	warmup    time.Duration
	inflight  int
	idle      time.Duration
	profile   string
	allocs    string
	transport *benchTransport
}

func newBenchE2ECmd(a *app, tr *benchTransport) *cobra.Command {
	f := &benchE2EFlags{transport: tr}
	c := &cobra.Command{
		Use:   "e2e --topic TOPIC [--rate N] [--duration D] [--size B] [--warmup D]",
		Short: "Send at a fixed rate while consuming and report end-to-end latency",
		Long: `Send --rate messages per second for --duration with one producer (up to --inflight
sends in flight) while one consumer of a fresh group reads them, and report the
end-to-end latency of each message: from the time it was scheduled to be sent to its
receipt by the consumer, so a producer that falls behind its schedule shows in the
figures. Messages scheduled during the first --warmup are delivered but not timed.
Each run tags its messages with a tag of its own, so other traffic on the topic is
not read. Offsets are not committed. Progress goes to stderr (not with -o json).`,
		Example: `  bolide topic create bench --queues 8
  bolide bench e2e --topic bench --rate 10000 --duration 30s
  bolide bench e2e --topic bench --rate 1000 --duration 10s --size 256 -o json`,
		Args: exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error { return a.runBenchE2E(f) },
	}
	fs := c.Flags()
	fs.StringVarP(&f.topic, "topic", "t", "", "topic to send to and read from (required; create it first)")
	fs.IntVar(&f.size, "size", 1024, "message body size in bytes")
	fs.IntVar(&f.rate, "rate", 10000, "messages per second to send")
	fs.DurationVar(&f.duration, "duration", 30*time.Second, "how long to send")
	fs.DurationVar(&f.warmup, "warmup", time.Second, "messages scheduled this early in the run are not timed")
	fs.IntVar(&f.inflight, "inflight", 1024, "sends in flight at most")
	fs.DurationVar(&f.idle, "idle", 5*time.Second, "after the last send, stop when nothing arrives for this long")
	fs.StringVar(&f.profile, "cpu-profile", "", "write a CPU profile of this process (producer and consumer) during the run to this file")
	fs.StringVar(&f.allocs, "alloc-profile", "", "write a profile of this process's allocations (producer and consumer) to this file after the run")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

// e2eRun is the state one e2e run shares between its producer and its
// consumer.
type e2eRun struct {
	f       *benchE2EFlags
	tag     string
	start   time.Time
	sent    atomic.Int64 // acknowledged sends
	errs    atomic.Int64
	recv    atomic.Int64
	sending atomic.Bool // false once every send has its outcome
	lastRx  atomic.Int64

	mu       sync.Mutex
	firstErr error
	ackHist  *histogram // under mu
	hist     *histogram // consumer goroutine only
	lagHist  *histogram // the sending goroutine only
}

func (r *e2eRun) fail(err error) {
	r.errs.Add(1)
	r.mu.Lock()
	if r.firstErr == nil {
		r.firstErr = err
	}
	r.mu.Unlock()
}

func (a *app) runBenchE2E(f *benchE2EFlags) error {
	switch {
	case f.topic == "":
		return usageErrorf("--topic is required")
	case f.size < 1 || f.size > message.DefaultMaxBodySize:
		return usageErrorf("--size must be in 1..%d", message.DefaultMaxBodySize)
	case f.rate < 1:
		return usageErrorf("--rate must be positive")
	case f.duration <= 0:
		return usageErrorf("--duration must be positive")
	case f.warmup < 0 || f.warmup >= f.duration:
		return usageErrorf("--warmup must be in [0, --duration)")
	case f.inflight < 1 || f.idle <= 0:
		return usageErrorf("--inflight and --idle must be positive")
	}
	transport, err := f.transport.option()
	if err != nil {
		return err
	}
	route, err := a.route(f.topic)
	if err != nil {
		return err
	}
	queues := 0
	for _, q := range route.Queues {
		queues += int(q.ReadQueues)
	}
	if queues == 0 {
		return fmt.Errorf("topic %s has no readable queue", f.topic)
	}
	now := time.Now()
	r := &e2eRun{f: f, tag: fmt.Sprintf("e2e-%d", now.UnixNano()), ackHist: newHistogram(), hist: newHistogram(),
		lagHist: newHistogram()}

	// The consumer reads from the run's start time and is given every queue
	// before the first send, so no message waits for a rebalance.
	cons, err := client.NewPullConsumer(fmt.Sprintf("bolide-bench-e2e-%d", now.UnixMilli()),
		a.consumerOptions(transport, client.WithConsumeFrom(client.ConsumeFromTimestamp(now)), client.WithAutoCommit(false),
			client.WithPollBatchSize(256))...)
	if err != nil {
		return err
	}
	if err := cons.Subscribe(f.topic, r.tag); err != nil {
		return err
	}
	if err := cons.Start(a.ctx); err != nil {
		return err
	}
	a.onClose(cons.Close)
	if err := a.waitAssignment(cons, queues); err != nil {
		return forTopic(f.topic, err)
	}
	prod, err := client.NewProducer("bolide-bench", a.producerOptions(transport, client.WithAsyncSendLimit(f.inflight))...)
	if err != nil {
		return err
	}
	if err := prod.Start(a.ctx); err != nil {
		return err
	}
	a.onClose(prod.Close)

	total := int64(float64(f.rate) * f.duration.Seconds())
	stopProgress := a.progress(func() string {
		return fmt.Sprintf("sent %d/%d, received %d msgs", r.sent.Load(), total, r.recv.Load())
	}, r.recv.Load)
	stopProfiles, err := startProfiles(f.profile, f.allocs)
	if err != nil {
		return err
	}
	defer stopProfiles()
	r.sending.Store(true)
	r.start = time.Now()
	sending, sendingOver := context.WithCancel(a.ctx)
	defer sendingOver()
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.e2eConsume(sending, cons, r)
	}()
	sendEnd := a.e2eProduce(prod, r, total)
	r.sending.Store(false)
	sendingOver()
	<-done
	stopProgress()
	if a.ctx.Err() != nil {
		a.handledInterrupt = true
	}

	n, sent := r.recv.Load(), r.sent.Load()
	secs := sendEnd.Sub(r.start).Seconds()
	out := benchJSON{Bench: "e2e", Topic: f.topic, Clients: 1, Transport: f.transport.name, Size: f.size, Messages: n, Bytes: n * int64(f.size),
		Errors: r.errs.Load(), Seconds: secs, Latency: r.hist.summary(), LatencyKind: "end-to-end",
		E2EFields: &E2EFields{TargetRate: float64(f.rate), Sent: sent, Missing: max(sent-n, 0), AckLatency: r.ackHist.summary(),
			SendLag: r.lagHist.summary()}}
	if secs > 0 {
		out.MsgsPerSec = float64(sent) / secs
		out.MiBPerSec = out.MsgsPerSec * float64(f.size) / (1 << 20)
	}
	if r.firstErr != nil {
		out.FirstError = oneLine(r.firstErr.Error())
	}
	if sent == 0 && r.firstErr != nil {
		return forTopic(f.topic, fmt.Errorf("no message was sent: %w", r.firstErr))
	}
	return a.printBench(out)
}

// waitAssignment waits, at most --timeout, until the consumer holds all of
// the topic's queues.
func (a *app) waitAssignment(c *client.PullConsumer, queues int) error {
	ctx, cancel := a.opCtx()
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for len(c.Assignment()) < queues {
		select {
		case <-ctx.Done():
			if a.ctx.Err() != nil {
				return a.ctx.Err()
			}
			return fmt.Errorf("the consumer holds %d of %d queues after %v", len(c.Assignment()), queues, a.timeout)
		case <-t.C:
		}
	}
	return nil
}

// e2eProduce sends total messages on schedule (message i at start +
// i/rate) and returns when every send has its outcome; it returns the time
// the last send was made.
func (a *app) e2eProduce(p *client.Producer, r *e2eRun, total int64) time.Time {
	body := make([]byte, r.f.size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	perMsg := float64(time.Second) / float64(r.f.rate)
	timedFrom := r.start.Add(r.f.warmup)
	var wg sync.WaitGroup
	// The messages and their callbacks are reused once a send's outcome
	// is in (the SDK is done with a message when it calls back): the
	// bench's own garbage would add collections, which delay its sends
	// (docs/BENCHMARKS.md, "2026-12-07, morning"), while the SDK's
	// garbage is counted as an application would pay it.
	free := make(chan *e2eSend, r.f.inflight)
	var last time.Time
	for i := int64(0); i < total && a.ctx.Err() == nil; i++ {
		sched := r.start.Add(time.Duration(float64(i) * perMsg))
		pace.SleepUntil(a.ctx, sched)
		if !sched.Before(timedFrom) {
			r.lagHist.record(time.Since(sched))
		}
		var s *e2eSend
		select {
		case s = <-free:
		default:
			s = a.newE2ESend(r, body, timedFrom, &wg, free)
		}
		s.sched = sched
		s.msg.Properties[benchSentProperty] = strconv.FormatInt(sched.UnixNano(), 10)
		wg.Add(1)
		p.SendAsync(a.ctx, &s.msg, s.done)
		last = time.Now()
	}
	wg.Wait()
	return last
}

// e2eSend is one message of an end-to-end run with its callback, reused
// from one send to a later one.
type e2eSend struct {
	msg   client.Message
	sched time.Time
	done  func(*client.SendResult, error)
}

// newE2ESend makes a message whose callback records the send's outcome
// and then offers the message for reuse on free.
func (a *app) newE2ESend(r *e2eRun, body []byte, timedFrom time.Time, wg *sync.WaitGroup, free chan<- *e2eSend) *e2eSend {
	s := &e2eSend{msg: client.Message{Topic: r.f.topic, Tag: r.tag, Body: body, Properties: make(map[string]string, 1)}}
	s.done = func(_ *client.SendResult, err error) {
		defer wg.Done()
		sched := s.sched
		select {
		case free <- s:
		default:
		}
		if err != nil {
			if a.ctx.Err() == nil || !errors.Is(err, context.Canceled) {
				r.fail(err)
			}
			return
		}
		r.sent.Add(1)
		if !sched.Before(timedFrom) {
			d := time.Since(sched)
			r.mu.Lock()
			r.ackHist.record(d)
			r.mu.Unlock()
		}
	}
	return s
}

// e2eConsume times every message of the run until all acknowledged
// messages are in, or --idle passes without one once sending is over
// (sending ends). While sending it polls within sending itself, which
// costs a poll no context of its own.
func (a *app) e2eConsume(sending context.Context, c *client.PullConsumer, r *e2eRun) {
	timedFrom := r.start.Add(r.f.warmup).UnixNano()
	idleSince := time.Time{}
	for a.ctx.Err() == nil {
		if !r.sending.Load() {
			if r.recv.Load() >= r.sent.Load() {
				return
			}
			if idleSince.IsZero() {
				idleSince = time.Now()
			}
			if last := r.lastRx.Load(); last > idleSince.UnixNano() {
				idleSince = time.Unix(0, last)
			}
			if time.Since(idleSince) >= r.f.idle {
				return
			}
		}
		ctx, cancel := sending, context.CancelFunc(func() {})
		if sending.Err() != nil {
			ctx, cancel = context.WithTimeout(a.ctx, 100*time.Millisecond)
		}
		msgs, err := c.Poll(ctx)
		cancel()
		if err != nil && ctx.Err() != nil && a.ctx.Err() == nil {
			continue // sending ended, or the idle check is due
		}
		if err != nil {
			if a.ctx.Err() == nil {
				r.fail(fmt.Errorf("consume: %w", err))
			}
			return
		}
		now := time.Now()
		r.lastRx.Store(now.UnixNano())
		for _, m := range msgs {
			if m.Tag != r.tag {
				continue
			}
			r.recv.Add(1)
			sent, err := strconv.ParseInt(m.Properties[benchSentProperty], 10, 64)
			if err != nil || sent < timedFrom {
				continue
			}
			r.hist.record(now.Sub(time.Unix(0, sent)))
		}
	}
}

// startProfiles starts a CPU profile written to cpuPath; the returned
// function stops it and, with allocPath, writes there the allocations the
// process made since it started (empty paths: none).
func startProfiles(cpuPath, allocPath string) (func(), error) {
	stopCPU := func() {}
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		stopCPU = func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}
	}
	if allocPath == "" {
		return stopCPU, nil
	}
	f, err := os.Create(allocPath)
	if err != nil {
		stopCPU()
		return nil, fmt.Errorf("alloc profile: %w", err)
	}
	// The allocations profile counts from the process's start: what the
	// setup allocated is small beside a run's messages.
	return func() {
		stopCPU()
		runtime.GC() // the profile shows allocations up to the last collection
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			fmt.Fprintf(os.Stderr, "alloc profile: %v\n", err)
		}
		_ = f.Close()
	}, nil
}
