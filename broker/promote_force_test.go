package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/wire"
)

// Without a controller, a slave that never replicated from its master is
// not promoted unless forced: it could lack acknowledged messages. A
// forced promotion appends its epoch to the epoch entries.
func TestPromoteRefusesSlaveThatNeverReplicated(t *testing.T) {
	dir := t.TempDir()
	b := startAt(t, dir, haOpts(broker.ReplicationAsync), func(o *broker.Options) {
		o.BrokerID = 1
		o.Replication.MasterHAAddr = "127.0.0.1:1" // nobody there
	})
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.Promote(ctx, broker.PromoteRequest{}); !errors.Is(err, wire.ErrInvalidParameter) {
		t.Fatalf("promotion of a slave that never replicated: %v", err)
	}
	if b.Role() != broker.RoleSlave {
		t.Fatalf("role %s after a refused promotion", b.Role())
	}
	res, err := b.Promote(ctx, broker.PromoteRequest{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Epoch != 1 || b.Role() != broker.RoleMaster {
		t.Fatalf("forced promotion: %+v, role %s", res, b.Role())
	}
	if e := b.Replication().Info().Epochs; len(e) != 1 || e[0].Epoch != 1 || e[0].Start != res.MaxOffset {
		t.Fatalf("epoch entries %v", e)
	}
}
