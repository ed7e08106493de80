package main

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

// benchName is the i-th topic or group of a bench run over many:
// PREFIX-i, as bench create-topics makes topics, bench produce --topics
// sends to them and bench consume --groups names its groups.
func benchName(prefix string, i int) string { return prefix + "-" + strconv.Itoa(i) }

// checkTopicPrefix checks that PREFIX-0 … PREFIX-(n-1) are valid topic
// names: the longest is the last.
func checkTopicPrefix(prefix string, n int) error {
	if err := message.ValidateTopic(benchName(prefix, max(n-1, 0))); err != nil {
		return usageErrorf("--topic %q with --topics %d: %v", prefix, n, err)
	}
	return nil
}

type benchCreateTopicsFlags struct {
	topic       string
	topics      int
	queues      int
	concurrency int
}

// createTopicsJSON is what bench create-topics prints with -o json.
type createTopicsJSON struct {
	Bench       string  `json:"bench"`
	Topic       string  `json:"topic"` // the prefix
	Topics      int     `json:"topics"`
	Queues      int     `json:"queues"`
	Concurrency int     `json:"concurrency"`
	Created     int64   `json:"created"`
	Existing    int64   `json:"existing"`
	Errors      int64   `json:"errors"`
	Seconds     float64 `json:"seconds"`
	// TopicsPerSec counts the topics created or found existing.
	TopicsPerSec float64 `json:"topicsPerSec"`
	// Tenths are the rates of each tenth of the run, by completion: how
	// the cost of one more topic grows with the topics already there.
	Tenths     []tenthJSON `json:"tenths"`
	Latency    latencyJSON `json:"latencyMs"`
	FirstError string      `json:"firstError,omitempty"`
}

// tenthJSON is one tenth of a create-topics run: the topics that completed
// in it (up to Done in all) and how long it took.
type tenthJSON struct {
	Done         int64   `json:"done"`
	Seconds      float64 `json:"seconds"`
	TopicsPerSec float64 `json:"topicsPerSec"`
}

func newBenchCreateTopicsCmd(a *app) *cobra.Command {
	f := &benchCreateTopicsFlags{}
	c := &cobra.Command{
		Use:   "create-topics --topic PREFIX --topics N [--queues Q] [--concurrency C]",
		Short: "Create many topics at once (PREFIX-0 … PREFIX-N-1) and report how fast",
		Long: `Create the topics PREFIX-0 … PREFIX-N-1, --queues queues each on every master (as
'topic create' does), --concurrency at a time through one admin client, and report the
topics created per second, the latency of one creation (from the request to the moment
every NameServer routes the topic, as 'topic create' waits), and the rate of each tenth of
the run, which shows how the cost of one more topic grows with the topics already there.
Topics that exist already are counted, not created again, so a run can be resumed. Then
'bench produce --topic PREFIX --topics N' spreads its messages over them. Progress goes to
stderr (not with -o json).`,
		Example: `  bolide bench create-topics --topic scale --topics 10000 --queues 8
  bolide bench produce --topic scale --topics 10000 --producers 1000 --count 200000
  bolide bench create-topics --topic scale --topics 1000 --concurrency 64 -o json`,
		Args: exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error { return a.runBenchCreateTopics(f) },
	}
	fs := c.Flags()
	fs.StringVarP(&f.topic, "topic", "t", "", "prefix of the topics' names: PREFIX-0 … PREFIX-N-1 (required)")
	fs.IntVar(&f.topics, "topics", 0, "topics to create (required)")
	fs.IntVar(&f.queues, "queues", 8, "read and write queues of each topic on each broker")
	fs.IntVar(&f.concurrency, "concurrency", 32, "creations in flight at once")
	return c
}

// validate checks the flags (no cluster needed).
func (f *benchCreateTopicsFlags) validate() error {
	switch {
	case f.topic == "":
		return usageErrorf("--topic is required (the prefix of the topics' names)")
	case f.topics < 1:
		return usageErrorf("--topics must be positive")
	case f.queues < 1 || f.queues > 1024:
		return usageErrorf("--queues must be in 1..1024")
	case f.concurrency < 1:
		return usageErrorf("--concurrency must be positive")
	}
	return checkTopicPrefix(f.topic, f.topics)
}

func (a *app) runBenchCreateTopics(f *benchCreateTopicsFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	adm, err := a.adminClient()
	if err != nil {
		return err
	}
	var (
		next, created, existing, errs atomic.Int64
		mu                            sync.Mutex
		firstErr                      error
		doneAt                        = make([]time.Duration, 0, f.topics) // completion times, in order
		hist                          = newHistogram()
	)
	stopProgress := a.progress(func() string {
		return fmt.Sprintf("created %d/%d topics (%d existed)", created.Load()+existing.Load(), f.topics, existing.Load())
	}, func() int64 { return created.Load() + existing.Load() })
	start := time.Now()
	var wg sync.WaitGroup
	for range min(f.concurrency, f.topics) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a.ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= f.topics {
					return
				}
				name := benchName(f.topic, i)
				ctx, cancel := a.opCtx()
				t0 := time.Now()
				err := adm.CreateTopic(ctx, client.TopicSpec{Name: name, Queues: f.queues})
				lat := time.Since(t0)
				cancel()
				switch {
				case err == nil:
					created.Add(1)
				case errors.Is(err, client.ErrTopicExists):
					existing.Add(1)
				default:
					if a.ctx.Err() != nil {
						return
					}
					errs.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s: %w", name, err)
					}
					mu.Unlock()
					continue
				}
				mu.Lock()
				hist.record(lat)
				doneAt = append(doneAt, time.Since(start))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	if a.ctx.Err() != nil {
		a.handledInterrupt = true
	}
	out := createTopicsJSON{Bench: "create-topics", Topic: f.topic, Topics: f.topics, Queues: f.queues, Concurrency: f.concurrency,
		Created: created.Load(), Existing: existing.Load(), Errors: errs.Load(), Seconds: elapsed.Seconds(),
		Tenths: tenths(doneAt), Latency: hist.summary()}
	if s := elapsed.Seconds(); s > 0 {
		out.TopicsPerSec = float64(out.Created+out.Existing) / s
	}
	if firstErr != nil {
		out.FirstError = oneLine(firstErr.Error())
	}
	if out.Created+out.Existing == 0 && firstErr != nil {
		return fmt.Errorf("no topic was created: %w", firstErr)
	}
	if a.json() {
		return a.emit(out)
	}
	w := a.stdout
	fmt.Fprintf(w, "Created %d topics of %d queues (%s … %s) in %.2fs, %d at a time\n", out.Created, f.queues,
		benchName(f.topic, 0), benchName(f.topic, f.topics-1), out.Seconds, f.concurrency)
	t := &table{}
	t.row("Rate:", fmt.Sprintf("%.1f topics/s", out.TopicsPerSec))
	if n := len(out.Tenths); n > 0 {
		t.row("By tenth:", fmt.Sprintf("first %.1f topics/s, last %.1f topics/s", out.Tenths[0].TopicsPerSec, out.Tenths[n-1].TopicsPerSec))
	}
	l := out.Latency
	t.row("Create latency:", fmt.Sprintf("p50 %s  p90 %s  p99 %s  (max %s; %d samples)", fmtMs(l.P50), fmtMs(l.P90), fmtMs(l.P99), fmtMs(l.Max), l.Count))
	t.row("Existing:", out.Existing)
	t.row("Errors:", out.Errors)
	if out.FirstError != "" {
		t.row("First error:", out.FirstError)
	}
	return t.write(w)
}

// tenths splits completion times (ascending, from the start) into ten
// consecutive parts of (nearly) equal counts and gives each one's rate.
// Fewer than ten completions give one part each.
func tenths(doneAt []time.Duration) []tenthJSON {
	n := len(doneAt)
	parts := min(10, n)
	out := make([]tenthJSON, 0, parts)
	var prevIdx int
	var prevT time.Duration
	for k := 1; k <= parts; k++ {
		idx := k * n / parts // completions up to here
		t := doneAt[idx-1]
		d := t - prevT
		tj := tenthJSON{Done: int64(idx), Seconds: d.Seconds()}
		if d > 0 {
			tj.TopicsPerSec = float64(idx-prevIdx) / d.Seconds()
		}
		out = append(out, tj)
		prevIdx, prevT = idx, t
	}
	return out
}
