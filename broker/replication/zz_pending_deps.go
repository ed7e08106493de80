package replication

// Temporary stand-ins for the APIs of parts C (epoch file, store
// truncation and dispatch limit) and D (ha v2), removed when they land.

import (
	"context"
	"errors"
	"time"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/ha"
)

type epochFile struct{ e []ha.EpochEntry }

func loadEpochFile(string) (*epochFile, error)       { return &epochFile{}, nil }
func (f *epochFile) Entries() []ha.EpochEntry        { return append([]ha.EpochEntry(nil), f.e...) }
func (f *epochFile) Append(e ha.EpochEntry) error    { f.e = append(f.e, e); return nil }
func (f *epochFile) Replace(e []ha.EpochEntry) error { f.e = e; return nil }
func (f *epochFile) TruncateTo(int64) error          { return nil }

const noDispatchLimit = int64(-1)

func storeTruncateTo(ctx context.Context, s *store.Store, off int64) error {
	return errors.New("truncation not available")
}
func storeSetDispatchLimit(s *store.Store, off int64) {}

func srvAckedBy(s *ha.Server, ids []int64) int64 {
	m := map[int64]ha.SlaveStatus{}
	for _, st := range s.Slaves() {
		m[st.BrokerID] = st
	}
	out := int64(-1)
	for i, id := range ids {
		st, ok := m[id]
		if !ok || !st.Connected {
			return -1
		}
		if i == 0 || st.AckOffset < out {
			out = st.AckOffset
		}
	}
	return out
}

func srvWaitReplicatedBy(ctx context.Context, s *ha.Server, end int64, ids func() []int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l := ids()
		if len(l) == 0 || srvAckedBy(s, l) >= end {
			return nil
		}
		if time.Now().After(deadline) {
			return ha.ErrSlaveTimeout
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func srvWake(s *ha.Server) {}

func clientV2Options(co *ha.ClientOptions, epochs func() []ha.EpochEntry, minEpoch func() int64, onTruncate func(fork, epoch int64) error) {
}
func serverV2Options(so *ha.ServerOptions, epochs func() []ha.EpochEntry) {}
func welcomeEpochs(w ha.Welcome) []ha.EpochEntry                          { return nil }
