package main

import (
	"context"

	"github.com/bolide-mq/bolide/client"
)

var _ = context.Background

func main() {
_, _ = client.NewSimpleConsumer("g", nil, 0, client.WithPullBatchSize(1))
}
