package client

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// routeWritableOn reports whether the producer's cached route of topic
// has a writable queue on broker name.
func routeWritableOn(p *Producer, topic, name string) bool {
	ri := p.b.routes.cached(topic)
	if ri == nil {
		return false
	}
	for _, q := range ri.publish {
		if q.BrokerName == name {
			return true
		}
	}
	return false
}

// TestProducerRetriesDrainedBroker: a broker's write permission is taken
// away while producers hold routes from before (refreshed only hourly
// here): the sends their stale routes aim at it are refused NO_PERMISSION,
// the producer asks the broker, finds it read only, and sends to the other
// broker — no send fails, whether it runs during the change or after it.
func TestProducerRetriesDrainedBroker(t *testing.T) {
	e := startEnv(t, 1, 2)
	topic := e.topic(2)
	ctx := context.Background()
	warm := func() *Producer {
		p := e.producer(WithRouteRefreshInterval(time.Hour))
		e.sendN(p, topic, 4, nil)
		if !routeWritableOn(p, topic, "broker-a") || !routeWritableOn(p, topic, "broker-b") {
			t.Fatal("the warm route does not have both brokers writable")
		}
		return p
	}
	p, background := warm(), warm()

	// One producer sends all along, through the change.
	var (
		wg            sync.WaitGroup
		sent, afterAt atomic.Int64
		sendErr       error
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := background.Send(ctx, &Message{Topic: topic, Body: []byte("background")}); err != nil {
				sendErr = err
				return
			}
			sent.Add(1)
		}
	}()
	stopped := false
	stopSender := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopSender()
	e.waitFor(10*time.Second, "the background producer sending", func() error {
		if sent.Load() < 5 {
			return errors.New("fewer than 5 sends")
		}
		return nil
	})

	if _, err := e.admin.SetBrokerWritable(ctx, "broker-a", false); err != nil {
		t.Fatal(err)
	}
	afterAt.Store(sent.Load())
	// The other producer's route still has broker-a writable: its sends
	// meet the refusal.
	if !routeWritableOn(p, topic, "broker-a") {
		t.Fatal("the producer's route was refreshed before the sends; the test would prove nothing")
	}
	// The drain reaches the NameServers with the broker's next
	// registration, which it asks for at once but makes on its own
	// goroutine: wait for it, so that the route the producer fetches after
	// the refusal is the drained one (on a loaded machine the 20 sends
	// below could otherwise all come before it).
	e.waitFor(10*time.Second, "the NameServer's route without broker-a writable", func() error {
		r, err := e.admin.Route(ctx, topic)
		if err != nil {
			return err
		}
		for _, q := range newRouteInfo(r, time.Now()).publish {
			if q.BrokerName == "broker-a" {
				return errors.New("broker-a still writable")
			}
		}
		return nil
	})
	for i, r := range e.sendN(p, topic, 20, nil) {
		if r.BrokerName != "broker-b" {
			t.Fatalf("send %d after the drain stored on %s", i, r.BrokerName)
		}
	}
	if routeWritableOn(p, topic, "broker-a") {
		t.Error("after the refusal the producer's route still has broker-a writable")
	}
	e.waitFor(10*time.Second, "background sends after the drain", func() error {
		if sent.Load()-afterAt.Load() < 20 {
			return errors.New("fewer than 20 background sends after the drain")
		}
		return nil
	})
	stopSender()
	if sendErr != nil {
		t.Fatalf("a background send failed: %v", sendErr)
	}
	// An explicit queue on the drained broker is not moved elsewhere: the
	// refusal is returned, marked as the broker's.
	_, err := p.Send(ctx, &Message{Topic: topic, Body: []byte("x")}, WithQueue(MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0}))
	if !errors.Is(err, ErrNoPermission) || !errors.Is(err, errBrokerNotWritable) {
		t.Fatalf("send to a queue of broker-a: %v", err)
	}
}

// TestProducerACLRefusalNotRetried: with ACL on, a NO_PERMISSION that is
// the caller's (no PUB on the topic) is not taken for a draining broker
// and not retried; a producer with PUB still gets past a drained broker
// (asking the broker is a read its credentials allow).
func TestProducerACLRefusalNotRetried(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: "admin-key", SecretKey: "admin-secret", Admin: true},
		{AccessKey: "app-key", SecretKey: "app-secret", TopicPerms: []string{"acl-orders=PUB"}},
	}}); err != nil {
		t.Fatal(err)
	}
	e := startEnvWith(t, cluster.Options{BrokerGroups: 2, Broker: func(o *broker.Options) {
		o.Auth = auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}
		o.Credentials = auth.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	}})
	admin, err := NewAdmin(e.shared(), WithCredentials("admin-key", "admin-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := context.Background()
	for _, topic := range []string{"acl-orders", "acl-other"} {
		if err := admin.CreateTopic(ctx, TopicSpec{Name: topic, Queues: 2}); err != nil {
			t.Fatal(err)
		}
	}
	p := e.producer(WithCredentials("app-key", "app-secret"), WithRouteRefreshInterval(time.Hour))
	e.sendN(p, "acl-orders", 4, nil)

	_, err = p.Send(ctx, &Message{Topic: "acl-other", Body: []byte("x")})
	if !errors.Is(err, ErrNoPermission) || errors.Is(err, errBrokerNotWritable) || retryableSend(err) {
		t.Fatalf("send without PUB: %v (retryable %v), want a NO_PERMISSION that is not retried", err, retryableSend(err))
	}

	if _, err := admin.SetBrokerWritable(ctx, "broker-a", false); err != nil {
		t.Fatal(err)
	}
	if !routeWritableOn(p, "acl-orders", "broker-a") {
		t.Fatal("the producer's route was refreshed before the sends")
	}
	for i, r := range e.sendN(p, "acl-orders", 10, nil) {
		if r.BrokerName != "broker-b" {
			t.Fatalf("send %d after the drain stored on %s", i, r.BrokerName)
		}
	}
}

// TestRetryableSendNoPermission: a NO_PERMISSION is retried only when
// marked as a draining broker's.
func TestRetryableSendNoPermission(t *testing.T) {
	refusal := wire.Errorf(pb.Code_NO_PERMISSION, "refused")
	if retryableSend(refusal) || retryableSend(wire.Errorf(pb.Code_UNAUTHENTICATED, "who")) {
		t.Fatal("a plain NO_PERMISSION or UNAUTHENTICATED is retried")
	}
	drained := &notWritableError{broker: "broker-a", err: refusal}
	if !retryableSend(drained) || !errors.Is(drained, ErrNoPermission) || wire.CodeOf(drained) != pb.Code_NO_PERMISSION {
		t.Fatal("a draining broker's refusal is not retried, or lost its code")
	}
}
