package console

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// BenchmarkConsoleScale: /topics with 500 topics and /groups with 200
// groups (declared, with committed offsets), on an in-process cluster of
// two broker groups. The bound is the page rendered in under 1 s;
// each answer here should take a small part of that.
//
//	go test -run '^$' -bench ConsoleScale -benchtime 20x ./internal/console/
func BenchmarkConsoleScale(b *testing.B) {
	c := cluster.Start(b, cluster.Options{BrokerGroups: 2})
	a, err := client.NewAdmin(client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	const topics, groups = 500, 200
	each(topics, func(i int) {
		if err := a.CreateTopic(ctx, client.TopicSpec{Name: fmt.Sprintf("scale-topic-%03d", i), Queues: 4}); err != nil {
			b.Error(err)
		}
	})
	each(groups, func(i int) {
		g := fmt.Sprintf("scale-group-%03d", i)
		if err := a.CreateSubscriptionGroup(ctx, client.SubscriptionGroupSpec{Name: g}); err != nil {
			b.Error(err)
			return
		}
		// A committed offset, so that the group has lag to report.
		if _, err := a.ResetOffset(ctx, g, fmt.Sprintf("scale-topic-%03d", i), client.ResetToEarliest, false); err != nil {
			b.Error(err)
		}
	})
	if b.Failed() {
		return
	}
	e := startConsole(b, c, Options{})
	for _, path := range []string{"/console/api/topics", "/console/api/groups"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Get(e.srv.URL + path)
				if err != nil {
					b.Fatal(err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%s: %d", path, resp.StatusCode)
				}
			}
		})
	}
}
