package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/bolide-mq/bolide/client"
)

func ExampleProducer() {
	p, err := client.NewProducer("billing-producer", client.WithNameServers("127.0.0.1:9876"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	res, err := p.Send(ctx, &client.Message{Topic: "orders", Tag: "paid", Keys: []string{"order-42"}, Body: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored in", res.BrokerName, res.QueueID, res.QueueOffset)

	// Messages with the same sharding key keep their order.
	_, err = p.Send(ctx, &client.Message{Topic: "orders", Body: []byte("step 2")}, client.WithShardingKey("order-42"))
	if err != nil {
		log.Fatal(err)
	}
}

func ExamplePushConsumer() {
	c, err := client.NewPushConsumer("billing", client.WithNameServers("127.0.0.1:9876"),
		client.WithConsumeFrom(client.ConsumeFromFirst))
	if err != nil {
		log.Fatal(err)
	}
	err = c.Subscribe("orders", "paid || refunded", client.ConcurrentListener(
		func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				fmt.Printf("%s %s %s\n", m.Tag, m.MsgID, m.Body)
			}
			return client.ConsumeSuccess
		}))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	time.Sleep(time.Minute)
	_ = c.Close() // commits offsets
}

func ExamplePullConsumer() {
	c, err := client.NewPullConsumer("audit", client.WithNameServers("127.0.0.1:9876"), client.WithAutoCommit(false))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Subscribe("orders", "*"); err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		msgs, err := c.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range msgs {
			fmt.Println(m.Queue(), m.QueueOffset)
		}
		if err := c.Commit(ctx); err != nil {
			log.Fatal(err)
		}
	}
}

func ExampleAdmin() {
	a, err := client.NewAdmin(client.WithNameServers("127.0.0.1:9876"))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: "orders", Queues: 8}); err != nil {
		log.Fatal(err)
	}
	msgs, err := a.QueryMessageByKey(ctx, "orders", "order-42", time.Time{}, time.Time{}, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Println(m.MsgID, m.StoreTimestamp)
	}
}
