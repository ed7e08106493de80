package auth

import (
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/ratelog"
)

// auditEvery is the least time between two audit lines; refusals in
// between are counted and reported with the next line.
const auditEvery = 100 * time.Millisecond

// auditLog writes refusals (who, from where, why — never a secret or a
// signature) at WARN, rate-limited.
type auditLog struct {
	log *zap.Logger
	w   ratelog.Warner
}

func (a *auditLog) note(what, peer, ak, msg string) {
	if a.log == nil {
		return
	}
	a.w.Warn(a.log, "[AUDIT] "+what, zap.String("peer", peer), zap.String("access_key", ak), zap.String("reason", msg))
}
