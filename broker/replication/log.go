package replication

import (
	"context"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/ha"
)

// haSource is the master's CommitLog as the HA server reads it.
type haSource struct{ l *commitlog.Log }

func (s haSource) MinOffset() int64                  { return s.l.MinOffset() }
func (s haSource) CommittedOffset() int64            { return s.l.CommittedOffset() }
func (s haSource) CommittedChanged() <-chan struct{} { return s.l.CommittedChanged() }
func (s haSource) SegmentSize() int64                { return s.l.Options().SegmentSize }
func (s haSource) LastStoreTimestamp() int64         { return s.l.LastStoreTimestamp() }

func (s haSource) ReadChunk(off int64, max int, dst []byte) ([]byte, int64, error) {
	return s.l.ReadChunk(off, max, dst)
}

func (s haSource) RecordAt(off int64) (ha.RecordRef, error) {
	r, err := s.l.RecordAt(off)
	return recordRef(r), err
}

func recordRef(r commitlog.RecordInfo) ha.RecordRef {
	return ha.RecordRef{Offset: r.Offset, Blank: r.Blank, Size: r.Size, Checksum: r.Checksum, StoreTimestamp: r.StoreTimestamp}
}

// haReplica is the slave's store as the HA client writes it: bytes go to
// the CommitLog, and the store's dispatcher builds the queues from them.
type haReplica struct{ s *store.Store }

func (r haReplica) MaxOffset() int64          { return r.s.CommitLog().MaxOffset() }
func (r haReplica) SegmentSize() int64        { return r.s.CommitLog().Options().SegmentSize }
func (r haReplica) LastStoreTimestamp() int64 { return r.s.CommitLog().LastStoreTimestamp() }
func (r haReplica) StartAt(off int64) error   { return r.s.StartAt(off) }

func (r haReplica) LastRecord() (ha.RecordRef, bool, error) {
	info, ok, err := r.s.CommitLog().LastRecord()
	return recordRef(info), ok, err
}

func (r haReplica) AppendRaw(off int64, data []byte) (int64, error) {
	return r.s.CommitLog().AppendRawNoWait(off, data)
}

// DurableOnAppend: with async flush an appended byte is in the file,
// which is what an async-flush ack promises.
func (r haReplica) DurableOnAppend() bool {
	return r.s.CommitLog().Options().FlushMode != commitlog.FlushSync
}

// WaitDurable honours the slave's own flush mode: in sync mode an ack
// follows the fsync.
func (r haReplica) WaitDurable(ctx context.Context, end int64) error {
	l := r.s.CommitLog()
	if l.Options().FlushMode != commitlog.FlushSync {
		return nil
	}
	return l.WaitFlushed(ctx, end)
}
