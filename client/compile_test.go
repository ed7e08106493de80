package client

import (
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/internal/doccheck"
)

// TestMisuseDoesNotCompile: an option given to a client that would ignore
// it, or a listener of the wrong type, is a compile error, not a runtime
// one; the same calls done right compile.
func TestMisuseDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet")
	}
	const header = "package main\n\nimport (\n\t\"context\"\n\n\t\"github.com/bolide-mq/bolide/client\"\n)\n\nvar _ = context.Background\n\nfunc main() {\n"
	cases := []struct {
		name, body, want string // want "": compiles
	}{
		{"right", `
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
`, ""},
		{"consumer_option_to_producer", `_, _ = client.NewProducer("g", client.WithConsumeFrom(client.ConsumeFromFirst))`,
			"does not implement client.ProducerOption"},
		{"consumer_option_to_txn_producer", `_, _ = client.NewTransactionProducer("g", nil, client.WithMaxReconsumeTimes(0))`,
			"does not implement client.ProducerOption"},
		{"producer_option_to_consumer", `_, _ = client.NewPushConsumer("g", client.WithSendRetries(3))`,
			"does not implement client.ConsumerOption"},
		{"producer_option_to_pull_consumer", `_, _ = client.NewPullConsumer("g", client.WithAsyncSendLimit(3))`,
			"does not implement client.ConsumerOption"},
		{"consumer_option_to_admin", `_, _ = client.NewAdmin(client.WithConsumeFrom(client.ConsumeFromFirst))`,
			"does not implement client.Option"},
		{"consumer_option_to_simple_consumer", `_, _ = client.NewSimpleConsumer("g", nil, 0, client.WithPullBatchSize(1))`,
			"does not implement client.Option"},
		{"consumer_option_in_bundle", `_ = client.WithOptions(client.WithPullBatchSize(1))`,
			"does not implement client.Option"},
		{"listener_of_wrong_type", `
	c, _ := client.NewPushConsumer("g")
	_ = c.Subscribe("t", "*", func(string) {})`, "does not implement client.Listener"},
		{"listener_as_any", `
	c, _ := client.NewPushConsumer("g")
	var l any = client.ConcurrentListener(nil)
	_ = c.Subscribe("t", "*", l)`, "does not implement client.Listener"},
	}
	var srcs []doccheck.Source
	for _, c := range cases {
		srcs = append(srcs, doccheck.Source{Name: c.name, Code: []byte(header + c.body + "\n}\n")})
	}
	diags, err := doccheck.Vet(".", srcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		d, failed := diags[c.name]
		switch {
		case c.want == "" && failed:
			t.Errorf("%s does not compile:\n%s", c.name, d)
		case c.want != "" && !strings.Contains(d, c.want):
			t.Errorf("%s: diagnostics %q, want a compile error %q", c.name, d, c.want)
		}
	}
}
