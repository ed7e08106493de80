package main

import (
	"context"

	"github.com/bolide-mq/bolide/client"
)

var _ = context.Background

func main() {

	c, _ := client.NewPushConsumer("g")
	var l any = client.ConcurrentListener(nil)
	_ = c.Subscribe("t", "*", l)
}
