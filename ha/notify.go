package ha

import "sync"

// notifier wakes every goroutine waiting on the channel returned by c when
// notify is called. The zero value is ready to use.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// c returns a channel closed by the next notify. Take it, check the
// condition, then wait.
func (n *notifier) c() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}
