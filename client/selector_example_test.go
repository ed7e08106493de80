package client_test

import (
	"context"
	"errors"
	"log"

	"github.com/bolide-mq/bolide/client"
)

func ExamplePushConsumer_SubscribeSelector() {
	c, err := client.NewPushConsumer("eu-large-orders", client.WithNameServers("127.0.0.1:9876"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// The brokers evaluate the condition on each message's properties
	// (Message.Properties; TAGS is the tag): only matching messages are sent.
	err = c.SubscribeSelector("orders", client.SQL92("region = 'eu' AND amount > 100 AND TAGS <> 'test'"),
		client.ConcurrentListener(func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				log.Printf("order %s from %s: %s", m.Keys, m.Properties["region"], m.Body)
			}
			return client.ConsumeSuccess
		}))
	if errors.Is(err, client.ErrSubscriptionParse) {
		log.Fatal(err) // the error says where in the condition the mistake is
	} else if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}
