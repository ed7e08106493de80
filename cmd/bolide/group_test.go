package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// TestGroupConnections: `bolide group connections` lists a running push
// consumer on both brokers and a transactional producer, in a table and
// as JSON; --producers and --consumers select.
func TestGroupConnections(t *testing.T) {
	c := cluster.Start(t, cluster.Options{BrokerGroups: 2})
	c.CreateTopic("orders", 2)
	ns := strings.Join(c.NameServerAddrs(), ",")
	ctx := context.Background()
	cons, err := client.NewPushConsumer("billing", client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Subscribe("orders", "paid||refunded", client.ConcurrentListener(func(context.Context, []*client.MessageExt) client.ConsumeResult {
		return client.ConsumeSuccess
	})); err != nil {
		t.Fatal(err)
	}
	if err := cons.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := client.NewTransactionProducer("billing", undecided{}, client.WithNameServers(c.NameServerAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.SendInTransaction(ctx, &client.Message{Topic: "orders", Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}

	var rows []connectionJSON
	c.WaitFor(20*time.Second, func() error {
		code, out, stderr := runCLI(t, "", "--namesrv", ns, "group", "connections", "billing", "-o", "json")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		rows = nil
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var j connectionJSON
			if err := json.Unmarshal([]byte(line), &j); err != nil {
				return fmt.Errorf("%q: %v", line, err)
			}
			rows = append(rows, j)
		}
		roles := map[string]int{}
		for _, j := range rows {
			roles[j.Role]++
		}
		if roles["consumer"] != 2 || roles["producer"] == 0 {
			return fmt.Errorf("connections: %s", out)
		}
		return nil
	})
	for _, j := range rows {
		if j.Group != "billing" || j.Protocol != "bolide" || j.Language != "GO" || j.RemoteAddr == "" || j.ClientID == "" ||
			j.Broker == "" || j.BrokerAddr == "" || j.ConnectedSince == "" || j.LastHeartbeat == "" {
			t.Fatalf("connection: %+v", j)
		}
		if _, err := time.Parse(time.RFC3339, j.ConnectedSince); err != nil {
			t.Fatalf("connectedSince %q: %v", j.ConnectedSince, err)
		}
		switch j.Role {
		case "consumer":
			if j.ConsumeType != "PUSH" || j.MessageModel != "clustering" || j.Subscriptions["orders"] != "paid||refunded" {
				t.Fatalf("consumer: %+v", j)
			}
		case "producer":
			if j.ConsumeType != "" || j.Subscriptions != nil {
				t.Fatalf("producer: %+v", j)
			}
		}
	}

	code, out, stderr := runCLI(t, "", "--namesrv", ns, "group", "connections", "billing")
	t.Logf("$ bolide group connections billing\n%s", out)
	if code != 0 || stderr != "" || !strings.HasPrefix(out, "ROLE") || strings.Count(out, "\nconsumer ") != 2 ||
		!strings.Contains(out, "\nproducer ") || !strings.Contains(out, "orders(paid||refunded)") || !strings.Contains(out, "PUSH, clustering") {
		t.Fatalf("table (exit %d, stderr %q):\n%s", code, stderr, out)
	}
	code, out, _ = runCLI(t, "", "--namesrv", ns, "group", "connections", "billing", "--producers", "-o", "json")
	if code != 0 || strings.Contains(out, `"consumer"`) || !strings.Contains(out, `"role":"producer"`) {
		t.Fatalf("--producers (exit %d):\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "--namesrv", ns, "group", "connections", "billing", "--consumers", "-o", "json")
	t.Logf("$ bolide group connections billing --consumers -o json\n%s", out)
	if code != 0 || strings.Count(out, `"role":"consumer"`) != 2 || strings.Contains(out, "producer") {
		t.Fatalf("--consumers -o json (exit %d):\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "--namesrv", ns, "group", "connections", "billing", "--consumers")
	if code != 0 || strings.Contains(out, "producer") || strings.Count(out, "\nconsumer ") != 2 {
		t.Fatalf("--consumers (exit %d):\n%s", code, out)
	}

	// A group nobody is connected as: nothing on stdout, a note on stderr
	// (none with -o json).
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "group", "connections", "nobody")
	if code != 0 || out != "" || stderr != "no client is connected as a producer or consumer of nobody\n" {
		t.Fatalf("a group without clients: exit %d, %q, %q", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "group", "connections", "nobody", "-o", "json")
	if code != 0 || out != "" || stderr != "" {
		t.Fatalf("a group without clients, JSON: exit %d, %q, %q", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "group", "connections", "bad group")
	checkOneLineError(t, []string{"group", "connections", "bad group"}, code, out, stderr, exitUsage, "illegal group name")
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "group", "connections")
	checkOneLineError(t, []string{"group", "connections"}, code, out, stderr, exitUsage, "GROUP")
}
