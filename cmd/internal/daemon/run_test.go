package daemon

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// signalSelf sends sig to this process; RunUntilSignal has registered for
// it once start has been called.
func signalSelf(t *testing.T, sig syscall.Signal) {
	if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
		t.Error(err)
	}
}

func TestRunStopsCleanlyOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			var deadline time.Duration
			start := func() error { go signalSelf(t, sig); return nil }
			stop := func(ctx context.Context) error {
				d, ok := ctx.Deadline()
				if !ok {
					return errors.New("no deadline")
				}
				deadline = time.Until(d)
				return nil
			}
			code := RunUntilSignal(context.Background(), start, stop, zaptest.NewLogger(t), WithDrainTimeout(7*time.Second))
			if code != 0 {
				t.Fatalf("exit code %d", code)
			}
			if deadline < 6*time.Second || deadline > 7*time.Second {
				t.Fatalf("stop's deadline %v away, want about 7s", deadline)
			}
		})
	}
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := false
	code := RunUntilSignal(ctx, func() error { cancel(); return nil },
		func(context.Context) error { stopped = true; return nil }, zaptest.NewLogger(t))
	if code != 0 || !stopped {
		t.Fatalf("code %d, stopped %v", code, stopped)
	}
}

func TestRunFailures(t *testing.T) {
	lg := zaptest.NewLogger(t)
	stopCalled := false
	code := RunUntilSignal(context.Background(), func() error { return errors.New("bind: address in use") },
		func(context.Context) error { stopCalled = true; return nil }, lg)
	if code != 1 || stopCalled {
		t.Fatalf("start failure: code %d, stop called %v", code, stopCalled)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code = RunUntilSignal(ctx, func() error { return nil }, func(context.Context) error { return errors.New("flush failed") }, lg)
	if code != 1 {
		t.Fatalf("stop failure: code %d", code)
	}
}

func TestRunSecondSignalForcesExit(t *testing.T) {
	release := make(chan struct{})
	stopping := make(chan struct{})
	exited := make(chan int, 1)
	stop := func(ctx context.Context) error {
		close(stopping)
		<-release // a drain that takes long
		return nil
	}
	start := func() error { go signalSelf(t, syscall.SIGTERM); return nil }
	go func() {
		<-stopping
		signalSelf(t, syscall.SIGTERM)
	}()
	code := RunUntilSignal(context.Background(), start, stop, zaptest.NewLogger(t),
		withExit(func(c int) { exited <- c }, time.Minute))
	close(release)
	if code != 1 {
		t.Fatalf("code %d", code)
	}
	select {
	case c := <-exited:
		if c != 1 {
			t.Fatalf("exit(%d)", c)
		}
	default:
		t.Fatal("exit not called")
	}
}

func TestRunStopOverrunningItsDeadline(t *testing.T) {
	release := make(chan struct{})
	exited := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code := RunUntilSignal(ctx, func() error { return nil },
		func(context.Context) error { <-release; return nil }, // ignores its context
		zaptest.NewLogger(t), WithDrainTimeout(20*time.Millisecond), withExit(func(c int) { exited <- c }, 50*time.Millisecond))
	close(release)
	if code != 1 || len(exited) != 1 {
		t.Fatalf("code %d, exit calls %d", code, len(exited))
	}
}
