package broker

import (
	"time"

	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/commitlog"
)

// BrokerInfo is what a broker says about itself.
type BrokerInfo struct {
	Cluster, BrokerName string
	BrokerID            int64
	Addr, Version       string
	FlushMode           string
	Replication         replication.Info
	CommitLogMinOffset  int64
	CommitLogMaxOffset  int64
	DispatchBehindBytes int64
	DiskUsedRatio       float64
	StoreBytes          int64
	StartTime           time.Time
}

// Info describes the broker.
func (b *Broker) Info() BrokerInfo {
	clog := b.store.CommitLog()
	var storeBytes int64
	for _, seg := range clog.Segments() {
		storeBytes += seg.End - seg.Start
	}
	return BrokerInfo{
		Cluster: b.opts.Cluster, BrokerName: b.opts.BrokerName, BrokerID: b.brokerID(),
		Addr: b.addr, Version: b.opts.Version, FlushMode: clog.Options().FlushMode.String(),
		Replication:        b.repl.Info(),
		CommitLogMinOffset: clog.MinOffset(), CommitLogMaxOffset: clog.MaxOffset(),
		DispatchBehindBytes: b.store.DispatchBehind(), DiskUsedRatio: clog.DiskUsage(),
		StoreBytes: storeBytes, StartTime: b.started,
	}
}

// SendsWait reports whether an acknowledged send waits for the disk (sync
// flush) or for the slaves (sync replication): front ends serve such sends
// off their connection's reading goroutine. Both modes are fixed for the
// broker's life.
func (b *Broker) SendsWait() bool {
	return b.store.CommitLog().Options().FlushMode == commitlog.FlushSync || b.repl.Mode() == ReplicationSync
}

// Replication is the broker's replication: role, status, metadata for
// slaves, promotion.
func (b *Broker) Replication() *replication.Replicator { return b.repl }

// Retry is the broker's retry and dead-letter service.
func (b *Broker) Retry() *retry.Service { return b.retry }
