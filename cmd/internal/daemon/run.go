package daemon

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// DefaultDrainTimeout is how long a daemon drains after SIGTERM.
const DefaultDrainTimeout = 30 * time.Second

// stopGrace is how long past the drain deadline RunUntilSignal waits for a
// stop function that ignores its context before giving up.
const stopGrace = 5 * time.Second

// RunOption tunes RunUntilSignal.
type RunOption func(*runConfig)

type runConfig struct {
	drain time.Duration
	grace time.Duration
	exit  func(code int)
}

// WithDrainTimeout sets the deadline of the context stop gets (default 30 s).
func WithDrainTimeout(d time.Duration) RunOption {
	return func(c *runConfig) {
		if d > 0 {
			c.drain = d
		}
	}
}

// withExit replaces os.Exit and shortens the grace past the drain
// deadline (tests).
func withExit(f func(int), grace time.Duration) RunOption {
	return func(c *runConfig) { c.exit, c.grace = f, grace }
}

// RunUntilSignal runs a daemon: start, then wait for SIGTERM or SIGINT (or
// ctx to end), then stop with a context bounded by the drain timeout. A
// second signal while stopping exits the process at once with status 1, as
// does a stop that overruns its deadline by more than a few seconds. It
// returns the exit status: 0 after a clean stop, 1 if start or stop failed.
func RunUntilSignal(ctx context.Context, start func() error, stop func(context.Context) error, lg *zap.Logger, opts ...RunOption) int {
	cfg := runConfig{drain: DefaultDrainTimeout, grace: stopGrace, exit: os.Exit}
	for _, o := range opts {
		o(&cfg)
	}
	if lg == nil {
		lg = zap.NewNop()
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	if err := start(); err != nil {
		lg.Error("start failed", zap.Error(err))
		return 1
	}
	select {
	case sig := <-sigs:
		lg.Info("signal received: stopping", zap.Stringer("signal", sig), zap.Duration("drain_timeout", cfg.drain))
	case <-ctx.Done():
		lg.Info("stopping", zap.NamedError("reason", context.Cause(ctx)), zap.Duration("drain_timeout", cfg.drain))
	}

	dctx, cancel := context.WithTimeout(context.Background(), cfg.drain)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- stop(dctx) }()
	hard := time.NewTimer(cfg.drain + cfg.grace)
	defer hard.Stop()
	select {
	case err := <-done:
		if err != nil {
			lg.Error("stop failed", zap.Error(err))
			return 1
		}
		lg.Info("stopped")
		return 0
	case sig := <-sigs:
		lg.Error("second signal: exiting without draining", zap.Stringer("signal", sig))
	case <-hard.C:
		lg.Error("stop overran its drain deadline: exiting", zap.Duration("drain_timeout", cfg.drain))
	}
	_ = lg.Sync()
	cfg.exit(1)
	return 1
}
