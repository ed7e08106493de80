package grpcv5_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/message"
)

// TestMain fails the package when a test leaves a goroutine behind: the
// Telemetry streams, their receivers and the expiry sweeper must stop with
// the broker.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startBroker starts a broker (every front end, RocketMQ 5's included) on
// 127.0.0.1:0 without NameServers and closes it when the test ends.
func startBroker(t testing.TB, mutate ...func(*broker.Options)) *server.Server {
	t.Helper()
	opts := broker.DefaultOptions(t.TempDir())
	opts.ListenAddr = "127.0.0.1:0"
	opts.NameServers = nil
	opts.GossipAddr = "off"
	opts.Store.CommitLog.SegmentSize = 4 << 20
	opts.Store.ConsumeQueue.UnitsPerFile = 1000
	opts.Store.Index.SlotCount = 1000
	opts.Store.Index.MaxEntries = 4000
	opts.MaxMessageSize = 1 << 20
	for _, f := range mutate {
		f(&opts)
	}
	b, err := server.New(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// dial opens a plaintext gRPC connection to the broker's port with the
// generated v2 client.
func dial(t testing.TB, b *server.Server) v2.MessagingServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return v2.NewMessagingServiceClient(conn)
}

var clientSeq atomic.Int64

// newClientID makes a client id shaped like the Go client's.
func newClientID() string {
	return fmt.Sprintf("testhost@%d@%d@v5test", 4242, clientSeq.Add(1))
}

// asClient is a context carrying the headers a Go client sends (namespace
// empty), with a deadline for the test.
func asClient(t testing.TB, clientID string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	kv := []string{"x-mq-language", "GO", "x-mq-protocol", "v2", "x-mq-client-version", "5.1.4",
		"x-mq-request-id", "req", "x-mq-namespace", "", "x-mq-date-time", time.Now().Format("20060102T150405Z")}
	if clientID != "" {
		kv = append(kv, "x-mq-client-id", clientID)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// createTopic creates a topic of 4 queues with a message type ("" mixed).
func createTopic(t testing.TB, b *server.Server, name, mt string) {
	t.Helper()
	tc := broker.TopicConfig{Name: name, ReadQueueNums: 4, WriteQueueNums: 4, Perm: broker.PermReadWrite}
	if mt != "" {
		tc.Attributes = map[string]string{topic.AttrMessageType: mt}
	}
	if err := b.CreateTopic(tc, false); err != nil {
		t.Fatal(err)
	}
}

var idSeq atomic.Int64

// newMessage is a message as the Go client builds it: a fresh id, born
// now, identity encoding, NORMAL.
func newMessage(topicName string, body string) *v2.Message {
	return &v2.Message{
		Topic: &v2.Resource{Name: topicName},
		SystemProperties: &v2.SystemProperties{
			MessageId:     fmt.Sprintf("01AABBCCDDEEFF0102%016X", idSeq.Add(1)),
			BornTimestamp: timestamppb.Now(),
			BornHost:      "testhost",
			BodyEncoding:  v2.Encoding_IDENTITY,
			MessageType:   v2.MessageType_NORMAL,
		},
		Body: []byte(body),
	}
}

// send sends one message and returns the response, failing the test on a
// transport error.
func send(t *testing.T, c v2.MessagingServiceClient, ctx context.Context, m *v2.Message) *v2.SendMessageResponse {
	t.Helper()
	resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{m}})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	return resp
}

// mustSend sends one message and fails the test unless it is stored.
func mustSend(t *testing.T, c v2.MessagingServiceClient, ctx context.Context, m *v2.Message) *v2.SendResultEntry {
	t.Helper()
	resp := send(t, c, ctx, m)
	if resp.GetStatus().GetCode() != v2.Code_OK || len(resp.GetEntries()) != 1 || resp.Entries[0].GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("send: %v", resp)
	}
	if got, want := resp.Entries[0].GetMessageId(), m.SystemProperties.MessageId; got != want {
		t.Fatalf("message id %q echoed as %q", want, got)
	}
	return resp.Entries[0]
}

// findStored waits until the broker's index finds the message with unique
// id id in topic, and returns it.
func findStored(t *testing.T, b *server.Server, topicName, id string) *message.Ext {
	t.Helper()
	var m *message.Ext
	waitFor(t, "message "+id+" indexed in "+topicName, func() bool {
		recs, err := b.QueryMessage(topicName, id, 0, 0, 4)
		if err != nil || len(recs) == 0 {
			return false
		}
		got, err := message.Decode(recs[0])
		if err != nil {
			t.Fatal(err)
		}
		m = got
		return true
	})
	return m
}

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantCode fails the test unless st has code want.
func wantCode(t *testing.T, what string, st *v2.Status, want v2.Code) {
	t.Helper()
	if st.GetCode() != want {
		t.Fatalf("%s: status %v %q, want %v", what, st.GetCode(), st.GetMessage(), want)
	}
}
