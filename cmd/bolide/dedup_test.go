package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// TestSendDedupID: sends repeating a --dedup-id are answered with the
// first copy and stored once; the table output shows the same ids.
func TestSendDedupID(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	c.CreateTopic("cli-dedup", 1)
	ns := strings.Join(c.NameServerAddrs(), ",")
	send := func(args ...string) (string, sendJSON) {
		t.Helper()
		code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns, "send", "--topic", "cli-dedup"}, args...)...)
		if code != 0 {
			t.Fatalf("bolide send %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		var r sendJSON
		if strings.Contains(strings.Join(args, " "), "-o json") {
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
				t.Fatalf("send output %q: %v", out, err)
			}
		}
		return out, r
	}
	_, first := send("--dedup-id", "order-42-paid", "-o", "json", "paid")
	_, again := send("--dedup-id", "order-42-paid", "-o", "json", "paid")
	if first.MsgID != "order-42-paid" || again != first {
		t.Fatalf("first send %+v, resend %+v: want the same result with msg id order-42-paid", first, again)
	}
	table, _ := send("--dedup-id", "order-42-paid", "paid")
	if !strings.Contains(table, "order-42-paid") || !strings.Contains(table, first.OffsetMsgID) {
		t.Fatalf("table output of a resend:\n%s\nwant msg id order-42-paid and offset msg id %s", table, first.OffsetMsgID)
	}
	// Any id the producer gave is a msg id to look the message up by.
	code, out, stderr := runCLI(t, "", "--namesrv", ns, "msg", "get", "order-42-paid", "-o", "json")
	if code != 0 || !strings.Contains(out, first.OffsetMsgID) || strings.Count(out, "\n") != 1 {
		t.Fatalf("msg get order-42-paid: exit %d, %q, %s; want the one stored copy", code, out, stderr)
	}
	// Expanded per message: three ids, sent twice, stored once each.
	send("--dedup-id", "batch-{{Count}}", "--count", "3", "m{{Count}}")
	send("--dedup-id", "batch-{{Count}}", "--count", "3", "m{{Count}}")
	st := c.Broker(0).Store()
	if err := st.WaitDispatched(context.Background(), st.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "topic", "status", "cli-dedup", "-o", "json")
	if code != 0 {
		t.Fatalf("topic status: exit %d: %s", code, stderr)
	}
	var queue struct {
		MaxOffset int64 `json:"maxOffset"`
	}
	if err := json.Unmarshal([]byte(out), &queue); err != nil {
		t.Fatalf("topic status output %q (one queue: one object): %v", out, err)
	}
	if queue.MaxOffset != 4 {
		t.Fatalf("topic status %s: want the queue to hold 4 messages", out)
	}
}
