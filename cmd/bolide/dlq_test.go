package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// dlqEntries runs dlq list -o json.
func dlqEntries(t *testing.T, ns, group string) ([]deadLetterJSON, error) {
	t.Helper()
	code, out, stderr := runCLI(t, "", "--namesrv", ns, "dlq", "list", "--group", group, "-o", "json")
	if code != 0 {
		return nil, fmt.Errorf("exit %d: %s", code, stderr)
	}
	var list []deadLetterJSON
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var d deadLetterJSON
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			return nil, err
		}
		list = append(list, d)
	}
	return list, nil
}

// TestDLQReplay: messages a consumer dead-letters are listed, shown and
// exported; replay --dry-run sends nothing; replay --all delivers each once
// to a consumer of the original topic, and a second replay --all skips
// them all.
func TestDLQReplay(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	t.Cleanup(c.Stop)
	const topic, group, fixed = "dlq-cli", "dlq-cli-g", "dlq-cli-fixed"
	c.CreateTopic(topic, 2)
	ns := strings.Join(c.NameServerAddrs(), ",")
	shared := client.WithOptions(client.WithNameServers(c.NameServerAddrs()...),
		client.WithRouteRefreshInterval(300*time.Millisecond))
	consumerOpts := func(extra ...client.ConsumerOption) []client.ConsumerOption {
		return append([]client.ConsumerOption{shared, client.WithRebalanceInterval(time.Second),
			client.WithHeartbeatInterval(500 * time.Millisecond), client.WithCommitInterval(200 * time.Millisecond),
			client.WithLongPollTimeout(2 * time.Second)}, extra...)
	}
	ctx := context.Background()
	p, err := client.NewProducer("dlq-cli-pg", shared)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	sent := map[string]string{} // msg id → body
	for i := 0; i < 3; i++ {
		body := fmt.Sprintf("order %d", i)
		r, err := p.Send(ctx, &client.Message{Topic: topic, Tag: "paid", Keys: []string{fmt.Sprintf("order-%d", i)},
			Body: []byte(body), Properties: map[string]string{"tenant": "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		sent[r.MsgID] = body
	}
	// A consumer that dead-letters everything at once.
	failing, err := client.NewPushConsumer(group, consumerOpts(client.WithConsumeFrom(client.ConsumeFromFirst))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := failing.Subscribe(topic, "*", client.ErrorListener(func(ctx context.Context, _ []*client.MessageExt) error {
		client.SetRetryDelayLevel(ctx, -1)
		return fmt.Errorf("bad data")
	})); err != nil {
		t.Fatal(err)
	}
	if err := failing.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var list []deadLetterJSON
	c.WaitFor(30*time.Second, func() error {
		var err error
		if list, err = dlqEntries(t, ns, group); err != nil {
			return err
		}
		if len(list) != 3 {
			return fmt.Errorf("%d dead letters", len(list))
		}
		return nil
	})
	if err := failing.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if sent[d.MsgID] != d.Body || d.OffsetMsgID == "" || d.OffsetMsgID == d.MsgID || d.OriginOffsetMsgID == "" || d.OriginTopic != topic || d.Reason != "bad data" || d.Replayed != nil || d.Tags != "paid" {
			t.Fatalf("dead letter %+v", d)
		}
	}
	code, out, _ := runCLI(t, "", "--namesrv", ns, "dlq", "list", "--group", group)
	if code != 0 || !strings.Contains(out, "ORIGINAL TOPIC") || !strings.Contains(out, list[0].MsgID) || !strings.Contains(out, "order 0") {
		t.Fatalf("dlq list (exit %d):\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "--namesrv", ns, "dlq", "show", list[1].MsgID)
	if code != 0 || !strings.Contains(out, "bad data") || !strings.Contains(out, list[1].Body) || !strings.Contains(out, "tenant=acme") {
		t.Fatalf("dlq show (exit %d):\n%s", code, out)
	}
	// dlq show takes the dead letter's offset msg id too.
	code, out, _ = runCLI(t, "", "--namesrv", ns, "dlq", "show", list[2].OffsetMsgID, "-o", "json")
	if code != 0 || !strings.Contains(out, `"msgId":"`+list[2].MsgID+`"`) || !strings.Contains(out, list[2].Body) {
		t.Fatalf("dlq show by offset msg id (exit %d):\n%s", code, out)
	}

	// A fixed consumer of the original topic, from before any replay.
	var mu sync.Mutex
	got := map[string][]*client.MessageExt{} // replayed-from dead letter's offset msg id → deliveries
	fixedC, err := client.NewPushConsumer(fixed, consumerOpts(client.WithConsumeFrom(client.ConsumeFromTimestamp(time.Now())))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := fixedC.Subscribe(topic, "*", client.ConcurrentListener(func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[m.Properties[client.PropertyReplayOf]] = append(got[m.Properties[client.PropertyReplayOf]], m)
		}
		return client.ConsumeSuccess
	})); err != nil {
		t.Fatal(err)
	}
	if err := fixedC.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fixedC.Close() })

	code, out, stderr := runCLI(t, "", "--namesrv", ns, "dlq", "replay", "--group", group, "--all", "--dry-run")
	if code != 0 || out != "would replay 3, skipped 0 (replayed before), failed 0\n" || strings.Count(stderr, "would replay") != 3 {
		t.Fatalf("dry run (exit %d): %q %q", code, out, stderr)
	}
	if list, err = dlqEntries(t, ns, group); err != nil || len(list) != 3 || list[0].Replayed != nil {
		t.Fatalf("after the dry run: %v %+v", err, list)
	}
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "dlq", "replay", "--group", group, "--all", "--rate", "50/s")
	if code != 0 || out != "replayed 3, skipped 0 (replayed before), failed 0\n" || strings.Count(stderr, "replayed") != 3 {
		t.Fatalf("replay (exit %d): %q %q", code, out, stderr)
	}
	c.WaitFor(30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 3 {
			return fmt.Errorf("%d of 3 replayed messages consumed", len(got))
		}
		return nil
	})
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "dlq", "replay", "--group", group, "--all")
	if code != 0 || out != "replayed 0, skipped 3 (replayed before), failed 0\n" || strings.Count(stderr, "skipped") != 3 {
		t.Fatalf("second replay (exit %d): %q %q", code, out, stderr)
	}
	// Every replay is consumed (offsets committed), each exactly once.
	adm, err := client.NewAdmin(shared)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	c.WaitFor(30*time.Second, func() error {
		st, err := adm.ConsumeStats(ctx, fixed, topic)
		if err != nil {
			return err
		}
		if st.TotalLag != 0 {
			return fmt.Errorf("lag %d", st.TotalLag)
		}
		return nil
	})
	mu.Lock()
	for _, d := range list {
		ms := got[d.OffsetMsgID]
		if len(ms) != 1 {
			t.Errorf("dead letter %s consumed %d times after replay", d.OffsetMsgID, len(ms))
			continue
		}
		m := ms[0]
		if string(m.Body) != d.Body || m.Tag != "paid" || len(m.Keys) != 1 || m.Keys[0] != d.Keys[0] ||
			m.Properties["tenant"] != "acme" || m.Properties[client.PropertyReplayGroup] != group ||
			m.Properties[client.PropertyReplayOrigin] != d.MsgID || m.MsgID == d.MsgID || m.ReconsumeTimes != 0 {
			t.Errorf("replay of %s: %+v", d.MsgID, m)
		}
	}
	mu.Unlock()
	code, out, _ = runCLI(t, "", "--namesrv", ns, "dlq", "export", "--group", group, "--format", "jsonl")
	if code != 0 || strings.Count(out, "\n") != 3 || strings.Count(out, `"replayed":{"at"`) != 3 {
		t.Fatalf("export (exit %d):\n%s", code, out)
	}
	// An unknown id: exit 1 and one line that names it, in both formats.
	wantNotFound := "bolide: no dead letter NOPE in group " + group + " (see 'bolide dlq list --group " + group + "')\n"
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "dlq", "replay", "--group", group, "--id", "NOPE")
	if code != 1 || stderr != wantNotFound || !strings.Contains(out, "replayed 0") {
		t.Fatalf("replay of an unknown id (exit %d): %q %q", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "dlq", "replay", "--group", group, "--id", "NOPE", "-o", "json")
	if code != 1 || stderr != wantNotFound || !strings.Contains(out, `"notFound":["NOPE"]`) {
		t.Fatalf("replay of an unknown id, json (exit %d): %q %q", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "--namesrv", ns, "dlq", "show", "NOPE", "--group", group)
	if code != 1 || out != "" || !strings.Contains(stderr, "no dead letter NOPE") {
		t.Fatalf("show of an unknown id (exit %d): %q %q", code, out, stderr)
	}
	for _, args := range [][]string{
		{"dlq", "replay", "--group", group},
		{"dlq", "replay", "--group", group, "--all", "--since", "1h"},
		{"dlq", "list"},
		{"dlq", "export", "--group", group, "--format", "csv"},
		{"dlq", "replay", "--group", group, "--all", "--rate", "fast"},
	} {
		code, out, stderr := runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
		checkOneLineError(t, args, code, out, stderr, exitUsage, "--")
	}
}

func TestReplayError(t *testing.T) {
	for _, c := range []struct {
		sum  client.ReplaySummary
		want string
	}{
		{client.ReplaySummary{Selected: 3, Replayed: 2, Skipped: 1}, ""},
		{client.ReplaySummary{NotFound: []string{"NOPE"}}, "no dead letter NOPE in group g (see 'bolide dlq list --group g')"},
		{client.ReplaySummary{NotFound: []string{"A", "B"}}, "no dead letters A, B in group g (see 'bolide dlq list --group g')"},
		{client.ReplaySummary{Selected: 3, Failed: 2}, "2 of 3 replays failed"},
		{client.ReplaySummary{Selected: 1, Failed: 1, NotFound: []string{"X"}},
			"1 of 1 replays failed; no dead letter X in group g (see 'bolide dlq list --group g')"},
	} {
		err := replayError("g", c.sum)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("replayError(%+v) = %q, want %q", c.sum, got, c.want)
		}
	}
}
