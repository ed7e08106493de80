package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestForgedReplayMarkRefused is issue 19's report, done as written: a
// client creates the broker's replay-mark topic rmq_sys_DLQ_REPLAYED and
// sends a forged mark for a dead letter into it, so that dlq replay would
// skip that dead letter for ever. Both are refused — by the CLI's path
// and by the broker itself when the forged mark is sent to it directly —
// nothing reaches the mark queue, and dlq replay still replays the dead
// letter.
func TestForgedReplayMarkRefused(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	t.Cleanup(c.Stop)
	const topic, group = "forge", "forge-g"
	c.CreateTopic(topic, 1)
	ns := strings.Join(c.NameServerAddrs(), ",")
	shared := client.WithOptions(client.WithNameServers(c.NameServerAddrs()...),
		client.WithRouteRefreshInterval(300*time.Millisecond))
	ctx := context.Background()

	if code, _, stderr := runCLI(t, "", "--namesrv", ns, "send", "--topic", topic, "precious"); code != 0 {
		t.Fatalf("send: exit %d: %s", code, stderr)
	}
	failing, err := client.NewPushConsumer(group, shared, client.WithConsumeFrom(client.ConsumeFromFirst),
		client.WithRebalanceInterval(time.Second), client.WithHeartbeatInterval(500*time.Millisecond))
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
	var dead deadLetterJSON
	c.WaitFor(30*time.Second, func() error {
		list, err := dlqEntries(t, ns, group)
		if err != nil {
			return err
		}
		if len(list) != 1 {
			return fmt.Errorf("%d dead letters", len(list))
		}
		dead = list[0]
		return nil
	})
	if err := failing.Close(); err != nil {
		t.Fatal(err)
	}
	// The mark the broker would write for this dead letter, keyed by its
	// CommitLog offset (which its offset message id holds).
	_, phys, err := message.ParseOffsetMsgID(dead.OffsetMsgID)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := json.Marshal(map[string]any{"group": group, "dlqCommitLogOffset": phys, "dlqMsgId": dead.OffsetMsgID,
		"atMs": time.Now().UnixMilli(), "topic": topic, "msgId": "forged", "uniqueId": "forged"})
	if err != nil {
		t.Fatal(err)
	}

	// bolide topic create rmq_sys_DLQ_REPLAYED: refused, ILLEGAL_TOPIC.
	args := []string{"--namesrv", ns, "topic", "create", retry.ReplayMarkTopic}
	code, stdout, stderr := runCLI(t, "", args...)
	checkOneLineError(t, args, code, stdout, stderr, 1, "conflicts with a system topic")
	// bolide send of the forged mark: refused.
	if code, stdout, stderr := runCLI(t, "", "--namesrv", ns, "send", "--topic", retry.ReplayMarkTopic, string(forged)); code == 0 {
		t.Fatalf("send of a forged mark: exit 0: %s", stdout)
	} else {
		t.Logf("send of a forged mark: exit %d: %s", code, strings.TrimSpace(stderr))
	}
	// The same asked of the broker itself, past the CLI and any route:
	// ILLEGAL_TOPIC for the topic (through the SDK), NO_PERMISSION for the
	// mark (sent over the framed protocol to the broker's port).
	adm, err := client.NewAdmin(shared)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: retry.ReplayMarkTopic, Queues: 1}); !errors.Is(err, client.ErrIllegalTopic) {
		t.Fatalf("create topic through the SDK: %v", err)
	}
	b := c.Broker(0)
	fc := frame.NewClient(b.Addr(), frame.Options{})
	defer fc.Close()
	resp := new(pb.SendResponse)
	if err := fc.Call(ctx, frame.MethodSend, &pb.SendRequest{Messages: []*pb.Message{{Topic: retry.ReplayMarkTopic, Body: forged}}}, resp); err != nil {
		t.Fatal(err)
	}
	if err := wire.FromStatus(resp.Status); resp.Status.GetCode() != pb.Code_NO_PERMISSION || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("forged mark sent to the broker: %v", err)
	}
	if _, maxOff := b.Store().QueueOffsets(retry.ReplayMarkTopic, 0); maxOff != 0 {
		t.Fatalf("the mark queue holds %d records", maxOff)
	}

	// dlq replay still replays the dead letter, and marks it (the broker's
	// own mark).
	code, stdout, stderr = runCLI(t, "", "--namesrv", ns, "dlq", "replay", "--group", group, "--all")
	if code != 0 || stdout != "replayed 1, skipped 0 (replayed before), failed 0\n" {
		t.Fatalf("replay (exit %d): %q %q", code, stdout, stderr)
	}
	list, err := dlqEntries(t, ns, group)
	if err != nil || len(list) != 1 || list[0].Replayed == nil || list[0].Replayed.Topic != topic {
		t.Fatalf("after the replay: %v %+v", err, list)
	}
}
