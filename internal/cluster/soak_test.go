package cluster

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// The soak run (make soak; not in CI): a NameServer and a broker as real
// processes, the Go SDK driving mixed traffic for BOLIDE_SOAK_DURATION (1 h)
// while the broker is restarted every BOLIDE_SOAK_RESTART_EVERY (10 min),
// kill -9 and SIGTERM in turn.
//
// Traffic, per second at BOLIDE_SOAK_RATE = R (100):
//   - plain: R sends to soak-plain; its consumer fails 2 % of first
//     deliveries, which come back through the retry topic;
//   - delay: R/5 sends to soak-delay, a third each with a delay level
//     (1–3 s), a delay (1–20 s) and a delivery time (1–20 s);
//   - txn: R/10 transactional sends to soak-txn: 60 % commit, 20 % roll
//     back, 20 % answer unknown and are decided by the check-back (half
//     commit, half roll back);
//   - retry: R/10 sends to soak-retry, whose consumer (max reconsume 2)
//     fails 10 % always (they reach %DLQ%soak-retry-cg, read by a consumer
//     of their own) and 20 % once.
//
// The broker is sampled every BOLIDE_SOAK_SAMPLE_EVERY (1 min): VmRSS and
// RssAnon (/proc/PID/status), goroutines (go_goroutines from its admin
// listener's /metrics) and open files (entries of /proc/PID/fd).
//
// The rule: a restarted broker starts small, so values are compared at the
// same phase of a restart cycle. The baseline is the sample taken just
// before the first restart (the first cycle's end: R_every of traffic on a
// fresh broker); the final sample is taken at the end of the last cycle
// (the duration is rounded up to whole cycles), when that broker has been
// up as long. Anonymous memory (RssAnon: heap, stacks), goroutines and
// open files at the end must each be within 10 % of the baseline. VmRSS is
// reported, not asserted, with RssFile: it also counts the resident pages
// of the mmap'd CommitLog, ConsumeQueue and index files, which follow the
// data and what recovery read, and which the kernel reclaims at will.
//
// Then the producers stop and, within BOLIDE_SOAK_DRAIN (2 min), every
// acknowledged message must have been consumed (the "always fail" ones
// from the DLQ) and no rolled-back one; none may arrive before its delay.
// Duplicates (redeliveries after a kill -9) are counted, not failed.
// BOLIDE_SOAK_CSV writes the samples as CSV.

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// soakLevels are the broker's delay levels: level n waits n seconds (retries
// wait 3 s, 4 s, ...).
const soakLevels = "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s"

// ledger tracks one stream: what was acknowledged, what was consumed.
type ledger struct {
	name      string
	mu        sync.Mutex
	acked     []bool
	seen      []bool
	notBefore []int64 // unix ns: no delivery before (0: any time)
	mustNot   []bool  // must never be consumed (rolled back)
	sendErrs  atomic.Int64
	early     int
	forbidden int
	dups      int
	stray     int
}

func (l *ledger) grow(seq int64) {
	for int64(len(l.acked)) <= seq {
		l.acked = append(l.acked, false)
		l.seen = append(l.seen, false)
		l.notBefore = append(l.notBefore, 0)
		l.mustNot = append(l.mustNot, false)
	}
}

// sent records an acknowledged message.
func (l *ledger) sent(seq int64, notBefore time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grow(seq)
	l.acked[seq] = true
	if !notBefore.IsZero() {
		l.notBefore[seq] = notBefore.UnixNano()
	}
}

// forbid records that seq must never be consumed (its transaction rolls
// back), acknowledged or not.
func (l *ledger) forbid(seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grow(seq)
	l.mustNot[seq] = true
}

// consumed records a consumed message (body "<seq>:<padding>").
func (l *ledger) consumed(now time.Time, body []byte) {
	seq, ok := bodySeq(body)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		l.stray++
		return
	}
	l.grow(seq)
	if l.seen[seq] {
		l.dups++
		return
	}
	l.seen[seq] = true
	if nb := l.notBefore[seq]; nb != 0 && now.UnixNano() < nb {
		l.early++
	}
}

func bodySeq(body []byte) (int64, bool) {
	s, _, _ := strings.Cut(string(body), ":")
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0 && n < 1<<32
}

// check reports the acknowledged messages, those not consumed, and the
// consumed ones that must not be (for a rolled-back transaction an
// acknowledgement only says that its half message was stored).
func (l *ledger) check() (acked, lost, forbidden int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.acked {
		switch {
		case l.mustNot[i] && l.seen[i]:
			forbidden++
		case l.mustNot[i]:
		case l.acked[i]:
			acked++
			if !l.seen[i] {
				lost++
			}
		}
	}
	return acked, lost, forbidden
}

// soakSample is one reading of the broker process.
type soakSample struct {
	at, uptime  time.Duration
	label       string
	rss, anon   int64
	file        int64 // RssFile: resident pages of mapped files
	goroutines  int
	fds         int
	pid         int
	loadAverage string
}

type soakRig struct {
	t         *testing.T
	ns        *Proc
	broker    *Proc
	adminAddr string
	started   time.Time // the broker process's start
}

// soakBinaries makes the process harness use prebuilt binaries
// (BOLIDE_BIN, set by make soak) instead of building its own.
func soakBinaries() {
	if dir := os.Getenv("BOLIDE_BIN"); dir != "" {
		buildOnce.Do(func() { binDir = dir })
	}
}

func (r *soakRig) sample(start time.Time, label string) soakSample {
	s := soakSample{at: time.Since(start), uptime: time.Since(r.started), label: label, pid: r.broker.cmd.Process.Pid,
		goroutines: -1, fds: -1, loadAverage: loadAvg()}
	m := testutil.ProcMemory(s.pid)
	s.rss, s.anon, s.file = m.RSS, m.Anon, m.File
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.pid)); err == nil {
		s.fds = len(ents)
	}
	s.goroutines = r.goroutines()
	return s
}

// goroutines reads go_goroutines from the broker's admin listener.
func (r *soakRig) goroutines() int {
	n, ok := scrapeMetric(r.adminAddr, "go_goroutines")
	if !ok {
		return -1
	}
	return int(n)
}

// scrapeMetric reads one unlabelled metric from a daemon's admin listener.
func scrapeMetric(adminAddr, name string) (float64, bool) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + adminAddr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n, err == nil
		}
	}
	return 0, false
}

// restart stops the broker (kill -9 on odd restarts, SIGTERM on even ones)
// and starts it again on the same store; it returns how, and how long the
// broker was not serving.
func (r *soakRig) restart(n int) (string, time.Duration) {
	down := time.Now()
	how := "kill -9"
	if n%2 == 1 {
		r.broker.Kill()
	} else {
		how = fmt.Sprintf("SIGTERM (exit %d)", r.broker.Stop(60*time.Second))
	}
	r.broker.Restart()
	r.started = time.Now()
	return how, time.Since(down)
}

func soakClientOpts(ns string) client.Option {
	return client.WithOptions(client.WithNameServers(ns), client.WithRouteRefreshInterval(500*time.Millisecond))
}

func soakConsumer(t *testing.T, ns, group, topic string, fn client.ConcurrentListener, extra ...client.ConsumerOption) {
	t.Helper()
	opts := append([]client.ConsumerOption{soakClientOpts(ns), client.WithRebalanceInterval(time.Second),
		client.WithConsumeGoroutines(8), client.WithCommitInterval(200 * time.Millisecond),
		client.WithConsumeFrom(client.ConsumeFromFirst)}, extra...)
	c, err := client.NewPushConsumer(group, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, "*", fn); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
}

// soakTxn is the transactional stream's local transactions: the outcome of
// seq is fixed by seq, so the check-back gives the same answer after any
// restart.
type soakTxn struct{}

// soakTxnOutcome returns what the local transaction of seq answers first
// and how it ends.
func soakTxnOutcome(seq int64) (first, final client.LocalTransactionState) {
	switch seq % 10 {
	case 6, 7:
		return client.RollbackMessage, client.RollbackMessage
	case 8:
		return client.Unknown, client.CommitMessage
	case 9:
		return client.Unknown, client.RollbackMessage
	}
	return client.CommitMessage, client.CommitMessage
}

func (x soakTxn) ExecuteLocalTransaction(_ context.Context, msg *client.Message, _ any) client.LocalTransactionState {
	seq, _ := bodySeq(msg.Body)
	first, _ := soakTxnOutcome(seq)
	return first
}

func (x soakTxn) CheckLocalTransaction(_ context.Context, msg *client.MessageExt) client.LocalTransactionState {
	seq, _ := bodySeq(msg.Body)
	_, final := soakTxnOutcome(seq)
	return final
}

// pace calls send every 1/rate until ctx ends (no catching up after a
// stall: a restart does not turn into a burst).
func pace(ctx context.Context, wg *sync.WaitGroup, rate int, send func(seq int64)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
		defer tick.Stop()
		var seq int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			send(seq)
			seq++
		}
	}()
}

func soakBody(seq int64) []byte {
	return []byte(strconv.FormatInt(seq, 10) + ":" + strings.Repeat("s", 200+int(seq%7)*100))
}

func TestSoak(t *testing.T) {
	if os.Getenv("BOLIDE_SOAK") == "" {
		t.Skip("BOLIDE_SOAK=1 runs it (make soak)")
	}
	soakBinaries()
	every := envDuration("BOLIDE_SOAK_RESTART_EVERY", 10*time.Minute)
	duration := envDuration("BOLIDE_SOAK_DURATION", time.Hour)
	sampleEvery := envDuration("BOLIDE_SOAK_SAMPLE_EVERY", time.Minute)
	drain := envDuration("BOLIDE_SOAK_DRAIN", 2*time.Minute)
	rate := envInt("BOLIDE_SOAK_RATE", 100)
	cycles := int((duration + every - 1) / every)
	if cycles < 2 {
		t.Fatalf("BOLIDE_SOAK_DURATION %v must cover at least two restart cycles of %v", duration, every)
	}
	duration = time.Duration(cycles) * every
	t.Logf("soak: %v, broker restarted every %v (%d restarts), sampled every %v, %d plain msg/s", duration, every, cycles-1, sampleEvery, rate)

	r := &soakRig{t: t, adminAddr: freeAddr(t)}
	r.ns = StartProc(t, "bolide-nameserver", "--listen", "127.0.0.1:0", "--gossip", "off", "--admin-listen", "off")
	dir := t.TempDir()
	r.broker = StartProc(t, "bolide-broker", "--listen", freeAddr(t), "--namesrv", r.ns.Addr, "--store-dir", dir,
		"--register-interval", "1s", "--gossip", "off", "--log-level", "warn", "--admin-listen", r.adminAddr,
		"--delay-levels", soakLevels, "--transaction-timeout", "3s", "--transaction-check-interval", "5s")
	r.started = time.Now()
	streams := map[string]*ledger{}
	topics := []struct {
		name   string
		queues int32
	}{{"soak-plain", 4}, {"soak-delay", 4}, {"soak-txn", 2}, {"soak-retry", 2}, {message.DLQTopic("soak-retry-cg"), 1}}
	for _, tp := range topics {
		createTopicOn(t, r.broker.Addr, tp.name, tp.queues)
	}
	if err := Poll(15*time.Second, func() error {
		for _, tp := range topics {
			if len(routedTo(t, r.ns.Addr, tp.name)) != 1 {
				return fmt.Errorf("%s not routed", tp.name)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"plain", "delay", "txn", "retry"} {
		streams[n] = &ledger{name: n}
	}

	// Consumers.
	var retried, failedAlways atomic.Int64
	soakConsumer(t, r.ns.Addr, "soak-plain-cg", "soak-plain", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		m := msgs[0]
		if seq, _ := bodySeq(m.Body); seq%50 == 7 && m.ReconsumeTimes == 0 {
			retried.Add(1)
			return client.ConsumeRetryLater
		}
		streams["plain"].consumed(time.Now(), m.Body)
		return client.ConsumeSuccess
	})
	soakConsumer(t, r.ns.Addr, "soak-delay-cg", "soak-delay", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		streams["delay"].consumed(time.Now(), msgs[0].Body)
		return client.ConsumeSuccess
	})
	soakConsumer(t, r.ns.Addr, "soak-txn-cg", "soak-txn", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		streams["txn"].consumed(time.Now(), msgs[0].Body)
		return client.ConsumeSuccess
	})
	soakConsumer(t, r.ns.Addr, "soak-retry-cg", "soak-retry", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		m := msgs[0]
		switch seq, _ := bodySeq(m.Body); seq % 10 {
		case 0:
			failedAlways.Add(1)
			return client.ConsumeRetryLater
		case 1, 2:
			if m.ReconsumeTimes == 0 {
				return client.ConsumeRetryLater
			}
		}
		streams["retry"].consumed(time.Now(), m.Body)
		return client.ConsumeSuccess
	}, client.WithMaxReconsumeTimes(2))
	soakConsumer(t, r.ns.Addr, "soak-dlq-cg", message.DLQTopic("soak-retry-cg"), func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		streams["retry"].consumed(time.Now(), msgs[0].Body)
		return client.ConsumeSuccess
	})

	// Producers.
	p, err := client.NewProducer("soak-producer", soakClientOpts(r.ns.Addr), client.WithSendTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tp, err := client.NewTransactionProducer("soak-txn-producer", soakTxn{}, soakClientOpts(r.ns.Addr), client.WithSendTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var senders sync.WaitGroup
	send := func(l *ledger, topic string, seq int64, notBefore func(start time.Time) time.Time, opts ...client.SendOption) {
		start := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := p.Send(sctx, &client.Message{Topic: topic, Body: soakBody(seq)}, opts...); err != nil {
			l.sendErrs.Add(1)
			return
		}
		var nb time.Time
		if notBefore != nil {
			nb = notBefore(start)
		}
		l.sent(seq, nb)
	}
	pace(ctx, &senders, rate, func(seq int64) { send(streams["plain"], "soak-plain", seq, nil) })
	pace(ctx, &senders, max(rate/5, 1), func(seq int64) {
		d := time.Second + time.Duration(seq*7919%19000)*time.Millisecond // 1–20 s
		switch seq % 3 {
		case 0:
			level := int(seq%9/3) + 1 // 1–3: 1–3 s
			send(streams["delay"], "soak-delay", seq, func(s time.Time) time.Time { return s.Add(time.Duration(level) * time.Second) },
				client.WithDelayLevel(level))
		case 1:
			send(streams["delay"], "soak-delay", seq, func(s time.Time) time.Time { return s.Add(d) }, client.WithDelay(d))
		default:
			at := time.Now().Add(d)
			send(streams["delay"], "soak-delay", seq, func(time.Time) time.Time { return at }, client.WithDeliverAt(at))
		}
	})
	pace(ctx, &senders, max(rate/10, 1), func(seq int64) {
		l := streams["txn"]
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, final := soakTxnOutcome(seq); final == client.RollbackMessage {
			l.forbid(seq)
		}
		if _, err := tp.SendInTransaction(sctx, &client.Message{Topic: "soak-txn", Body: soakBody(seq)}, nil); err != nil {
			l.sendErrs.Add(1)
			return
		}
		l.sent(seq, time.Time{})
	})
	pace(ctx, &senders, max(rate/10, 1), func(seq int64) { send(streams["retry"], "soak-retry", seq, nil) })

	// Samples and restarts.
	start := time.Now()
	end := start.Add(duration)
	nextSample, nextRestart := start.Add(sampleEvery), start.Add(every)
	var samples, phase []soakSample
	logSample := func(s soakSample) {
		samples = append(samples, s)
		t.Logf("%8v  up %8v  pid %7d  VmRSS %9s  RssAnon %9s  RssFile %9s  goroutines %4d  fds %4d  load %s  %s",
			s.at.Round(time.Second), s.uptime.Round(time.Second), s.pid, mib(s.rss), mib(s.anon), mib(s.file), s.goroutines, s.fds, s.loadAverage, s.label)
	}
	for n := 1; ; {
		now := time.Now()
		switch {
		case !now.Before(end):
			s := r.sample(start, "end of the last cycle")
			logSample(s)
			phase = append(phase, s)
		case !now.Before(nextRestart):
			s := r.sample(start, fmt.Sprintf("end of cycle %d", n))
			logSample(s)
			phase = append(phase, s)
			how, down := r.restart(n)
			t.Logf("restart %d: %s, serving again after %v", n, how, down.Round(time.Millisecond))
			n++
			nextRestart = nextRestart.Add(every)
			for !nextSample.After(time.Now().Add(5 * time.Second)) {
				nextSample = nextSample.Add(sampleEvery) // not right after a restart
			}
			continue
		case !now.Before(nextSample):
			logSample(r.sample(start, ""))
			nextSample = nextSample.Add(sampleEvery)
			continue
		default:
			time.Sleep(min(time.Until(end), time.Until(nextRestart), time.Until(nextSample)))
			continue
		}
		break
	}
	stop()
	senders.Wait()

	if f := os.Getenv("BOLIDE_SOAK_CSV"); f != "" {
		var b strings.Builder
		b.WriteString("at_s,uptime_s,pid,vmrss_bytes,rssanon_bytes,rssfile_bytes,goroutines,fds,load1,label\n")
		for _, s := range samples {
			fmt.Fprintf(&b, "%.0f,%.0f,%d,%d,%d,%d,%d,%d,%s,%q\n", s.at.Seconds(), s.uptime.Seconds(), s.pid, s.rss, s.anon,
				s.file, s.goroutines, s.fds, strings.Fields(s.loadAverage + " ?")[0], s.label)
		}
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err == nil {
			err = os.WriteFile(f, []byte(b.String()), 0o644)
		}
	}

	// No acknowledged message lost, no rolled-back one delivered, none early.
	err = Poll(drain, func() error {
		for _, n := range []string{"plain", "delay", "txn", "retry"} {
			if _, lost, _ := streams[n].check(); lost > 0 {
				return fmt.Errorf("%s: %d not consumed yet", n, lost)
			}
		}
		return nil
	})
	for _, n := range []string{"plain", "delay", "txn", "retry"} {
		l := streams[n]
		acked, lost, forbidden := l.check()
		l.mu.Lock()
		t.Logf("%-5s acknowledged (to deliver) %7d, lost %d, rolled back yet consumed %d, early %d, duplicates %d, send errors %d",
			n, acked, lost, forbidden, l.early, l.dups, l.sendErrs.Load())
		if lost > 0 || forbidden > 0 || l.early > 0 || l.stray > 0 {
			t.Errorf("%s: %d acknowledged messages lost, %d rolled back yet consumed, %d early, %d stray", n, lost, forbidden, l.early, l.stray)
		}
		l.mu.Unlock()
	}
	t.Logf("plain first deliveries failed on purpose %d; soak-retry deliveries failed on purpose (always-fail) %d", retried.Load(), failedAlways.Load())
	if err != nil {
		t.Errorf("drain: %v", err)
	}

	// Resources: the last cycle's end against the first's.
	base, final := phase[0], phase[len(phase)-1]
	for _, c := range []struct {
		what        string
		base, final int64
		assert      bool
	}{
		{"RssAnon", base.anon, final.anon, true},
		{"goroutines", int64(base.goroutines), int64(final.goroutines), true},
		{"open files", int64(base.fds), int64(final.fds), true},
		{"VmRSS", base.rss, final.rss, false},
		{"RssFile", base.file, final.file, false},
	} {
		change := float64(c.final-c.base) / float64(c.base)
		t.Logf("%-10s end of cycle 1 %d, end of cycle %d %d: %+.1f %%", c.what, c.base, len(phase), c.final, 100*change)
		if c.assert && (c.base <= 0 || c.final < 0 || change > 0.10 || change < -0.10) {
			t.Errorf("%s: %d at the end, %d at the end of the first cycle: not within 10 %%", c.what, c.final, c.base)
		}
	}
}
