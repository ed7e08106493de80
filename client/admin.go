package client

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Admin manages topics and inspects brokers, groups and messages. It needs
// no Start; it is safe for concurrent use.
type Admin struct {
	b      *base
	closed atomic.Bool
}

// NewAdmin returns an admin client.
func NewAdmin(opts ...Option) (*Admin, error) {
	o, err := buildOptions(opts, Option.applyProducer) // the same as applyConsumer for an Option
	if err != nil {
		return nil, err
	}
	return &Admin{b: newBase(o, o.instanceName)}, nil
}

// Close closes the connections.
func (a *Admin) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	return a.b.close()
}

func (a *Admin) check() error {
	if a.closed.Load() {
		return ErrClosed
	}
	return nil
}

// brokerCall makes one unary call to the broker at addr and turns its
// status into an error.
func (a *Admin) brokerCall(ctx context.Context, addr string, fn func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error)) error {
	c, err := a.b.broker(addr)
	if err != nil {
		return err
	}
	rctx, cancel := a.b.rpcContext(ctx)
	defer cancel()
	st, err := fn(rctx, c)
	if err != nil {
		if err := brokerFailure(ctx, addr, err); errors.Is(err, ErrBrokerUnreachable) {
			return err
		}
		return fmt.Errorf("broker %s: %w", addr, err)
	}
	if err := fromStatus(st); err != nil {
		return fmt.Errorf("broker %s: %w", addr, err)
	}
	return nil
}

// brokersOf returns the broker groups of a topic, or every group when
// topic is "".
func (a *Admin) brokersOf(ctx context.Context, topic string) ([]BrokerData, error) {
	if topic == "" {
		ci, err := a.ClusterInfo(ctx)
		if err != nil {
			return nil, err
		}
		return ci.allBrokers(), nil
	}
	r, err := a.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	return r.Brokers, nil
}
