package broker

import (
	"context"

	"github.com/bolide-mq/bolide/broker/store"
)

// ReplicationOptions configure master–slave replication.
type ReplicationOptions struct{}

func defaultReplicationOptions() ReplicationOptions { return ReplicationOptions{} }

func (o *ReplicationOptions) validate() error { return nil }

// waitReplicated returns once the stored messages are held by as many
// slaves as the replication mode requires. Without replication a master
// acknowledges on its own flush.
func (b *Broker) waitReplicated(ctx context.Context, res []store.PutResult) error { return nil }

func (b *Broker) startReplication() error { return nil }

func (b *Broker) stopReplication() error { return nil }
