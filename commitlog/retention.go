package commitlog

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/fsutil"
)

// RetentionPolicy says when whole segments are deleted.
type RetentionPolicy struct {
	// MaxAge: a segment whose file was last modified more than MaxAge ago
	// is expired (72 h).
	MaxAge time.Duration
	// DeleteHours are the local hours (0–23) in which expired segments are
	// deleted ([4]).
	DeleteHours []int
	// HighWaterRatio: above this disk usage expired segments are deleted at
	// any hour (0.75). Segments that have not expired are never deleted,
	// however full the disk: a full disk refuses new appends instead
	// (Options.DiskFullRatio), so nothing acknowledged is ever lost to make
	// room. (RocketMQ deletes unexpired files above 85 %; Bolide does not.)
	HighWaterRatio float64
	// MaxPerRun bounds how many segments one run deletes (10).
	MaxPerRun int
}

// DefaultRetention returns RocketMQ's defaults.
func DefaultRetention() RetentionPolicy {
	return RetentionPolicy{
		MaxAge:         72 * time.Hour,
		DeleteHours:    []int{4},
		HighWaterRatio: 0.75,
		MaxPerRun:      10,
	}
}

// Validate checks the policy.
func (p RetentionPolicy) Validate() error {
	var errs []error
	if p.MaxAge <= 0 {
		errs = append(errs, fmt.Errorf("retention: MaxAge %v must be positive", p.MaxAge))
	}
	for _, h := range p.DeleteHours {
		if h < 0 || h > 23 {
			errs = append(errs, fmt.Errorf("retention: delete hour %d not in 0..23", h))
		}
	}
	if p.HighWaterRatio <= 0 || p.HighWaterRatio > 1 {
		errs = append(errs, fmt.Errorf("retention: HighWaterRatio %v must be in (0, 1]", p.HighWaterRatio))
	}
	if p.MaxPerRun <= 0 {
		errs = append(errs, fmt.Errorf("retention: MaxPerRun %d must be positive", p.MaxPerRun))
	}
	return errors.Join(errs...)
}

// DeleteExpired applies the policy at time now, oldest segment first. It
// never deletes the active segment nor one that is not fully flushed, and it
// stops at the first segment it keeps, so the log stays contiguous. It
// returns how many segments it deleted.
func (l *Log) DeleteExpired(now time.Time, p RetentionPolicy) (int, error) {
	return l.DeleteExpiredBelow(now, p, math.MaxInt64)
}

// DeleteExpiredBelow is DeleteExpired that keeps every segment ending
// above limit. The store passes the offset its dispatch has reached, so a
// record is never deleted before its ConsumeQueue and index entries exist
// (a dispatch that found its next record gone would stop for good).
func (l *Log) DeleteExpiredBelow(now time.Time, p RetentionPolicy, limit int64) (int, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	inHour := slices.Contains(p.DeleteHours, now.Hour())
	used, _, err := fsutil.Usage(l.opts.Dir)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for deleted < p.MaxPerRun {
		l.segMu.RLock()
		if len(l.segs) < 2 {
			l.segMu.RUnlock()
			break
		}
		s := l.segs[0]
		l.segMu.RUnlock()
		if s.end() > l.flushed.Load() || s.end() > limit {
			break
		}
		st, err := os.Stat(s.path)
		if err != nil {
			return deleted, fmt.Errorf("retention: %w", err)
		}
		expired := !st.ModTime().Add(p.MaxAge).After(now)
		if !expired || !(inHour || used >= p.HighWaterRatio) {
			break
		}
		l.flushMu.Lock()
		if l.segmentsClosed {
			l.flushMu.Unlock()
			return deleted, ErrClosed
		}
		l.segMu.Lock()
		if len(l.segs) < 2 || l.segs[0] != s {
			l.segMu.Unlock()
			l.flushMu.Unlock()
			continue
		}
		l.segs = l.segs[1:]
		l.segMu.Unlock()
		err = s.remove()
		l.flushMu.Unlock()
		if err != nil {
			return deleted, fmt.Errorf("retention: %w", err)
		}
		deleted++
		l.log.Info("deleted commitlog segment", zap.String("segment", s.path),
			zap.Float64("diskUsed", used))
	}
	return deleted, nil
}
