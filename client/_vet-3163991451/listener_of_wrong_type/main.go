package main

import (
	"context"

	"github.com/bolide-mq/bolide/client"
)

var _ = context.Background

func main() {

	c, _ := client.NewPushConsumer("g")
	_ = c.Subscribe("t", "*", func(string) {})
}
