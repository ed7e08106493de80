package auth

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// auditEvery is the least time between two audit lines; refusals in
// between are counted and reported with the next line.
const auditEvery = 100 * time.Millisecond

// auditLog writes refusals (who, from where, why — never a secret or a
// signature) at WARN, rate-limited.
type auditLog struct {
	log *zap.Logger

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (a *auditLog) note(what, peer, ak, msg string) {
	if a.log == nil {
		return
	}
	a.mu.Lock()
	now := time.Now()
	if now.Sub(a.last) < auditEvery {
		a.suppressed++
		a.mu.Unlock()
		return
	}
	a.last = now
	n := a.suppressed
	a.suppressed = 0
	a.mu.Unlock()
	a.log.Warn("[AUDIT] "+what, zap.String("peer", peer), zap.String("access_key", ak), zap.String("reason", msg), zap.Int("suppressed_before", n))
}
