package commitlog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestChooserAdoptsTheBetterPolicy drives the chooser with the rates each
// policy would reach and checks which policy it runs in every epoch.
func TestChooserAdoptsTheBetterPolicy(t *testing.T) {
	rateOf := map[gatherPolicy]float64{gatherEager: 10_000, gatherRegroup: 14_000}
	var c chooser
	var ran []gatherPolicy
	for range 40 {
		p := c.next()
		ran = append(ran, p)
		c.epoch(rateOf[p])
	}
	// Eager for probeFirst epochs, one probe of regroup, adopted.
	for i := 0; i < probeFirst; i++ {
		if ran[i] != gatherEager {
			t.Fatalf("epoch %d ran %v, want eager before the first probe (ran %v)", i, ran[i], ran)
		}
	}
	if ran[probeFirst] != gatherRegroup || c.current != gatherRegroup {
		t.Fatalf("the probe of regroup (%v) was not adopted: current %v, ran %v", ran[probeFirst], c.current, ran)
	}
	// Afterwards eager is only probed, each time after a longer gap.
	var probes []int
	for i := probeFirst + 1; i < len(ran); i++ {
		if ran[i] == gatherEager {
			probes = append(probes, i)
		}
	}
	if len(probes) < 2 {
		t.Fatalf("eager probed %d times in %d epochs, want at least 2 (ran %v)", len(probes), len(ran), ran)
	}
	for i := 2; i < len(probes); i++ {
		if probes[i]-probes[i-1] <= probes[i-1]-probes[i-2] {
			t.Fatalf("probes at epochs %v: the gaps do not grow after losing probes", probes)
		}
	}
	if c.current != gatherRegroup {
		t.Fatalf("current %v after 40 epochs, want regroup", c.current)
	}
}

// TestChooserKeepsPolicyOnSmallGain: a probe within probeGain of the
// policy in use does not switch it, and a later clear gain does.
func TestChooserKeepsPolicyOnSmallGain(t *testing.T) {
	var c chooser
	rate := map[gatherPolicy]float64{gatherEager: 10_000, gatherRegroup: 10_500}
	for range 20 {
		p := c.next()
		if c.epoch(rate[p]) {
			t.Fatalf("switched to %v on a %.0f%% gain", c.current, (rate[gatherRegroup]/rate[gatherEager]-1)*100)
		}
	}
	if c.current != gatherEager {
		t.Fatalf("current %v, want eager", c.current)
	}
	rate[gatherRegroup] = 20_000
	for range 2 * probeMost {
		if p := c.next(); c.epoch(rate[p]) {
			if c.current != gatherRegroup {
				t.Fatalf("switched to %v, want regroup", c.current)
			}
			return
		}
	}
	t.Fatalf("never adopted regroup at twice the rate of eager")
}

// TestRegroupWaitsForTheWoken: regroup returns once as many appends as
// asked for have arrived, not at its deadline, and at its deadline when
// they do not all come.
func TestRegroupWaitsForTheWoken(t *testing.T) {
	l := openTestLog(t, testOptions(t.TempDir(), FlushAsync, WritePwrite), 0)
	g := &gatherState{wait: time.Minute}
	since := l.syncAppends.Load()
	go func() {
		for range 3 {
			time.Sleep(5 * time.Millisecond)
			l.noteArrival()
		}
	}()
	start := time.Now()
	l.regroup(g, since, 3)
	if got := l.syncAppends.Load() - since; got != 3 {
		t.Fatalf("regroup returned with %d arrivals, want 3", got)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("regroup took %v: it waited for its deadline, not the arrivals", took)
	}
	if l.gathering.Load() {
		t.Fatal("gathering still set after regroup returned")
	}

	g.wait = 20 * time.Millisecond
	since = l.syncAppends.Load()
	l.noteArrival()
	l.regroup(g, since, 5) // only one comes: returns at its deadline
	if got := l.syncAppends.Load() - since; got != 1 {
		t.Fatalf("%d arrivals, want 1", got)
	}
}

// TestSyncAppendsUnderEachPolicy: with the policy fixed to each of the
// two, concurrent sync appenders are all acknowledged, each only once its
// record is durable, and flushes carry several appends at a time.
func TestSyncAppendsUnderEachPolicy(t *testing.T) {
	for _, p := range []gatherPolicy{gatherEager, gatherRegroup} {
		t.Run(p.String(), func(t *testing.T) {
			testGatherPolicy.Store(&p)
			t.Cleanup(func() { testGatherPolicy.Store(nil) })
			var flushes atomic.Int64
			opts := testOptions(t.TempDir(), FlushSync, WritePwrite)
			opts.SegmentSize = 4 << 20
			opts.OnFlush = func(time.Duration, int64) { flushes.Add(1) }
			l := openTestLog(t, opts, 0)
			const writers, each = 8, 100
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						e := sizedRecord(t, "GroupCommit", int32(w), 512, 'g')
						r, err := l.Append(context.Background(), e)
						if err != nil {
							errs <- err
							return
						}
						if l.flushed.Load() < r.End() {
							errs <- errAckBeforeDurable
							return
						}
						// A pause like a client's round trip, so that
						// regrouping has appenders to wait for.
						time.Sleep(200 * time.Microsecond)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			n := flushes.Load()
			if n == 0 || n >= writers*each {
				t.Fatalf("%d flushes for %d appends", n, writers*each)
			}
			t.Logf("%s: %d appends in %d flushes", p, writers*each, n)
		})
	}
}

var errAckBeforeDurable = errors.New("an append returned before its record was durable")
