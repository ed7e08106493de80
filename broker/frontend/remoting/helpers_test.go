package remoting_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// TestMain fails the package when a test leaves a goroutine behind: the
// front end's connections, sessions and forwarders must all stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startBroker starts a broker with every front end on 127.0.0.1:0, without
// NameServers, and closes it when the test ends.
func startBroker(t *testing.T, mutate ...func(*broker.Options)) *server.Server {
	t.Helper()
	opts := broker.DefaultOptions(t.TempDir())
	opts.ListenAddr = "127.0.0.1:0"
	opts.NameServers = nil
	opts.GossipAddr = "off"
	opts.Store.CommitLog.SegmentSize = 4 << 20
	opts.Store.ConsumeQueue.UnitsPerFile = 1000
	opts.Store.Index.SlotCount = 1000
	opts.Store.Index.MaxEntries = 4000
	opts.MaxMessageSize = 1 << 20
	for _, f := range mutate {
		f(&opts)
	}
	b, err := server.New(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// dialBroker opens a remoting connection; h serves the broker's calls
// (nil: ignored).
func dialBroker(t *testing.T, addr string, h rmq.Handler) *rmq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := rmq.Dial(ctx, addr, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); <-c.Done() })
	return c
}

// invoke sends a request and returns its response, failing the test on a
// transport error.
func invoke(t *testing.T, c *rmq.Conn, code int32, ext map[string]string, body []byte) *rmq.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := rmq.NewRequest(code, ext, body)
	if code == rmq.UpdateConsumerOffset {
		req.Language = "JAVA" // RocketMQ's Go client is not answered (TestGoClientCommitUnanswered)
	}
	resp, err := c.Invoke(ctx, req)
	if err != nil {
		t.Fatalf("request %d: %v", code, err)
	}
	return resp
}
