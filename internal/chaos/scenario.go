package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// Scenario is one fault repeated over cycles against a loaded cluster.
type Scenario struct {
	Name string
	// Replication: "sync" (default) or "async".
	Replication string
	Cycles      int
	// Fault injects one cycle's fault into master m and returns once the
	// fault is over (the broker restarted, continued or healed).
	Fault func(ctx context.Context, r *Run, cycle int, m *Broker) error
	// Kinds are the event kinds that take the master away (failover
	// times are measured from them).
	Kinds []string
	// Bound is the bound on the time to the first ack by a new
	// master (reported, not enforced: see the package documentation).
	Bound time.Duration
	// PowerLoss cuts a killed master's CommitLog back to its last
	// durable offset on odd cycles (kill faults only).
	PowerLoss bool
	// Config adjusts the cluster.
	Config func(*Config)
}

// Run is a scenario in progress.
type Run struct {
	T      testing.TB
	C      *Cluster
	H      *History
	Topic  string
	Queues int32
	Snaps  []KillSnapshot
	// Epoch is the master's epoch when the current cycle's fault began.
	Epoch int64
	// restarted: when each broker was last started again after a fault.
	restarted map[string]time.Duration
	// Rejoin: per fault, the time from its end until every broker was in
	// the sync state set again.
	Rejoin []time.Duration
	sc     *Scenario
	heals  []time.Duration
}

// Logf logs with the history's clock.
func (r *Run) Logf(format string, args ...any) {
	r.T.Helper()
	r.T.Logf("[%7.3fs] %s", r.H.Now().Seconds(), fmt.Sprintf(format, args...))
}

// Mode is a run's size: "short" (CI) or "long", from BOLIDE_CHAOS; ""
// skips the scenarios.
func Mode() string { return os.Getenv("BOLIDE_CHAOS") }

// Result is what a scenario found.
type Result struct {
	Name        string
	Replication string
	Cycles      int
	Attempts    int
	Acked       int
	Loss        LossReport
	Dups        DupReport
	Order       OrderReport
	TwoMasters  TwoMastersReport
	Divergence  DivergenceReport
	Async       *AsyncLossReport
	Lease       LeaseReport
	Failovers   []Failover
	Stats       FailoverStats
	Bound       time.Duration
	Rejoin      []time.Duration
	Duration    time.Duration
	Errors      []string // violations
	Problems    []string // harness-level failures (no master, no convergence, ...)
}

// Failed reports whether the scenario found a violation or could not run.
func (r *Result) Failed() bool { return len(r.Errors) > 0 || len(r.Problems) > 0 }

// Execute runs a scenario and returns its result; it does not fail t
// itself.
func Execute(t testing.TB, sc Scenario) *Result {
	res := &Result{Name: sc.Name, Replication: sc.Replication, Cycles: sc.Cycles, Bound: sc.Bound}
	if res.Replication == "" {
		res.Replication = "sync"
	}
	dir, err := os.MkdirTemp("", "bolide-chaos-"+sc.Name+"-")
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	cfg := DefaultConfig(dir)
	cfg.Replication = res.Replication
	if sc.Config != nil {
		sc.Config(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(sc.Cycles)*2*time.Minute+5*time.Minute)
	defer cancel()
	// Registered before the cluster's own cleanup, so it runs after the
	// processes are stopped.
	t.Cleanup(func() {
		if res.Failed() || os.Getenv("BOLIDE_CHAOS_KEEP") != "" {
			t.Logf("%s: logs, history (attempts.csv, events.csv) and data kept in %s", sc.Name, dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	h := NewHistory()
	start := time.Now()
	c, err := StartCluster(t, cfg)
	r := &Run{T: t, C: c, H: h, Topic: "chaos", Queues: 8, sc: &sc, restarted: map[string]time.Duration{}}
	if err != nil {
		res.Problems = append(res.Problems, "start: "+err.Error())
		return res
	}
	r.execute(ctx, res)
	res.Duration = time.Since(start)
	if err := h.WriteFiles(dir); err != nil {
		t.Logf("history files: %v", err)
	}
	return res
}

func (r *Run) execute(ctx context.Context, res *Result) {
	c, h := r.C, r.H
	m, epoch, err := c.WaitMaster(ctx, "", 30*time.Second)
	if err != nil {
		res.Problems = append(res.Problems, "first master: "+err.Error())
		return
	}
	r.Logf("%s: first master %s at epoch %d", r.sc.Name, m.Name, epoch)
	if err := c.CreateTopic(ctx, r.Topic, r.Queues); err != nil {
		res.Problems = append(res.Problems, err.Error())
		return
	}
	if _, err := c.WaitInSync(ctx, 30*time.Second); err != nil {
		res.Problems = append(res.Problems, "replicas never all in sync: "+err.Error())
		return
	}
	w := Workload{NameServers: c.NameServerAddrs(), Topic: r.Topic, Hosts: c.HostName}
	if Mode() == "long" {
		w.Rate = 400 // bounds the history over 30 cycles
	}
	load, err := w.Start(ctx, h)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			load.Stop()
		}
	}
	defer stop()
	sleep(ctx, 2*time.Second)
	for cycle := 0; cycle < r.sc.Cycles && ctx.Err() == nil; cycle++ {
		m, err := c.WaitInSync(ctx, 30*time.Second)
		if err == nil {
			_, r.Epoch, err = c.Master(ctx)
		}
		if cycle > 0 && len(r.heals) > 0 {
			r.Rejoin = append(r.Rejoin, h.Now()-r.heals[len(r.heals)-1])
		}
		if err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("cycle %d: replicas not back in sync: %v", cycle, err))
			break
		}
		if !h.AckedSince(h.Now()-time.Second, "") {
			// Writes must flow before the next fault.
			if err := poll(ctx, 15*time.Second, func() error {
				if !h.AckedSince(h.Now()-500*time.Millisecond, "") {
					return fmt.Errorf("no acks")
				}
				return nil
			}); err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("cycle %d: no acknowledged sends before the fault: %v", cycle, err))
				break
			}
		}
		sleep(ctx, time.Second)
		r.Logf("cycle %d: fault %s on master %s", cycle, r.sc.Name, m.Name)
		if err := r.sc.Fault(ctx, r, cycle, m); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("cycle %d: %v", cycle, err))
			break
		}
		r.heals = append(r.heals, h.Now())
	}
	if _, err := c.WaitInSync(ctx, 30*time.Second); err == nil && len(r.heals) > 0 && len(r.Rejoin) < len(r.heals) {
		r.Rejoin = append(r.Rejoin, h.Now()-r.heals[len(r.heals)-1])
	}
	// The load runs on until the last fault's throughput window ends.
	last := time.Duration(0)
	for _, e := range h.Events() {
		if slices.Contains(r.sc.Kinds, e.Kind) {
			last = max(last, e.At)
		}
	}
	sleep(ctx, max(time.Second, last+RateWindow*time.Second-h.Now()))
	stop()
	r.Logf("load stopped: %d attempts", len(h.Attempts()))
	r.healAll(ctx)
	final, err := c.WaitConverged(ctx, 60*time.Second)
	if err != nil {
		res.Problems = append(res.Problems, "no convergence: "+err.Error())
	}
	r.check(ctx, res, final)
}

// healAll ends every fault: processes running and continued, proxies open.
func (r *Run) healAll(ctx context.Context) {
	for _, b := range r.C.Brokers {
		r.C.Heal(b)
		if b.Proc.Running() {
			_ = b.Proc.Cont()
		} else if err := b.Proc.Start(); err != nil {
			r.Logf("restart %s: %v", b.Name, err)
		}
	}
	for _, ns := range r.C.NameServers {
		if !ns.Proc.Running() {
			if err := ns.Proc.Start(); err != nil {
				r.Logf("restart %s: %v", ns.Name, err)
			}
		}
	}
}

func (r *Run) check(ctx context.Context, res *Result, final *Broker) {
	atts := r.H.Attempts()
	res.Attempts = len(atts)
	res.Failovers = Failovers(atts, r.H.Events(), r.sc.Kinds...)
	res.Stats = Stats(res.Failovers)
	res.Rejoin = r.Rejoin
	for _, f := range res.Failovers {
		if f.FirstAck < 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("cycle %d: no broker but %s acknowledged a send after the %s", f.Cycle, f.Target, f.Kind))
		}
	}
	if final == nil {
		// Read what the most advanced broker has, for the report.
		m, _, err := r.C.Master(ctx)
		if err != nil {
			res.Problems = append(res.Problems, "no master to read the final log from: "+err.Error())
			return
		}
		final = m
	}
	fin, err := r.C.ReadFinal(ctx, final, r.Topic, r.Queues)
	if err != nil {
		res.Problems = append(res.Problems, "final log: "+err.Error())
		return
	}
	res.Loss = CheckLoss(atts, fin)
	res.Acked = res.Loss.Acked
	res.Dups = CheckDuplicates(atts, fin)
	res.Order = CheckOrder(atts, fin)
	res.TwoMasters = CheckTwoMasters(atts, fin)
	res.Lease = CheckLease(atts, r.H.Events(), r.C.cfg.Lease, "isolate", "isolate-controllers")
	if reps, err := r.C.Replicas(ctx, final); err != nil {
		res.Problems = append(res.Problems, "replicas: "+err.Error())
	} else {
		res.Divergence = CheckDivergence(reps, r.C.cfg.SegmentSize)
	}
	if res.Replication == "async" {
		a := CheckAsyncLoss(atts, fin, r.Snaps)
		res.Async = &a
		res.Errors = append(res.Errors, a.Errors()...)
	} else {
		res.Errors = append(res.Errors, res.Loss.Violations()...)
	}
	if res.Replication == "async" {
		// Moved copies and strangers are violations in every mode; lost
		// ones only beyond the lag (above).
		l := res.Loss
		l.LostMessages, l.LostCopies = nil, nil
		res.Errors = append(res.Errors, l.Violations()...)
	}
	res.Errors = append(res.Errors, res.Dups.Violations()...)
	res.Errors = append(res.Errors, res.Order.Errors()...)
	res.Errors = append(res.Errors, res.TwoMasters.Errors()...)
	res.Errors = append(res.Errors, res.Lease.Errors()...)
	res.Errors = append(res.Errors, res.Divergence.Errors...)
}

// waitNewAck waits up to d until a new master acknowledged a send that
// ended after since: a broker other than old, or old itself for a send
// started after it was restarted (as Failovers counts).
func (r *Run) waitNewAck(ctx context.Context, since time.Duration, old string, d time.Duration) error {
	restarted, ok := r.restarted[old]
	if !ok || restarted < since {
		restarted = -1
	}
	return poll(ctx, d, func() error {
		if !r.H.AckedSinceBy(since, func(a *Attempt) bool { return a.Broker != old || (restarted >= 0 && a.Start > restarted) }) {
			return fmt.Errorf("no send acknowledged by a new master since %.3fs", since.Seconds())
		}
		return nil
	})
}

// restart starts broker b again and records it.
func (r *Run) restart(b *Broker, cycle int) error {
	r.restarted[b.Name] = r.H.Mark(Restart, b.Name, cycle, "")
	return b.Proc.Start()
}

// KillMaster kills m with SIGKILL (async replication: its replication
// link first, as when the machine dies), waits for another master to
// acknowledge sends, optionally cuts m's CommitLog to its last durable
// offset, and restarts it.
func KillMaster(ctx context.Context, r *Run, cycle int, m *Broker) error {
	async := r.sc.Replication == "async"
	if async {
		// The machine dies: its last bytes never reach the slaves. The
		// snapshot then reads the lag the kill leaves.
		m.HAProxy.Blackhole(true)
	}
	snap, err := r.C.Snapshot(ctx, m)
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", m.Name, err)
	}
	snap.Cycle = cycle
	snap.At = r.H.Mark("kill", m.Name, cycle, "")
	m.Proc.Kill()
	if async {
		m.HAProxy.Cut()
		m.HAProxy.Blackhole(false)
	}
	nm, epoch, err := r.C.WaitNewMaster(ctx, r.Epoch, 30*time.Second)
	if err != nil {
		return fmt.Errorf("no new master after killing %s: %w", m.Name, err)
	}
	snap.NewMaster = nm.Name
	r.Snaps = append(r.Snaps, snap)
	r.H.Mark("elected", nm.Name, cycle, fmt.Sprintf("epoch %d", epoch))
	if err := r.waitNewAck(ctx, snap.At, m.Name, 30*time.Second); err != nil {
		return err
	}
	r.Logf("cycle %d: %s elected at epoch %d; lag before the kill %d bytes (slave acks %v, master end %d)", cycle, nm.Name, epoch, snap.LagBytes, snap.SlaveAck, snap.MasterEnd)
	if r.sc.PowerLoss && cycle%2 == 1 {
		durable, err := cluster.DurableOffset(m.StoreDir)
		if err == nil {
			err = cluster.PowerLoss(m.StoreDir, durable)
		}
		if err != nil {
			return fmt.Errorf("power loss of %s: %w", m.Name, err)
		}
		r.H.Mark("power-loss", m.Name, cycle, fmt.Sprintf("cut to %d", durable))
	}
	sleep(ctx, time.Second)
	return r.restart(m, cycle)
}

// FreezeMaster stops m with SIGSTOP for d, checks another master took
// over meanwhile, and continues it.
func FreezeMaster(d time.Duration) func(ctx context.Context, r *Run, cycle int, m *Broker) error {
	return func(ctx context.Context, r *Run, cycle int, m *Broker) error {
		at := r.H.Mark("sigstop", m.Name, cycle, d.String())
		if err := m.Proc.Stop(); err != nil {
			return err
		}
		defer func() {
			_ = m.Proc.Cont()
			r.H.Mark("sigcont", m.Name, cycle, "")
		}()
		nm, epoch, err := r.C.WaitNewMaster(ctx, r.Epoch, d)
		if err != nil {
			return fmt.Errorf("no new master while %s was stopped: %w", m.Name, err)
		}
		r.H.Mark("elected", nm.Name, cycle, fmt.Sprintf("epoch %d", epoch))
		if err := r.waitNewAck(ctx, at, m.Name, max(d-(r.H.Now()-at), time.Second)); err != nil {
			return err
		}
		r.Logf("cycle %d: %s elected at epoch %d while %s is stopped", cycle, nm.Name, epoch, m.Name)
		sleep(ctx, d-(r.H.Now()-at))
		return nil
	}
}

// IsolateMaster cuts m from the controllers, the NameServers and its
// slaves for d (clients still reach it: it must refuse writes once its
// lease runs out).
func IsolateMaster(d time.Duration) func(ctx context.Context, r *Run, cycle int, m *Broker) error {
	return func(ctx context.Context, r *Run, cycle int, m *Broker) error {
		at := r.H.Mark("isolate", m.Name, cycle, d.String())
		r.C.Isolate(m)
		defer func() {
			r.C.Heal(m)
			r.H.Mark("heal", m.Name, cycle, "")
		}()
		nm, epoch, err := r.C.WaitNewMaster(ctx, r.Epoch, d)
		if err != nil {
			return fmt.Errorf("no new master while %s was cut off: %w", m.Name, err)
		}
		r.H.Mark("elected", nm.Name, cycle, fmt.Sprintf("epoch %d", epoch))
		if err := r.waitNewAck(ctx, at, m.Name, max(d-(r.H.Now()-at), time.Second)); err != nil {
			return err
		}
		r.Logf("cycle %d: %s elected at epoch %d while %s is cut off", cycle, nm.Name, epoch, m.Name)
		sleep(ctx, d-(r.H.Now()-at))
		return nil
	}
}

// CutFromControllers cuts m from the controllers and NameServers only,
// for d: its slaves still replicate from it, so only its lease can stop
// it acknowledging writes once the controllers elect another master.
func CutFromControllers(d time.Duration) func(ctx context.Context, r *Run, cycle int, m *Broker) error {
	return func(ctx context.Context, r *Run, cycle int, m *Broker) error {
		at := r.H.Mark("isolate-controllers", m.Name, cycle, d.String())
		for _, p := range m.CtlProxies {
			p.Blackhole(true)
		}
		defer func() {
			for _, p := range m.CtlProxies {
				p.Cut()
				p.Blackhole(false)
			}
			r.H.Mark("heal", m.Name, cycle, "")
		}()
		nm, epoch, err := r.C.WaitNewMaster(ctx, r.Epoch, d)
		if err != nil {
			return fmt.Errorf("no new master while %s was cut from the controllers: %w", m.Name, err)
		}
		r.H.Mark("elected", nm.Name, cycle, fmt.Sprintf("epoch %d", epoch))
		if err := r.waitNewAck(ctx, at, m.Name, max(d-(r.H.Now()-at), time.Second)); err != nil {
			return err
		}
		r.Logf("cycle %d: %s elected at epoch %d while %s is cut from the controllers", cycle, nm.Name, epoch, m.Name)
		sleep(ctx, d-(r.H.Now()-at))
		return nil
	}
}

// KillMasterThenLeader kills m, then the controller leader after delay(cycle)
// (while the controllers are noticing m's death), waits for a new master,
// and restarts both.
func KillMasterThenLeader(delay func(cycle int) time.Duration) func(ctx context.Context, r *Run, cycle int, m *Broker) error {
	return func(ctx context.Context, r *Run, cycle int, m *Broker) error {
		leader, _, err := r.C.Leader(ctx)
		if err != nil {
			return err
		}
		at := r.H.Mark("kill", m.Name, cycle, "")
		m.Proc.Kill()
		if dl := delay(cycle); dl > 0 {
			sleep(ctx, dl)
		}
		r.H.Mark("kill-controller", leader.Name, cycle, "leader")
		leader.Proc.Kill()
		restartBoth := func() error {
			sleep(ctx, time.Second)
			r.H.Mark("restart-controller", leader.Name, cycle, "")
			return startAll(2, func(i int) error {
				if i == 0 {
					return r.restart(m, cycle)
				}
				return leader.Proc.Start()
			})
		}
		if delay(cycle) == 0 {
			// Killed together: restarted together.
			if err := restartBoth(); err != nil {
				return err
			}
		}
		nm, epoch, err := r.C.WaitNewMaster(ctx, r.Epoch, 30*time.Second)
		if err != nil {
			return fmt.Errorf("no new master after killing %s and controller %s: %w", m.Name, leader.Name, err)
		}
		r.H.Mark("elected", nm.Name, cycle, fmt.Sprintf("epoch %d", epoch))
		if err := r.waitNewAck(ctx, at, m.Name, 30*time.Second); err != nil {
			return err
		}
		nl, _, _ := r.C.Leader(ctx)
		r.Logf("cycle %d: %s elected at epoch %d; controller leader %s killed, now %v", cycle, nm.Name, epoch, leader.Name, nsName(nl))
		if !m.Proc.Running() {
			return restartBoth()
		}
		return nil
	}
}

func nsName(ns *NameServer) string {
	if ns == nil {
		return "none"
	}
	return ns.Name
}

// Scenarios are the Done-when lines, sized for mode ("short" or
// "long").
func Scenarios(mode string) []Scenario {
	long := mode == "long"
	n := func(short, lng int) int {
		if long {
			return lng
		}
		return short
	}
	stop, cut := 8*time.Second, 8*time.Second
	if long {
		stop, cut = 20*time.Second, 15*time.Second
	}
	return []Scenario{
		{Name: "kill9", Cycles: n(3, 30), Fault: KillMaster, Kinds: []string{"kill"}, Bound: 5 * time.Second, PowerLoss: long},
		{Name: "sigstop", Cycles: n(1, 5), Fault: FreezeMaster(stop), Kinds: []string{"sigstop"}, Bound: 8 * time.Second},
		{Name: "partition", Cycles: n(1, 5), Fault: IsolateMaster(cut), Kinds: []string{"isolate"}, Bound: 8 * time.Second},
		{Name: "controller-cut", Cycles: n(1, 5), Fault: CutFromControllers(cut), Kinds: []string{"isolate-controllers"}, Bound: 8 * time.Second},
		{Name: "leader-during-failover", Cycles: n(1, 5), Kinds: []string{"kill"}, Bound: 10 * time.Second,
			Fault: KillMasterThenLeader(func(c int) time.Duration { return 300*time.Millisecond + time.Duration(c%4)*400*time.Millisecond })},
		{Name: "master+leader", Cycles: n(1, 5), Kinds: []string{"kill"}, Bound: 10 * time.Second,
			Fault: KillMasterThenLeader(func(int) time.Duration { return 0 })},
		{Name: "async-kill9", Replication: "async", Cycles: n(2, 10), Fault: KillMaster, Kinds: []string{"kill"}, Bound: 5 * time.Second},
	}
}

// Summary formats results as a markdown table.
func Summary(rs []*Result) string {
	var b strings.Builder
	b.WriteString("| scenario | repl | cycles | attempts | acked | lost | dup | order | two masters | divergence | failover median | max | bound | acks/s before | acks/s in the 10 s after | rejoin max | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		lost := fmt.Sprintf("%d", len(r.Loss.LostMessages))
		if r.Async != nil {
			var n int
			var bytes, lag int64
			for _, c := range r.Async.Cycles {
				n += c.Lost
				bytes += c.LostBytes
				lag += c.Lag
			}
			lost = fmt.Sprintf("%d (%d B of a %d B lag)", n, bytes, lag)
		}
		tm := len(r.TwoMasters.EpochWriters) + len(r.TwoMasters.StaleAcks) + len(r.TwoMasters.Reordered) + len(r.TwoMasters.WrongWriter)
		verdict := "pass"
		if r.Failed() {
			verdict = "FAIL"
		}
		var rejoin time.Duration
		for _, d := range r.Rejoin {
			rejoin = max(rejoin, d)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s | %d | %d | %d | %d | %s | %s | %s | %.0f | %.0f | %s | %s |\n",
			r.Name, r.Replication, r.Cycles, r.Attempts, r.Acked, lost, r.Dups.Extra, len(r.Order.Violations), tm,
			len(r.Divergence.Errors), fmtDur(r.Stats.Median), fmtDur(r.Stats.Max), fmtDur(r.Bound), r.Stats.RateBefore, r.Stats.MeanRate,
			fmtDur(rejoin), verdict)
	}
	return b.String()
}

func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// Details formats one result's per-cycle figures and violations.
func Details(r *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s, %d cycles, %v): %d attempts, %d acked, %d stored, %d recovered, %d duplicates (max %d copies), %d order violations\n",
		r.Name, r.Replication, r.Cycles, r.Duration.Round(time.Second), r.Attempts, r.Acked, r.Loss.Stored, r.Loss.Recovered,
		r.Dups.Extra, r.Dups.MaxCopies, len(r.Order.Violations))
	for _, f := range r.Failovers {
		fmt.Fprintf(&b, "  cycle %d %s %s at %.3fs: first ack by %s after %s (meanwhile %v); acks/s before %.0f, after %v\n",
			f.Cycle, f.Kind, f.Target, f.At.Seconds(), f.By, fmtDur(f.FirstAck), f.Codes, f.RateBefore, f.After)
	}
	for _, f := range r.Lease.Faults {
		fmt.Fprintf(&b, "  %s cut off at %.3fs: it acknowledged %d sends after, the last ending %s after the cut (lease %v), %d beyond its lease\n",
			f.Target, f.At.Seconds(), f.Acked, fmtDur(f.Last), r.Lease.Lease, len(f.Late))
	}
	if r.Async != nil {
		for _, c := range r.Async.Cycles {
			fmt.Fprintf(&b, "  async cycle %d: new master %s had %d of the killed master's %d (lag %d B; largest reported %d B); lost %d acked copies, the first %d B before that end (%d acked after the snapshot)\n",
				c.Cycle, c.NewMaster, c.Bound, c.MasterEnd, c.Lag, c.LagBytes, c.Lost, c.LostBytes, c.AckedAfterSnapshot)
		}
	}
	if len(r.TwoMasters.Epochs) > 0 {
		fmt.Fprintf(&b, "  acked copies per epoch and broker: %v\n", r.TwoMasters.Epochs)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "  VIOLATION: %s\n", e)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  PROBLEM: %s\n", p)
	}
	return b.String()
}
