package rocketmqgo_test

import (
	"context"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"go.uber.org/zap"
)

// Helpers around the Bolide SDK, the other kind of client.

// sdkOpts are the common options of SDK clients on c.
func sdkOpts(c *cluster) []client.Option {
	return []client.Option{client.WithNameServers(c.NameSrv), client.WithLogger(zap.NewNop())}
}

// newSDKProducer starts a Bolide SDK producer of a fresh group.
func newSDKProducer(t testing.TB, c *cluster) *client.Producer {
	t.Helper()
	var opts []client.ProducerOption
	for _, o := range sdkOpts(c) {
		opts = append(opts, o)
	}
	p, err := client.NewProducer(uniq("sdkpg"), opts...)
	if err != nil {
		t.Fatalf("new SDK producer: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start SDK producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// startSDKConsumer starts a Bolide SDK push consumer of group on topic.
func startSDKConsumer(t testing.TB, c *cluster, group, topic string, l client.ConcurrentListener, opts ...client.ConsumerOption) *client.PushConsumer {
	t.Helper()
	base := []client.ConsumerOption{client.WithConsumeFrom(client.ConsumeFromFirst)}
	for _, o := range sdkOpts(c) {
		base = append(base, o)
	}
	pc, err := client.NewPushConsumer(group, append(base, opts...)...)
	if err != nil {
		t.Fatalf("new SDK consumer: %v", err)
	}
	if err := pc.Subscribe(topic, "*", l); err != nil {
		t.Fatalf("SDK subscribe: %v", err)
	}
	if err := pc.Start(context.Background()); err != nil {
		t.Fatalf("start SDK consumer: %v", err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	return pc
}

// waitDeadLetters waits until group has n dead letters and returns them.
func waitDeadLetters(t testing.TB, c *cluster, group string, n int, d time.Duration) []client.DeadLetter {
	t.Helper()
	var (
		dl  []client.DeadLetter
		err error
	)
	ok := waitFor(d, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dl, err = c.Admin.DeadLetters(ctx, group, client.DeadLetterQuery{})
		return err == nil && len(dl) >= n
	})
	if !ok {
		t.Fatalf("%d dead letters of group %s after %v, want %d (last error %v)", len(dl), group, d, n, err)
	}
	return dl
}

// groupMembers returns the client ids the brokers list for group.
func groupMembers(c *cluster, group string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gs, err := c.Admin.ConsumerGroups(ctx)
	if err != nil {
		return nil
	}
	for _, g := range gs {
		if g.Name == group {
			return g.ClientIDs
		}
	}
	return nil
}
