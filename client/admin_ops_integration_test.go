package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// TestAdminGroupConnections: a producer and a push consumer of the SDK
// are listed with their connection, on every broker they talk to.
func TestAdminGroupConnections(t *testing.T) {
	e := startEnv(t, 1, 2)
	ctx := context.Background()
	topic := e.topic(2)
	// The SDK's producers say who they are to the brokers only when they
	// are transactional (plain sends need no session).
	p, err := NewTransactionProducer("conn-pg", stuck{}, e.popts()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.SendInTransaction(ctx, &Message{Topic: topic, Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	c, err := NewPushConsumer("conn-cg", e.copts()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, "a||b", ConcurrentListener(func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var gc *GroupConnections
	e.waitFor(20*time.Second, "the consumer on both brokers", func() error {
		gc, err = e.admin.GroupConnections(ctx, "conn-cg")
		if err != nil {
			return err
		}
		if len(gc.Consumers) != 2 || len(gc.Producers) != 0 || len(gc.Unanswered) != 0 {
			return fmt.Errorf("%+v", gc)
		}
		return nil
	})
	brokers := map[string]bool{}
	for _, cc := range gc.Consumers {
		brokers[cc.BrokerName] = true
		if cc.Protocol != "bolide" || cc.Language != "GO" || cc.RemoteAddr == "" || cc.BrokerAddr == "" || cc.ClientID == "" ||
			cc.ConsumeType != "PUSH" || cc.MessageModel != Clustering || cc.Subscriptions[topic] != "a||b" ||
			cc.ConnectedSince.IsZero() || cc.LastHeartbeat.Before(cc.ConnectedSince) {
			t.Fatalf("consumer connection: %+v", cc)
		}
	}
	if !brokers["broker-a"] || !brokers["broker-b"] {
		t.Fatalf("consumer connected to %v", brokers)
	}

	e.waitFor(20*time.Second, "the producer", func() error {
		gc, err = e.admin.GroupConnections(ctx, "conn-pg")
		if err != nil {
			return err
		}
		if len(gc.Producers) == 0 || len(gc.Consumers) != 0 {
			return fmt.Errorf("%+v", gc)
		}
		return nil
	})
	for _, pc := range gc.Producers {
		if pc.Protocol != "bolide" || pc.RemoteAddr == "" || pc.ConsumeType != "" || pc.Subscriptions != nil {
			t.Fatalf("producer connection: %+v", pc)
		}
	}

	if gc, err := e.admin.GroupConnections(ctx, "nobody-here"); err != nil || len(gc.Producers)+len(gc.Consumers) != 0 {
		t.Fatalf("a group without clients: %+v, %v", gc, err)
	}
	if _, err := e.admin.GroupConnections(ctx, "bad group"); !errors.Is(err, ErrIllegalGroup) {
		t.Fatalf("illegal group: %v", err)
	}

	// The consumer leaves: its connections go.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	e.waitFor(20*time.Second, "the consumer gone", func() error {
		gc, err = e.admin.GroupConnections(ctx, "conn-cg")
		if err != nil {
			return err
		}
		if len(gc.Consumers) != 0 {
			return fmt.Errorf("%+v", gc.Consumers)
		}
		return nil
	})
}

// TestAdminUpdateTopicRefusesUnknown: UpdateTopic of a topic that does not
// exist is TOPIC_NOT_EXIST and creates nothing.
func TestAdminUpdateTopicRefusesUnknown(t *testing.T) {
	e := startEnv(t, 1, 1)
	ctx := context.Background()
	if err := e.admin.UpdateTopic(ctx, TopicSpec{Name: "never-created", Queues: 2}); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("update of an unknown topic: %v", err)
	}
	if _, err := e.admin.Route(ctx, "never-created"); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("route after a refused update: %v", err)
	}
	cfgs, err := e.admin.AllTopicConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfgs["never-created"]; ok {
		t.Fatalf("a broker has the topic: %+v", cfgs["never-created"])
	}
}

// stuck never decides a transaction.
type stuck struct{}

func (stuck) ExecuteLocalTransaction(context.Context, *Message, any) LocalTransactionState {
	return Unknown
}
func (stuck) CheckLocalTransaction(context.Context, *MessageExt) LocalTransactionState {
	return Unknown
}

// TestAdminResolveTransaction: an operator commits a transaction its
// producer never decided; the message reaches its topic once; a rollback
// after it conflicts.
func TestAdminResolveTransaction(t *testing.T) {
	// Checked every 200 ms but discarded only after 1000 checks: it stays
	// pending for the test.
	e := startEnvWith(t, cluster.Options{NameServers: 1, BrokerGroups: 1,
		Broker: cluster.TransactionTimings(200*time.Millisecond, 200*time.Millisecond, 1000)})
	ctx := context.Background()
	topic := e.topic(1)
	p, err := NewTransactionProducer("resolve-pg", stuck{}, e.popts()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res, err := p.SendInTransaction(ctx, &Message{Topic: topic, Body: []byte("pay 9")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pending PendingTransaction
	e.waitFor(20*time.Second, "the transaction pending", func() error {
		list, err := e.admin.PendingTransactions(ctx, TransactionQuery{Group: "resolve-pg"})
		if err != nil {
			return err
		}
		if len(list) != 1 || list[0].TransactionID != res.TransactionID {
			return fmt.Errorf("pending: %+v", list)
		}
		pending = list[0]
		return nil
	})
	// The first copy of the half message names it too, however often it
	// was checked (and stored again) since.
	at, err := e.admin.PendingTransactionAt(ctx, "broker-a", res.CommitLogOffset)
	if err != nil {
		t.Fatal(err)
	}
	if at.TransactionID != res.TransactionID || at.Group != "resolve-pg" || at.Queue.Topic != topic || at.CommitLogOffset != res.CommitLogOffset {
		t.Fatalf("half message at %d: %+v (pending %+v)", res.CommitLogOffset, at, pending)
	}
	if err := e.admin.ResolveTransaction(ctx, *at, true); err != nil {
		t.Fatal(err)
	}
	// Committed: the message is in its topic, once; the same answer again
	// is no error, the other one conflicts.
	if err := e.admin.ResolveTransaction(ctx, pending, true); err != nil {
		t.Fatalf("a second commit: %v", err)
	}
	if err := e.admin.ResolveTransaction(ctx, pending, false); !errors.Is(err, ErrTransactionConflict) {
		t.Fatalf("a rollback after the commit: %v", err)
	}
	// The consume queue is built asynchronously: the committed message
	// shows in it a moment after the commit returns.
	var st []QueueStatus
	e.waitFor(20*time.Second, "the committed message in its topic", func() error {
		var err error
		if st, err = e.admin.QueueStatus(ctx, topic); err != nil {
			return err
		}
		var stored int64
		for _, q := range st {
			stored += q.MaxOffset
		}
		if stored != 1 {
			return fmt.Errorf("%d messages in %s after the commit, want 1", stored, topic)
		}
		return nil
	})
	e.waitFor(20*time.Second, "nothing pending", func() error {
		list, err := e.admin.PendingTransactions(ctx, TransactionQuery{Group: "resolve-pg"})
		if err != nil || len(list) != 0 {
			return fmt.Errorf("pending: %+v, %v", list, err)
		}
		return nil
	})

	// An offset that holds no half message.
	sent, err := e.admin.ViewMessageAt(ctx, MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: st[0].Queue.QueueID}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PendingTransactionAt(ctx, "broker-a", sent.CommitLogOffset); !errors.Is(err, ErrTransactionNotFound) {
		t.Fatalf("a committed message's offset: %v", err)
	}
	if _, err := e.admin.PendingTransactionAt(ctx, "broker-a", 1<<40); !errors.Is(err, ErrTransactionNotFound) {
		t.Fatalf("an offset past the log: %v", err)
	}
	if _, err := e.admin.PendingTransactionAt(ctx, "broker-z", 0); !errors.Is(err, ErrBrokerNotExist) {
		t.Fatalf("an unknown broker: %v", err)
	}
}
