package grpcv5_test

import (
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/message"
)

// halfMessage is a transactional message as the Go client sends it.
func halfMessage(topicName, body string) *v2.Message {
	m := newMessage(topicName, body)
	m.SystemProperties.MessageType = v2.MessageType_TRANSACTION
	return m
}

// endTx ends a transaction and returns the status.
func endTx(t *testing.T, c v2.MessagingServiceClient, clientID string, req *v2.EndTransactionRequest) *v2.Status {
	t.Helper()
	resp, err := c.EndTransaction(asClient(t, clientID), req)
	if err != nil {
		t.Fatalf("EndTransaction: %v", err)
	}
	return resp.GetStatus()
}

func TestTransactionCommitRollback(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "pay", topic.TypeTransaction)
	c := dial(t, b)
	id := newClientID()
	ctx := asClient(t, id)

	commit := halfMessage("pay", "commit me")
	ce := mustSend(t, c, ctx, commit)
	if ce.GetTransactionId() == "" {
		t.Fatal("no transaction id")
	}
	rollback := halfMessage("pay", "roll me back")
	re := mustSend(t, c, ctx, rollback)
	// Half messages are not in the topic.
	half := findStored(t, b, message.TransHalfTopic, commit.SystemProperties.MessageId)
	if half.Properties[message.PropertyProducerGroup] != "pay" || half.Properties[message.PropertyRealTopic] != "pay" {
		t.Fatalf("half message properties %v", half.Properties)
	}

	wantCode(t, "commit", endTx(t, c, id, &v2.EndTransactionRequest{Topic: &v2.Resource{Name: "pay"},
		MessageId: commit.SystemProperties.MessageId, TransactionId: ce.GetTransactionId(),
		Resolution: v2.TransactionResolution_COMMIT}), v2.Code_OK)
	got := findStored(t, b, "pay", commit.SystemProperties.MessageId)
	if string(got.Body) != "commit me" {
		t.Fatalf("committed body %q", got.Body)
	}
	// Again: the same outcome is OK.
	wantCode(t, "commit again", endTx(t, c, id, &v2.EndTransactionRequest{Topic: &v2.Resource{Name: "pay"},
		MessageId: commit.SystemProperties.MessageId, TransactionId: ce.GetTransactionId(),
		Resolution: v2.TransactionResolution_COMMIT}), v2.Code_OK)

	// The other message id is refused for this transaction.
	wantCode(t, "wrong message id", endTx(t, c, id, &v2.EndTransactionRequest{Topic: &v2.Resource{Name: "pay"},
		MessageId: commit.SystemProperties.MessageId, TransactionId: re.GetTransactionId(),
		Resolution: v2.TransactionResolution_ROLLBACK}), v2.Code_BAD_REQUEST)
	wantCode(t, "rollback", endTx(t, c, id, &v2.EndTransactionRequest{Topic: &v2.Resource{Name: "pay"},
		MessageId: rollback.SystemProperties.MessageId, TransactionId: re.GetTransactionId(),
		Resolution: v2.TransactionResolution_ROLLBACK}), v2.Code_OK)
	wantCode(t, "commit after rollback", endTx(t, c, id, &v2.EndTransactionRequest{Topic: &v2.Resource{Name: "pay"},
		MessageId: rollback.SystemProperties.MessageId, TransactionId: re.GetTransactionId(),
		Resolution: v2.TransactionResolution_COMMIT}), v2.Code_BAD_REQUEST)
	st := b.Transactions().Stats()
	if st.Commits != 1 || st.Rollbacks != 1 || st.Pending != 0 {
		t.Errorf("stats: %d commits, %d rollbacks, %d pending; want 1, 1, 0", st.Commits, st.Rollbacks, st.Pending)
	}
	if _, err := b.QueryMessage("pay", rollback.SystemProperties.MessageId, 0, 0, 4); err == nil {
		t.Error("the rolled back message is in the topic")
	}

	for name, tc := range map[string]struct {
		req  *v2.EndTransactionRequest
		want v2.Code
	}{
		"empty transaction id": {&v2.EndTransactionRequest{Topic: &v2.Resource{Name: "pay"}, MessageId: "x",
			Resolution: v2.TransactionResolution_COMMIT}, v2.Code_INVALID_TRANSACTION_ID},
		"garbage transaction id": {&v2.EndTransactionRequest{Topic: &v2.Resource{Name: "pay"}, MessageId: "x", TransactionId: "nonsense",
			Resolution: v2.TransactionResolution_COMMIT}, v2.Code_INVALID_TRANSACTION_ID},
		"transaction id of a normal message": {&v2.EndTransactionRequest{Topic: &v2.Resource{Name: "pay"}, MessageId: "x",
			TransactionId: message.OffsetMsgID(got.StoreHost, got.PhysicalOffset), Resolution: v2.TransactionResolution_COMMIT}, v2.Code_INVALID_TRANSACTION_ID},
		"illegal topic": {&v2.EndTransactionRequest{Topic: &v2.Resource{Name: "no spaces"}, TransactionId: ce.GetTransactionId(),
			Resolution: v2.TransactionResolution_COMMIT}, v2.Code_ILLEGAL_TOPIC},
	} {
		wantCode(t, name, endTx(t, c, id, tc.req), tc.want)
	}
}

func TestTransactionCheckBack(t *testing.T) {
	b := startBroker(t, func(o *broker.Options) {
		o.Transaction.Timeout = 200 * time.Millisecond
		o.Transaction.CheckInterval = 500 * time.Millisecond
	})
	createTopic(t, b, "shop%pay", topic.TypeTransaction)
	c := dial(t, b)
	id := newClientID()
	s := producerSettings("pay")
	s.GetPublishing().Topics[0].ResourceNamespace = "shop"
	stream, _ := handshake(t, c, id, s)
	defer stream.CloseSend()

	m := halfMessage("pay", "orphan")
	m.Topic.ResourceNamespace = "shop"
	tag := "t1"
	m.SystemProperties.Tag = &tag
	m.UserProperties = map[string]string{"order": "42"}
	e := mustSend(t, c, asClient(t, id), m)

	// The producer is asked on its Telemetry stream.
	cmd, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	rc := cmd.GetRecoverOrphanedTransactionCommand()
	if rc == nil {
		t.Fatalf("got %v, want a RecoverOrphanedTransactionCommand", cmd)
	}
	got := rc.GetMessage()
	sp := got.GetSystemProperties()
	if got.GetTopic().GetName() != "pay" || got.GetTopic().GetResourceNamespace() != "shop" || string(got.GetBody()) != "orphan" ||
		sp.GetMessageId() != m.SystemProperties.MessageId || sp.GetTag() != "t1" || got.GetUserProperties()["order"] != "42" ||
		len(got.GetUserProperties()) != 1 || sp.GetMessageType() != v2.MessageType_TRANSACTION || sp.GetBodyDigest().GetChecksum() == "" {
		t.Fatalf("check-back message %v", got)
	}
	if rc.GetTransactionId() == "" {
		t.Fatal("check-back without transaction id")
	}
	// The producer answers as the Go client does: the command's ids, the
	// message's topic, no source.
	wantCode(t, "commit after check", endTx(t, c, id, &v2.EndTransactionRequest{
		Topic: got.GetTopic(), MessageId: sp.GetMessageId(), TransactionId: rc.GetTransactionId(),
		Resolution: v2.TransactionResolution_COMMIT}), v2.Code_OK)
	committed := findStored(t, b, "shop%pay", m.SystemProperties.MessageId)
	if string(committed.Body) != "orphan" {
		t.Fatalf("committed body %q", committed.Body)
	}
	// The send's transaction id names the same transaction: already ended.
	wantCode(t, "commit by the send's id", endTx(t, c, id, &v2.EndTransactionRequest{
		Topic: got.GetTopic(), MessageId: sp.GetMessageId(), TransactionId: e.GetTransactionId(),
		Resolution: v2.TransactionResolution_COMMIT}), v2.Code_OK)
}

func TestCheckBackGoesToNewestStream(t *testing.T) {
	b := startBroker(t, func(o *broker.Options) {
		o.Transaction.Timeout = 200 * time.Millisecond
		o.Transaction.CheckInterval = 300 * time.Millisecond
	})
	createTopic(t, b, "pay", topic.TypeTransaction)
	c := dial(t, b)
	id := newClientID()
	older, _ := handshake(t, c, id, producerSettings("pay"))
	defer older.CloseSend()
	newer, _ := handshake(t, c, id, producerSettings("pay"))

	m := halfMessage("pay", "orphan")
	mustSend(t, c, asClient(t, id), m)
	cmd, err := newer.Recv()
	if err != nil || cmd.GetRecoverOrphanedTransactionCommand().GetMessage().GetSystemProperties().GetMessageId() != m.SystemProperties.MessageId {
		t.Fatalf("newest stream got %v, %v; want the check-back", cmd, err)
	}
	// The newest stream ends: the next check goes to the older one.
	if err := newer.CloseSend(); err != nil {
		t.Fatal(err)
	}
	cmd, err = older.Recv()
	if err != nil {
		t.Fatal(err)
	}
	rc := cmd.GetRecoverOrphanedTransactionCommand()
	if rc.GetMessage().GetSystemProperties().GetMessageId() != m.SystemProperties.MessageId {
		t.Fatalf("older stream got %v; want the check-back again", cmd)
	}
	wantCode(t, "rollback after check", endTx(t, c, id, &v2.EndTransactionRequest{Topic: rc.GetMessage().GetTopic(),
		MessageId: m.SystemProperties.MessageId, TransactionId: rc.GetTransactionId(),
		Resolution: v2.TransactionResolution_ROLLBACK, Source: v2.TransactionSource_SOURCE_SERVER_CHECK}), v2.Code_OK)
}
