package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker/rolegate"
	"github.com/bolide-mq/bolide/internal/notify"
)

// fakeLease is a master whose write lease a test takes away.
type fakeLease struct {
	writable atomic.Bool
	sig      notify.Signal
}

func (f *fakeLease) CheckWritable() error {
	if f.writable.Load() {
		return nil
	}
	return errors.New("no lease")
}
func (f *fakeLease) Changes() <-chan struct{} { return f.sig.C() }

// leadCount counts the leads of a service and whether it leads now.
type leadCount struct {
	leads   atomic.Int32
	leading atomic.Bool
}

func (l *leadCount) Lead(ctx context.Context) func() {
	l.leads.Add(1)
	l.leading.Store(true)
	done := make(chan struct{})
	go func() {
		<-ctx.Done()
		l.leading.Store(false)
		close(done)
	}()
	return func() { <-done }
}

func waitLeading(t *testing.T, l *leadCount, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.leading.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("leading %v, want %v", l.leading.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// In controller mode the master-only services stop when the write lease
// runs out, with no role change, and start again when a lease arrives (the
// replicator signals both as changes).
func TestRoleGateFollowsLease(t *testing.T) {
	f := &fakeLease{}
	f.writable.Store(true)
	g := rolegate.New(writableSource{f}, nil)
	svc := &leadCount{}
	g.Subscribe("svc", svc)
	g.Start()
	defer g.Close()
	waitLeading(t, svc, true)
	f.writable.Store(false) // the lease ran out: no role change
	f.sig.Notify()
	waitLeading(t, svc, false)
	f.writable.Store(true)
	f.sig.Notify()
	waitLeading(t, svc, true)
	if n := svc.leads.Load(); n != 2 {
		t.Fatalf("%d leads, want 2", n)
	}
}

// Without controllers the gate follows the role changes alone.
func TestRoleGateWithoutControllerFollowsRole(t *testing.T) {
	f := &fakeLease{}
	src := writableSource{f}
	if src.Changes() != f.sig.C() {
		t.Fatal("Changes is not the replicator's channel")
	}
	g := rolegate.New(src, nil)
	svc := &leadCount{}
	g.Subscribe("svc", svc)
	g.Start()
	defer g.Close()
	f.writable.Store(true)
	f.sig.Notify()
	waitLeading(t, svc, true)
	f.writable.Store(false)
	f.sig.Notify()
	waitLeading(t, svc, false)
}
