package main

import (
	"context"

	"github.com/bolide-mq/bolide/client"
)

var _ = context.Background

func main() {
_ = client.WithOptions(client.WithPullBatchSize(1))
}
