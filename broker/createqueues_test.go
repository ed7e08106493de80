package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestCreateTopicMakesQueueFiles: creating a topic makes each of its write
// queues' directory and first ConsumeQueue file, which the first sends
// then fill; raising the queue count makes the new queues' files.
func TestCreateTopicMakesQueueFiles(t *testing.T) {
	var dir string
	_, c := testBroker(t, func(o *broker.Options) { dir = o.Store.Dir })
	first := func(topic string, id int) string {
		return filepath.Join(dir, "consumequeue", topic, fmt.Sprint(id), "00000000000000000000")
	}
	createTopic(t, c, "made", 3)
	for id := range 3 {
		if _, err := os.Stat(first("made", id)); err != nil {
			t.Fatalf("queue %d's first file after CreateTopic: %v", id, err)
		}
	}
	if _, err := os.Stat(first("made", 3)); !os.IsNotExist(err) {
		t.Fatalf("a fourth queue's file exists (%v)", err)
	}

	ctx := context.Background()
	for i := range 9 {
		resp, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg("made", int32(i%3), fmt.Sprint("m", i), "", "")}})
		if err != nil || wire.FromStatus(resp.Status) != nil {
			t.Fatalf("send: %v %v", err, resp.GetStatus())
		}
	}
	for id := range int32(3) {
		waitQueue(t, c, "made", id, 3)
	}

	resp, err := c.CreateTopic(ctx, &pb.CreateTopicRequest{Update: true,
		Topic: &pb.TopicConfig{Name: "made", ReadQueueNums: 5, WriteQueueNums: 5}})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("update topic: %v %v", err, resp.GetStatus())
	}
	for id := range 5 {
		if _, err := os.Stat(first("made", id)); err != nil {
			t.Fatalf("queue %d's first file after raising the queue count: %v", id, err)
		}
	}
	pull, err := c.Pull(ctx, &pb.PullRequest{Group: "g", Topic: "made", QueueId: 1, MaxMessages: 32, CommitOffset: -1})
	if err != nil || pull.PullStatus != pb.PullStatus_FOUND || len(pull.Records) != 3 {
		t.Fatalf("pull queue 1: %v %+v", err, pull)
	}
}

// TestAutoCreatedTopicMakesQueueFiles: a topic created by its first send
// (--auto-create-topic) gets every write queue's directory and first file
// at once, as a topic created by CreateTopic does.
func TestAutoCreatedTopicMakesQueueFiles(t *testing.T) {
	var dir string
	b, c := testBroker(t, func(o *broker.Options) { o.AutoCreateTopic = true; dir = o.Store.Dir })
	resp, err := c.Send(context.Background(), &pb.SendRequest{Messages: []*pb.Message{msg("auto", 0, "m", "", "")}})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("send: %v %v", err, resp.GetStatus())
	}
	for id := range b.Options().DefaultQueueNums {
		path := filepath.Join(dir, "consumequeue", "auto", fmt.Sprint(id), "00000000000000000000")
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("queue %d of the auto-created topic: %v", id, err)
		}
	}
	waitQueue(t, c, "auto", 0, 1)
}
