package controller

import "sync"

// hub knows every open heartbeat stream by group, to push a beat to each
// when its group changes.
type hub struct {
	mu      sync.Mutex // mu protects streams
	streams map[string]map[*subscriber]struct{}
}

// subscriber is one stream's wake-up: a cap-1 channel, so pushes coalesce.
type subscriber struct{ c chan struct{} }

func newSubscriber() *subscriber { return &subscriber{c: make(chan struct{}, 1)} }

func (s *subscriber) wake() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

func newHub() *hub { return &hub{streams: map[string]map[*subscriber]struct{}{}} }

func (h *hub) add(name string, s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.streams[name]
	if m == nil {
		m = map[*subscriber]struct{}{}
		h.streams[name] = m
	}
	m[s] = struct{}{}
}

func (h *hub) remove(name string, s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.streams[name], s)
	if len(h.streams[name]) == 0 {
		delete(h.streams, name)
	}
}

// notify wakes every stream of a group; it never blocks.
func (h *hub) notify(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.streams[name] {
		s.wake()
	}
}

// notifyAll wakes every stream (a leadership change).
func (h *hub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.streams {
		for s := range m {
			s.wake()
		}
	}
}
