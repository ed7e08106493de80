package auth

import (
	"sync"
	"time"
)

// replayMax bounds the replay cache; past it, expired entries are swept,
// and if none are, the cache starts again (losing replay detection for
// the headers it held rather than growing without bound).
const replayMax = 1 << 17

// replayCache remembers, for each signed header, when it was first used
// and by which connection (peer address). A header is admitted on its
// first connection at any time, on others only within ReplayGrace of its
// first use.
type replayCache struct {
	mu      sync.Mutex
	entries map[replayKey]replayEntry
}

type replayKey struct {
	ak  string
	sig [20]byte
}

type replayEntry struct {
	peer  string
	first time.Time
	until time.Time
}

func (c *replayCache) init() { c.entries = make(map[replayKey]replayEntry) }

func (c *replayCache) admit(ak string, sig []byte, peer string, now time.Time, window time.Duration) bool {
	var k replayKey
	k.ak = ak
	copy(k.sig[:], sig)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if ok && now.Before(e.until) {
		return e.peer == peer || now.Sub(e.first) <= ReplayGrace
	}
	if len(c.entries) >= replayMax {
		for key, old := range c.entries {
			if !now.Before(old.until) {
				delete(c.entries, key)
			}
		}
		if len(c.entries) >= replayMax {
			c.entries = make(map[replayKey]replayEntry)
		}
	}
	c.entries[k] = replayEntry{peer: peer, first: now, until: now.Add(window)}
	return true
}
