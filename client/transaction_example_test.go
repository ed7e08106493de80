package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/bolide-mq/bolide/client"
)

// orders is a local transaction store: an order is saved with the id of
// the transaction that announces it, so that a check can tell whether the
// local transaction committed.
type orders struct{ db map[string]string } // transaction id → order

func (o *orders) ExecuteLocalTransaction(ctx context.Context, msg *client.Message, arg any) client.LocalTransactionState {
	id := msg.Properties[client.PropertyTransactionID]
	o.db[id] = arg.(string) // INSERT the order, in the same database transaction as the id
	return client.CommitMessage
}

func (o *orders) CheckLocalTransaction(ctx context.Context, msg *client.MessageExt) client.LocalTransactionState {
	if _, ok := o.db[msg.MsgID]; ok {
		return client.CommitMessage
	}
	return client.RollbackMessage
}

// A transactional message is delivered only if the local transaction that
// goes with it commits.
func ExampleTransactionProducer() {
	ctx := context.Background()
	p, err := client.NewTransactionProducer("order-service", &orders{db: map[string]string{}},
		client.WithNameServers("127.0.0.1:9876"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	res, err := p.SendInTransaction(ctx, &client.Message{Topic: "orders", Tag: "created", Body: []byte(`{"id":42}`)}, "order-42")
	if err != nil {
		log.Fatal(err) // the half message was not stored: the local transaction did not run
	}
	fmt.Println(res.State, res.EndErr) // EndErr != nil: the broker will check back
}
