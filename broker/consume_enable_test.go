package broker_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/internal/testutil"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// stoppedText is what a refusal of the stopped group "billing" says.
const stoppedText = "consumer group billing is stopped: its consumption was disabled (bolide group update billing --consume-enable)"

func setConsumeEnable(t *testing.T, b interface {
	UpdateSubscriptionGroup(broker.SubscriptionGroup) error
}, group string, on bool) {
	t.Helper()
	c := subgroup.Default(group)
	c.ConsumeEnable = on
	if err := b.UpdateSubscriptionGroup(c); err != nil {
		t.Fatal(err)
	}
}

// TestConsumeDisabledRefusesPullAndPop: a group declared with
// consumeEnable=false is refused every pull and POP receive with
// NO_PERMISSION (core, bolide.v1, grpc-v5 and remoting), its offsets stay, sends and
// other groups are unaffected, and enabling it resumes where it stopped.
func TestConsumeDisabledRefusesPullAndPop(t *testing.T) {
	ctx := context.Background()
	b, rpc := testBroker(t)
	if err := b.CreateTopic(broker.TopicConfig{Name: "orders", ReadQueueNums: 1, WriteQueueNums: 1, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	sendN(t, b, "orders", 1, "m", 3, "")
	if err := b.CommitOffsets("billing", []broker.QueueOffset{{Queue: broker.Queue{Topic: "orders"}, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	setConsumeEnable(t, b, "billing", false)

	_, err := b.Pull(ctx, broker.PullRequest{Group: "billing", Topic: "orders", Offset: 1, CommitOffset: 2})
	wantErrCode(t, "pull of a stopped group", err, errcode.NoPermission)
	if !strings.Contains(err.Error(), stoppedText) {
		t.Fatalf("refusal %q does not say %q", err, stoppedText)
	}
	_, err = b.Pop(ctx, broker.PopRequest{Group: "billing", Topic: "orders", QueueID: -1, Invisible: time.Minute})
	wantErrCode(t, "POP receive of a stopped group", err, errcode.NoPermission)

	// bolide.v1 (the SDK's pull and POP receive).
	pr, err := rpc.Pull(ctx, &pb.PullRequest{Group: "billing", Topic: "orders", Offset: 1, MaxMessages: 8, CommitOffset: -1})
	if err != nil {
		t.Fatal(err)
	}
	if pr.GetStatus().GetCode() != pb.Code_NO_PERMISSION || !strings.Contains(pr.GetStatus().GetMessage(), stoppedText) {
		t.Fatalf("bolide.v1 pull of a stopped group: %v", pr.GetStatus())
	}
	rr, err := rpc.Receive(ctx, &pb.ReceiveRequest{Group: "billing", Topic: "orders", QueueId: -1, MaxMessages: 8, InvisibleMs: 60000})
	if err != nil {
		t.Fatal(err)
	}
	if rr.GetStatus().GetCode() != pb.Code_NO_PERMISSION {
		t.Fatalf("bolide.v1 receive of a stopped group: %v", rr.GetStatus())
	}

	// RocketMQ 5's ReceiveMessage (grpc-v5 POP): FORBIDDEN with the message.
	v5conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer v5conn.Close()
	v5ctx, v5cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "test-host@1@0@stopped"), 10*time.Second)
	defer v5cancel()
	stream, err := v2.NewMessagingServiceClient(v5conn).ReceiveMessage(v5ctx, &v2.ReceiveMessageRequest{
		Group:             &v2.Resource{Name: "billing"},
		MessageQueue:      &v2.MessageQueue{Topic: &v2.Resource{Name: "orders"}, Id: 0, Broker: &v2.Broker{Name: "broker-a"}},
		FilterExpression:  &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"},
		BatchSize:         8,
		InvisibleDuration: durationpb.New(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if st := first.GetStatus(); st.GetCode() != v2.Code_FORBIDDEN || !strings.Contains(st.GetMessage(), stoppedText) {
		t.Fatalf("grpc-v5 receive of a stopped group: %v", first)
	}

	// RocketMQ's remoting PULL_MESSAGE: NO_PERMISSION with the message.
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := rmq.Dial(dctx, b.Addr(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(); <-conn.Done() }()
	remotingPull := func(group string) *rmq.Command {
		t.Helper()
		resp, err := conn.Invoke(dctx, rmq.NewRequest(rmq.PullMessage, map[string]string{
			"consumerGroup": group, "topic": "orders", "queueId": "0", "queueOffset": "1", "maxMsgNums": "32",
			"sysFlag": "4", "commitOffset": "-1", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
			"expressionType": "TAG", "bname": "broker-a"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := remotingPull("billing"); resp.Code != rmq.NoPermission || !strings.Contains(resp.Remark, stoppedText) {
		t.Fatalf("remoting pull of a stopped group: code %d %q", resp.Code, resp.Remark)
	}

	// The offset stayed (the refused pull's commit was not taken); sends,
	// other groups and reads without a group are not affected.
	if off, _ := b.QueryOffset("billing", "orders", 0); off != 1 {
		t.Fatalf("offset of the stopped group: %d, want 1", off)
	}
	sendN(t, b, "orders", 1, "n", 2, "")
	if res, err := b.Pull(ctx, broker.PullRequest{Group: "shipping", Topic: "orders", CommitOffset: -1}); err != nil || len(res.Records) != 5 {
		t.Fatalf("another group's pull: %d records, %v", len(res.Records), err)
	}
	if resp := remotingPull("shipping"); resp.Code != rmq.Success {
		t.Fatalf("remoting pull of another group: code %d %q", resp.Code, resp.Remark)
	}
	if res, err := b.Pull(ctx, broker.PullRequest{Topic: "orders", CommitOffset: -1}); err != nil || len(res.Records) != 5 {
		t.Fatalf("a pull without group: %d records, %v", len(res.Records), err)
	}

	// Enabled again: it resumes at its offset.
	setConsumeEnable(t, b, "billing", true)
	res, err := b.Pull(ctx, broker.PullRequest{Group: "billing", Topic: "orders", Offset: 1, CommitOffset: -1})
	if err != nil || len(res.Records) != 4 {
		t.Fatalf("pull after enabling: %d records, %v", len(res.Records), err)
	}
	if got := pop(t, b, broker.PopRequest{Group: "billing", Topic: "orders", QueueID: -1, MaxMessages: 32, Invisible: time.Minute}); len(got) != 4 || body(t, got[0]) != "m1" {
		t.Fatalf("POP after enabling: %d messages", len(got))
	}
	if resp := remotingPull("billing"); resp.Code != rmq.Success {
		t.Fatalf("remoting pull after enabling: code %d %q", resp.Code, resp.Remark)
	}
}

// TestConsumeDisabledWhileHeld: a pull and a POP receive held waiting for
// messages when the group is stopped answer the refusal instead of the
// message that wakes them.
func TestConsumeDisabledWhileHeld(t *testing.T) {
	ctx := context.Background()
	b := popBroker(t, "held", 1)
	type answer struct {
		n   int
		err error
	}
	pulled := make(chan answer, 1)
	go func() {
		res, err := b.Pull(ctx, broker.PullRequest{Group: "billing", Topic: "held", SuspendTimeout: 30 * time.Second, CommitOffset: -1})
		pulled <- answer{len(res.Records), err}
	}()
	popped := make(chan answer, 1)
	go func() {
		out, err := b.Pop(ctx, broker.PopRequest{Group: "billing", Topic: "held", QueueID: -1, Invisible: time.Minute, PollTimeout: 30 * time.Second})
		popped <- answer{len(out), err}
	}()
	testutil.Eventually(t, 5*time.Second, "the pull is held", func() bool { return b.PullParked("held", 0) })
	setConsumeEnable(t, b, "billing", false)
	sendN(t, b, "held", 1, "late", 1, "")
	a := <-pulled
	wantErrCode(t, "held pull of a group stopped meanwhile ("+strconv.Itoa(a.n)+" records)", a.err, errcode.NoPermission)
	a = <-popped
	wantErrCode(t, "held POP receive of a group stopped meanwhile ("+strconv.Itoa(a.n)+" messages)", a.err, errcode.NoPermission)
}
