package main

import (
	"context"

	"github.com/bolide-mq/bolide/client"
)

var _ = context.Background

func main() {

	shared := client.WithOptions(client.WithNameServers("127.0.0.1:9876"), client.WithLogger(nil))
	_, _ = client.NewProducer("g", shared, client.WithSendRetries(3), client.WithTransport(client.TransportGRPC))
	_, _ = client.NewTransactionProducer("g", nil, shared, client.WithSendTimeout(0), client.WithHeartbeatInterval(0))
	_, _ = client.NewPullConsumer("g", shared, client.WithConsumeFrom(client.ConsumeFromFirst))
	_, _ = client.NewAdmin(shared, client.WithRPCTimeout(0))
	_, _ = client.NewSimpleConsumer("g", map[string]string{"t": "*"}, 0, shared, client.WithRPCTimeout(0))
	c, _ := client.NewPushConsumer("g", shared, client.WithMaxReconsumeTimes(0))
	_ = c.Subscribe("t", "*", client.ConcurrentListener(func(context.Context, []*client.MessageExt) client.ConsumeResult { return client.ConsumeSuccess }))
	_ = c.Subscribe("t", "*", client.ErrorListener(func(context.Context, []*client.MessageExt) error { return nil }))
	_ = c.Subscribe("t", "*", client.OrderlyListener(func(context.Context, []*client.MessageExt) client.OrderlyResult { return client.OrderlySuccess }))

}
