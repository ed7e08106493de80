package console

import (
	"crypto/sha256"
	"errors"
	"sync"

	"github.com/bolide-mq/bolide/client"
)

// clients keeps the SDK clients, one per user (access key and secret: a
// new secret gets a new client), the most recently used last. Past max,
// the least recently used is dropped; a client is closed once dropped and
// no request uses it any more.
type clients struct {
	max  int
	make func(user) (*client.Admin, error)

	mu      sync.Mutex
	entries []*clientEntry
	closed  bool
}

type clientEntry struct {
	key     [32]byte
	admin   *client.Admin
	refs    int
	dropped bool
}

func newClients(max int, mk func(user) (*client.Admin, error)) *clients {
	return &clients{max: max, make: mk}
}

func userKeyOf(u user) [32]byte {
	return sha256.Sum256([]byte(u.accessKey + "\x00" + u.secretKey))
}

// acquire returns the client of u, made if need be; release it when done.
func (cs *clients) acquire(u user) (*clientEntry, error) {
	key := userKeyOf(u)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, errClosed
	}
	for i, e := range cs.entries {
		if e.key == key {
			cs.entries = append(append(cs.entries[:i:i], cs.entries[i+1:]...), e)
			e.refs++
			return e, nil
		}
	}
	// Making a client dials nothing; holding the lock keeps two requests
	// of one user from making two.
	a, err := cs.make(u)
	if err != nil {
		return nil, err
	}
	e := &clientEntry{key: key, admin: a, refs: 1}
	cs.entries = append(cs.entries, e)
	if len(cs.entries) > cs.max {
		old := cs.entries[0]
		cs.entries = cs.entries[1:]
		cs.drop(old)
	}
	return e, nil
}

// drop closes e now or, while requests use it, when the last ends.
func (cs *clients) drop(e *clientEntry) {
	e.dropped = true
	if e.refs == 0 {
		_ = e.admin.Close()
	}
}

func (cs *clients) release(e *clientEntry) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	e.refs--
	if e.refs == 0 && e.dropped {
		_ = e.admin.Close()
	}
}

// len is the number of clients kept.
func (cs *clients) len() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.entries)
}

func (cs *clients) close() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil
	}
	cs.closed = true
	var errs []error
	for _, e := range cs.entries {
		e.dropped = true
		if e.refs == 0 {
			errs = append(errs, e.admin.Close())
		}
	}
	cs.entries = nil
	return errors.Join(errs...)
}
