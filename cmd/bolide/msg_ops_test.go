package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// jsonLines decodes one JSON object per line of out.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var list []T
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		list = append(list, v)
	}
	return list
}

// TestMsgRangeSearchTrace: msg range pages through a queue, msg search
// finds a time range and says when --max cut it, msg trace shows a
// message a consumer failed through its retries to its dead letter; each
// in a table and with -o json.
func TestMsgRangeSearchTrace(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	t.Cleanup(c.Stop)
	const topic, group = "msg-ops", "msg-ops-g"
	c.CreateTopic(topic, 1)
	ns := strings.Join(c.NameServerAddrs(), ",")
	shared := client.WithOptions(client.WithNameServers(c.NameServerAddrs()...),
		client.WithRouteRefreshInterval(300*time.Millisecond))
	ctx := context.Background()
	p, err := client.NewProducer("msg-ops-pg", shared)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	var sent []*client.SendResult
	for i := 0; i < 5; i++ {
		r, err := p.Send(ctx, &client.Message{Topic: topic, Tag: "paid", Keys: []string{fmt.Sprint("order-", i)},
			Body: []byte(fmt.Sprint("order ", i))})
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, r)
	}
	cli := func(args ...string) (int, string, string) {
		return runCLI(t, "", append([]string{"--namesrv", ns}, args...)...)
	}
	c.WaitFor(10*time.Second, func() error {
		if code, out, stderr := cli("msg", "at", "--topic", topic, "--queue", "0", "--offset", "4"); code != 0 {
			return fmt.Errorf("msg at 4: exit %d %s %s", code, out, stderr)
		}
		return nil
	})

	// msg range: the whole queue, a page with bodies, JSON.
	code, out, stderr := cli("msg", "range", "--topic", topic, "--queue", "0")
	if code != 0 || !strings.HasPrefix(out, "OFFSET  MSGID ") || strings.Count(out, "\n") != 6 || strings.Contains(out, "BODY") ||
		!strings.Contains(out, sent[4].MsgID) || !strings.Contains(stderr, "5 messages of msg-ops@broker-a#0; next offset 5") {
		t.Fatalf("msg range (exit %d):\n%s%s", code, out, stderr)
	}
	t.Logf("msg range:\n%s%s", out, stderr)
	code, out, stderr = cli("msg", "range", "--topic", topic, "--queue", "0", "--from", "2", "--count", "2", "--body")
	if code != 0 || !strings.Contains(out, "BODY") || strings.Count(out, "\n") != 3 || !strings.Contains(out, "order 2") ||
		!strings.Contains(out, "order 3") || strings.Contains(out, "order 4") || !strings.Contains(stderr, "next offset 4") {
		t.Fatalf("msg range --from 2 --count 2 --body (exit %d):\n%s%s", code, out, stderr)
	}
	t.Logf("msg range --body:\n%s%s", out, stderr)
	code, out, stderr = cli("msg", "range", "--topic", topic, "--queue", "0", "--from", "1", "-o", "json")
	if code != 0 || stderr != "" {
		t.Fatalf("msg range -o json: exit %d, %s", code, stderr)
	}
	ms := jsonLines[messageJSON](t, out)
	if len(ms) != 4 {
		t.Fatalf("msg range -o json: %d lines:\n%s", len(ms), out)
	}
	for i, m := range ms {
		if m.QueueOffset != int64(i+1) || m.MsgID != sent[i+1].MsgID || m.Body != fmt.Sprint("order ", i+1) || m.Tags != "paid" {
			t.Fatalf("msg range -o json line %d: %+v", i, m)
		}
	}
	code, _, stderr = cli("msg", "range", "--topic", topic, "--queue", "0", "--from", "5")
	if code != 0 || !strings.Contains(stderr, "has no message at or after offset 5") {
		t.Fatalf("msg range at the end: exit %d, %s", code, stderr)
	}
	args := []string{"msg", "range", "--topic", topic, "--queue", "0", "--from", "9"}
	code, out, stderr = cli(args...)
	checkOneLineError(t, args, code, out, stderr, 1, "its offsets are 0..4")
	args = []string{"msg", "range", "--topic", topic}
	code, out, stderr = cli(args...)
	checkOneLineError(t, args, code, out, stderr, 2, "--topic and --queue are required")

	// msg search: from the first message's store time on; --max cuts.
	code, out, _ = cli("msg", "at", "--topic", topic, "--queue", "0", "--offset", "0", "-o", "json")
	if code != 0 {
		t.Fatalf("msg at 0: exit %d", code)
	}
	first := jsonLines[messageJSON](t, out)[0]
	st, err := time.Parse(time.RFC3339Nano, first.StoreTimestamp)
	if err != nil {
		t.Fatal(err)
	}
	begin := strconv.FormatInt(st.UnixMilli(), 10)
	code, out, stderr = cli("msg", "search", "--topic", topic, "--begin", begin)
	if code != 0 || stderr != "" || !strings.HasPrefix(out, "MSGID ") || strings.Count(out, "\n") != 6 || !strings.Contains(out, "order 4") {
		t.Fatalf("msg search (exit %d):\n%s%s", code, out, stderr)
	}
	t.Logf("msg search:\n%s", out)
	code, out, stderr = cli("msg", "search", "--topic", topic, "--begin", begin, "--max", "2", "-o", "json")
	ms = jsonLines[messageJSON](t, out)
	if code != 0 || len(ms) != 2 || ms[0].MsgID != sent[0].MsgID || ms[1].MsgID != sent[1].MsgID ||
		!strings.Contains(stderr, "warning: the range holds more than 2 messages") {
		t.Fatalf("msg search --max 2 -o json (exit %d):\n%s%s", code, out, stderr)
	}
	t.Logf("msg search --max 2:\n%s%s", out, stderr)
	code, out, stderr = cli("msg", "search", "--topic", topic, "--begin", "+1h", "--end", "+2h")
	if code != 0 || out != "" || !strings.Contains(stderr, "no message of msg-ops was stored between") {
		t.Fatalf("msg search of the future (exit %d): %s%s", code, out, stderr)
	}
	args = []string{"msg", "search", "--topic", topic, "--begin", "1h", "--end", "2h"}
	code, out, stderr = cli(args...)
	checkOneLineError(t, args, code, out, stderr, 2, "is not after --begin")

	// msg trace: a consumer fails order 0 until it is a dead letter.
	failing, err := client.NewPushConsumer(group, shared, client.WithRebalanceInterval(time.Second),
		client.WithHeartbeatInterval(500*time.Millisecond), client.WithCommitInterval(200*time.Millisecond),
		client.WithLongPollTimeout(2*time.Second), client.WithConsumeFrom(client.ConsumeFromFirst), client.WithMaxReconsumeTimes(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := failing.Subscribe(topic, "*", client.ErrorListener(func(ctx context.Context, msgs []*client.MessageExt) error {
		for _, m := range msgs {
			if m.MsgID == sent[0].MsgID {
				client.SetRetryDelayLevel(ctx, 1)
				return errors.New("bad order")
			}
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := failing.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = failing.Close() })
	var tr traceJSON
	c.WaitFor(30*time.Second, func() error {
		code, out, stderr := cli("msg", "trace", sent[0].MsgID, "-o", "json")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		tr = jsonLines[traceJSON](t, out)[0]
		if n := len(tr.Hops); n == 0 || tr.Hops[n-1].Kind != "dlq" {
			return fmt.Errorf("hops %+v", tr.Hops)
		}
		return nil
	})
	var kinds []string
	for i, h := range tr.Hops {
		kinds = append(kinds, h.Kind)
		if h.ReconsumeTimes != int32(i) || h.Broker != "broker-a" || h.StoreTime == "" || h.MsgID == "" {
			t.Fatalf("hop %d: %+v", i, h)
		}
	}
	if strings.Join(kinds, " ") != "origin retry dlq" || tr.Hops[1].Topic != "%RETRY%"+group || tr.Hops[1].Group != group ||
		tr.Hops[2].Topic != "%DLQ%"+group || tr.Message.MsgID != sent[0].MsgID || tr.Message.Topic != topic ||
		tr.Hops[0].MsgID != sent[0].OffsetMsgID {
		t.Fatalf("trace %+v", tr)
	}
	code, out, stderr = cli("msg", "trace", tr.Hops[2].MsgID)
	if code != 0 || !strings.Contains(out, "KIND    TOPIC") || !strings.Contains(out, "%DLQ%"+group) ||
		!strings.Contains(out, "%RETRY%"+group) || !strings.Contains(out, "Msg id:  "+sent[0].MsgID) || strings.Count(out, "\n") != 10 {
		t.Fatalf("msg trace by the dead letter's offset msg id (exit %d):\n%s%s", code, out, stderr)
	}
	t.Logf("msg trace:\n%s", out)
	args = []string{"msg", "trace", "0123456789ABCDEF0123456789ABCDEF", "--topic", topic}
	code, out, stderr = cli(args...)
	checkOneLineError(t, args, code, out, stderr, 1, "no message with id 0123456789ABCDEF0123456789ABCDEF")
}
