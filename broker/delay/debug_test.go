package delay

import (
	"fmt"
	"runtime"
)

func (e *Engine) debugState() string {
	now := e.clock.Now().UnixMilli()
	end := e.host.TimerQueueMaxOffset()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := fmt.Sprintf("now=%d qoff=%d end=%d loadedAt=%d inflight=%d frontier=%d loaded=%d files=%d l0=%d", now, e.qoff, end, e.loadedAt, e.inflight, e.frontier, len(e.loaded), len(e.files.m), len(e.files.l0))
	for _, lb := range e.loaded {
		if i, _, ok := lb.peek(); ok {
			s += fmt.Sprintf(" first=%s due=%d open=%d", lb.key.name(), lb.ents.at(i).deliverMS, lb.open)
			break
		}
	}
	buf := make([]byte, 1<<20)
	e.mu.Unlock()
	n := runtime.Stack(buf, true)
	e.mu.Lock()
	return s + "\n" + string(buf[:n])
}
