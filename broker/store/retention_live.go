package store

import (
	"slices"

	"github.com/bolide-mq/bolide/commitlog"
)

// Retention returns the retention policy in effect.
func (s *Store) Retention() commitlog.RetentionPolicy {
	s.retentionMu.Lock()
	defer s.retentionMu.Unlock()
	p := s.opts.Retention
	p.DeleteHours = slices.Clone(p.DeleteHours)
	return p
}

// SetRetention replaces the retention policy while the store runs: the
// next run (every RetentionInterval, or RunRetention) applies it. An
// invalid policy is refused and the one in effect kept.
func (s *Store) SetRetention(p commitlog.RetentionPolicy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p.DeleteHours = slices.Clone(p.DeleteHours)
	s.retentionMu.Lock()
	defer s.retentionMu.Unlock()
	s.opts.Retention = p
	return nil
}
