package main

import (
	"context"

	"github.com/bolide-mq/bolide/client"
)

var _ = context.Background

func main() {
_, _ = client.NewAdmin(client.WithConsumeFrom(client.ConsumeFromFirst))
}
