// Package acceptq is a listener that prepares each accepted connection
// off the Accept path (sniffing its first bytes, a TLS handshake, a
// protocol handshake) in a goroutine of its own, and queues the ones
// prepared for Accept: a slow client holds no one up. Close stops the
// accept loop, closes the connections still being prepared and waits for
// every goroutine to end.
//
// It imports nothing of the project.
package acceptq

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Prepare readies an accepted connection: it returns the connection to
// hand out by Accept (nc itself or one wrapping it), or an error, and
// then nc is closed. It runs while nc is among the connections Close
// closes, so Close cuts it short.
type Prepare func(nc net.Conn) (net.Conn, error)

// Refused, when set, is told of a connection Prepare failed while the
// listener was open (not of one cut short by Close); nc is closed after.
type Refused func(nc net.Conn, err error)

// New accepts lis's connections, runs prepare on each in a goroutine of
// its own and yields the prepared ones from Accept. A temporary Accept
// error (out of file descriptors, say) is retried with a backoff up to a
// second; any other ends the listener, and Accept returns it from then on.
// refused may be nil.
func New(lis net.Listener, prepare Prepare, refused Refused) net.Listener {
	l := &listener{
		Listener: lis, prepare: prepare, refused: refused,
		conns:   make(chan net.Conn),
		done:    make(chan struct{}),
		pending: make(map[net.Conn]struct{}),
	}
	l.wg.Add(1)
	go l.accept()
	return l
}

type listener struct {
	net.Listener
	prepare Prepare
	refused Refused

	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup // the accept loop and each preparation

	// mu protects pending, closed and err.
	mu      sync.Mutex
	pending map[net.Conn]struct{} // being prepared
	closed  bool
	err     error // the underlying Accept's, once it failed for good
}

func (l *listener) accept() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() && !l.isClosed() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			l.shut()
			return
		}
		backoff = 0
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = nc.Close()
			return
		}
		l.pending[nc] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.admit(nc)
	}
}

// admit prepares nc and hands the result to Accept, or closes it.
func (l *listener) admit(nc net.Conn) {
	defer l.wg.Done()
	conn, err := l.prepare(nc)
	l.mu.Lock()
	delete(l.pending, nc)
	closed := l.closed
	l.mu.Unlock()
	if err != nil {
		if !closed && l.refused != nil {
			l.refused(nc, err)
		}
		_ = nc.Close()
		return
	}
	if closed {
		_ = conn.Close()
		return
	}
	select {
	case l.conns <- conn:
	case <-l.done:
		_ = conn.Close()
	}
}

// Accept yields the next prepared connection; once the listener is
// closed or failed, net.ErrClosed or the underlying Accept's error.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		l.mu.Lock()
		err := l.err
		l.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return nil, err
	}
}

// Close closes the underlying listener and the connections still being
// prepared, and waits for the accept loop and the preparations to end.
func (l *listener) Close() error {
	err := l.Listener.Close()
	l.shut()
	l.wg.Wait()
	return err
}

func (l *listener) shut() {
	l.mu.Lock()
	l.closed = true
	for nc := range l.pending {
		_ = nc.Close()
	}
	l.mu.Unlock()
	l.once.Do(func() { close(l.done) })
}

func (l *listener) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}
