package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/bolide-mq/bolide/client"
)

func ExampleSimpleConsumer() {
	ctx := context.Background()
	adm, err := client.NewAdmin(client.WithNameServers("127.0.0.1:9876"))
	if err != nil {
		log.Fatal(err)
	}
	defer adm.Close()
	// A FIFO group: a message is redelivered at most 4 times, 1 s, 5 s
	// and then 10 s after a failure.
	err = adm.CreateSubscriptionGroup(ctx, client.SubscriptionGroupSpec{Name: "ledger", FIFO: true,
		MaxDeliveryAttempts: 5, RetryBackoff: []time.Duration{time.Second, 5 * time.Second, 10 * time.Second}})
	if err != nil {
		log.Fatal(err)
	}

	c, err := client.NewSimpleConsumer("ledger", map[string]string{"payments": "*"}, 20*time.Second,
		client.WithNameServers("127.0.0.1:9876"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for {
		msgs, err := c.Receive(ctx, 16, time.Minute)
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range msgs {
			fmt.Printf("%s attempt %d: %s\n", m.MsgID, m.DeliveryAttempt, m.Body)
			if m.Tag == "later" {
				// Give it back: delivered again after the group's backoff.
				if _, err := c.Nack(ctx, m); err != nil {
					log.Print(err)
				}
				continue
			}
			if err := c.Ack(ctx, m); err != nil {
				log.Print(err) // its minute ran out: it comes again
			}
		}
	}
}
