package replication

// Temporary stand-ins for the APIs of part C (epoch file, store
// truncation and dispatch limit), removed when it lands.

import (
	"context"
	"errors"
	"math"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/ha"
)

type epochFile struct{ e []ha.EpochEntry }

func loadEpochFile(string) (*epochFile, error)       { return &epochFile{}, nil }
func (f *epochFile) Entries() []ha.EpochEntry        { return append([]ha.EpochEntry(nil), f.e...) }
func (f *epochFile) Append(e ha.EpochEntry) error    { f.e = append(f.e, e); return nil }
func (f *epochFile) Replace(e []ha.EpochEntry) error { f.e = e; return nil }
func (f *epochFile) TruncateTo(int64) error          { return nil }

const noDispatchLimit = int64(math.MaxInt64)

func storeTruncateTo(ctx context.Context, s *store.Store, off int64) error {
	return errors.New("truncation not available")
}
func storeSetDispatchLimit(s *store.Store, off int64) {}
