// Package ratelog rate-limits a WARN that a flood could repeat (refused
// connections, say). It imports nothing of the project, so that the port
// multiplexer may use it.
package ratelog

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// Interval is the least time between two WARNs of one Warner; the ones in
// between are counted in the next.
const Interval = 10 * time.Second

// Warner logs a WARN at most once per Interval (or Every), with the
// number of the ones left out since the last (field
// suppressed_since_last). The zero value is ready.
type Warner struct {
	// Every replaces Interval when set.
	Every time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// Warn logs msg unless one was logged less than Interval (Every) ago.
func (w *Warner) Warn(log *zap.Logger, msg string, fields ...zap.Field) {
	every := Interval
	if w.Every > 0 {
		every = w.Every
	}
	w.mu.Lock()
	now := time.Now()
	if !w.last.IsZero() && now.Sub(w.last) < every {
		w.suppressed++
		w.mu.Unlock()
		return
	}
	n := w.suppressed
	w.last, w.suppressed = now, 0
	w.mu.Unlock()
	if n > 0 {
		fields = append(fields, zap.Int("suppressed_since_last", n))
	}
	log.Warn(msg, fields...)
}
