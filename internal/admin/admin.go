// Package admin is a daemon's operations listener: Prometheus metrics
// (/metrics), the liveness and readiness probes (/healthz, /readyz) and the
// Go profiler (/debug/pprof/), over plain HTTP on an address of their own,
// loopback by default, so none of it is reachable where clients connect.
// The daemon may serve more there (Options.Rest: the console).
package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Options configure a Server.
type Options struct {
	// Addr is the listen address; port 0 picks a free one (see Addr).
	Addr string
	// Gatherer is what /metrics serves.
	Gatherer prometheus.Gatherer
	// Ready reports nil when the daemon serves, else why it does not;
	// /readyz answers 200 or 503 with the reason. Nil means always ready.
	Ready func() error
	// Rest, when set, serves every path the routes above do not (the
	// console: /, /console/...); without it they are 404.
	Rest http.Handler
}

// Server is the admin HTTP listener.
type Server struct {
	lis  net.Listener
	srv  *http.Server
	log  *zap.Logger
	done chan struct{} // closed when Serve returns

	startOnce sync.Once
	closeOnce sync.Once
	closeErr  error
}

// New binds the listener; nothing is served until Start.
func New(opts Options, lg *zap.Logger) (*Server, error) {
	if opts.Addr == "" {
		return nil, errors.New("admin: listen address is empty")
	}
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.NewRegistry()
	}
	if lg == nil {
		lg = zap.NewNop()
	}
	lis, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("admin: listen %s: %w", opts.Addr, err)
	}
	s := &Server{lis: lis, log: lg, done: make(chan struct{})}
	s.srv = &http.Server{
		Handler:           Handler(opts),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          zap.NewStdLog(lg.Named("http")),
	}
	return s, nil
}

// Handler is the admin routes without a listener (tests, embedding).
func Handler(opts Options) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		var err error
		if opts.Ready != nil {
			err = opts.Ready()
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		_, _ = fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if opts.Rest != nil {
		mux.Handle("/", opts.Rest)
	}
	return mux
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Start serves in a goroutine that Close waits for.
func (s *Server) Start() {
	s.startOnce.Do(func() {
		go func() {
			defer close(s.done)
			if err := s.srv.Serve(s.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("admin listener stopped", zap.Error(err))
			}
		}()
		s.log.Info("admin listener started", zap.String("addr", s.Addr()))
	})
}

// Close stops accepting and waits for requests in flight until ctx ends,
// then cuts them off. A server never started just releases its port. It is
// idempotent, and Start after Close does nothing.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		started := true
		s.startOnce.Do(func() { started = false })
		if !started {
			_ = s.lis.Close()
			return
		}
		if err := s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close()
			s.closeErr = fmt.Errorf("admin: %w", err)
		}
		<-s.done
	})
	return s.closeErr
}

// NewRegistry is a registry holding the Go runtime and process collectors,
// bolide_build_info{version} and cs (nil ones are skipped).
func NewRegistry(version string, cs ...prometheus.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "bolide_build_info",
		Help:        "Always 1; the version label is the build's version.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	build.Set(1)
	all := append([]prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		build,
	}, cs...)
	for _, c := range all {
		if c == nil {
			continue
		}
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("admin: register metrics: %w", err)
		}
	}
	return reg, nil
}
