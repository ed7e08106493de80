package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// fastTxn makes check-backs happen within a test's patience.
func fastTxn(timeout, interval time.Duration, max int) func(*broker.Options) {
	return func(o *broker.Options) {
		o.Transaction = broker.TransactionOptions{Timeout: timeout, CheckInterval: interval, CheckMax: max}
	}
}

func txnClient(t *testing.T, b *server.Server) pb.TransactionClient {
	t.Helper()
	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewTransactionClient(conn)
}

var uniqSeq int

func halfMsg(topic string, q int32, body, group string) *pb.Message {
	uniqSeq++
	return &pb.Message{Topic: topic, QueueId: q, Body: []byte(body), SysFlag: message.SysFlagTransPrepared,
		Properties: map[string]string{
			message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: group,
			message.PropertyUniqueKey: fmt.Sprintf("7F000001%08X%016X", uniqSeq, time.Now().UnixNano()),
			message.PropertyTags:      "tag-" + body, message.PropertyKeys: "key-" + body,
		}}
}

// sendHalf sends a half message and returns its send result.
func sendHalf(t *testing.T, c pb.BrokerClient, m *pb.Message) *pb.SendResult {
	t.Helper()
	resp, err := c.Send(context.Background(), &pb.SendRequest{Messages: []*pb.Message{m}})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("send half: %v %v", err, resp.GetStatus())
	}
	return resp.Results[0]
}

func endReq(group, topic string, r *pb.SendResult, st pb.TransactionState) *pb.EndTransactionRequest {
	return &pb.EndTransactionRequest{ProducerGroup: group, Topic: topic, CommitLogOffset: r.CommitLogOffset,
		TranStateTableOffset: r.QueueOffset, MsgId: r.UniqueId, TransactionId: r.UniqueId, State: st}
}

func end(t *testing.T, tc pb.TransactionClient, req *pb.EndTransactionRequest) (*pb.EndTransactionResponse, error) {
	t.Helper()
	resp, err := tc.EndTransaction(context.Background(), req)
	if err != nil {
		t.Fatalf("end transaction: %v", err)
	}
	return resp, wire.FromStatus(resp.Status)
}

// queueMessages reads a whole queue through the store, once everything
// written so far is dispatched.
func queueMessages(t *testing.T, b *server.Server, topic string, q int32) []*message.Ext {
	t.Helper()
	if err := b.Store().WaitDispatched(context.Background(), b.Store().CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	res, err := b.Store().GetMessages(topic, q, 0, 1024, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*message.Ext
	for _, rec := range res.Records {
		m, err := message.Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// waitCond polls cond until it returns nil or d passes.
var waitCond = testutil.WaitFor

func codeIs(err error, code pb.Code) bool { return wire.CodeOf(err) == code && err != nil }

// TestTransactionCommitRollbackIdempotent: a half message is invisible
// until committed; the committed message has its real topic, queue and
// properties; commit and rollback are idempotent and exclusive; both write
// an op record.
func TestTransactionCommitRollbackIdempotent(t *testing.T) {
	start, _ := restartable(t, t.TempDir(), fastTxn(time.Hour, time.Hour, 15))
	b, c, tc := start()
	ctx := context.Background()
	createTopic(t, c, "orders", 4)

	h1 := halfMsg("orders", 2, "one", "pg")
	r1 := sendHalf(t, c, h1)
	if n := len(queueMessages(t, b, "orders", 2)); n != 0 {
		t.Fatalf("half message visible in its real queue: %d", n)
	}
	// Nobody may pull the half queue.
	pull, err := c.Pull(ctx, &pb.PullRequest{Topic: message.TransHalfTopic, CommitOffset: -1})
	if err != nil || pull.Status.GetCode() != pb.Code_NO_PERMISSION {
		t.Fatalf("pull of the half topic: %v %v", err, pull.GetStatus())
	}
	half := queueMessages(t, b, message.TransHalfTopic, 0)[0]
	if half.Properties[message.PropertyRealTopic] != "orders" || half.Properties[message.PropertyRealQueueID] != "2" ||
		half.Properties[message.PropertyTransactionID] != r1.UniqueId || message.TransactionType(half.SysFlag) != message.SysFlagTransNotType {
		t.Fatalf("stored half message: sysflag %x %v", half.SysFlag, half.Properties)
	}

	resp, err := end(t, tc, endReq("pg", "orders", r1, pb.TransactionState_TRANSACTION_STATE_COMMIT))
	if err != nil || resp.Duplicate || resp.QueueId != 2 || resp.QueueOffset != 0 {
		t.Fatalf("commit: %v %+v", err, resp)
	}
	real := queueMessages(t, b, "orders", 2)
	if len(real) != 1 {
		t.Fatalf("%d messages in the real queue", len(real))
	}
	m := real[0]
	if string(m.Body) != "one" || m.Tags() != "tag-one" || m.UniqueID() != r1.UniqueId ||
		message.TransactionType(m.SysFlag) != message.SysFlagTransCommit || m.PreparedTransactionOffset != r1.CommitLogOffset {
		t.Fatalf("committed message: %+v", m)
	}
	for _, k := range []string{message.PropertyRealTopic, message.PropertyRealQueueID, message.PropertyTransactionPrepared} {
		if _, ok := m.Properties[k]; ok {
			t.Errorf("committed message keeps %s", k)
		}
	}
	// Commit again: nothing written; rollback now: refused.
	resp, err = end(t, tc, endReq("pg", "orders", r1, pb.TransactionState_TRANSACTION_STATE_COMMIT))
	if err != nil || !resp.Duplicate {
		t.Fatalf("second commit: %v %+v", err, resp)
	}
	if _, err = end(t, tc, endReq("pg", "orders", r1, pb.TransactionState_TRANSACTION_STATE_ROLLBACK)); !codeIs(err, pb.Code_TRANSACTION_STATE_CONFLICT) {
		t.Fatalf("rollback after commit: %v", err)
	}

	// Rollback: nothing in the real queue; again: duplicate; commit: refused.
	r2 := sendHalf(t, c, halfMsg("orders", 2, "two", "pg"))
	if _, err := end(t, tc, endReq("pg", "orders", r2, pb.TransactionState_TRANSACTION_STATE_ROLLBACK)); err != nil {
		t.Fatal(err)
	}
	if resp, err := end(t, tc, endReq("pg", "orders", r2, pb.TransactionState_TRANSACTION_STATE_ROLLBACK)); err != nil || !resp.Duplicate {
		t.Fatalf("second rollback: %v %+v", err, resp)
	}
	if _, err := end(t, tc, endReq("pg", "orders", r2, pb.TransactionState_TRANSACTION_STATE_COMMIT)); !codeIs(err, pb.Code_TRANSACTION_STATE_CONFLICT) {
		t.Fatalf("commit after rollback: %v", err)
	}
	if n := len(queueMessages(t, b, "orders", 2)); n != 1 {
		t.Fatalf("%d messages in the real queue after a rollback", n)
	}
	// Two op records, tag "d", body = the half offsets.
	ops := queueMessages(t, b, message.TransOpHalfTopic, 0)
	want := []struct{ body, outcome string }{{strconv.FormatInt(r1.QueueOffset, 10) + ",", "COMMIT"}, {strconv.FormatInt(r2.QueueOffset, 10) + ",", "ROLLBACK"}}
	for i, op := range ops {
		if op.Tags() != "d" || string(op.Body) != want[i].body || op.Properties[txn.PropertyOutcome] != want[i].outcome {
			t.Errorf("op record %d: tag %q body %q %v", i, op.Tags(), op.Body, op.Properties)
		}
	}
	st, _ := tc.Stats(ctx, &pb.TransactionStatsRequest{})
	if st.Commits != 1 || st.Rollbacks != 1 || st.DuplicateEnds != 2 || st.ConflictingEnds != 2 || st.Pending != 0 || st.HalfMessages != 2 {
		t.Fatalf("stats: %+v", st)
	}

	// The same answers once the outcome is no longer in memory: they come
	// from the op records, through the index. After a restart the service
	// reads the op queue from the internal group's offset, past both.
	b, _, tc = start()
	if o := b.OffsetTable().Query(txn.Group, message.TransOpHalfTopic, 0); o != 2 {
		t.Fatalf("op consume offset %d after the restart", o)
	}
	if resp, err := end(t, tc, endReq("pg", "orders", r1, pb.TransactionState_TRANSACTION_STATE_COMMIT)); err != nil || !resp.Duplicate {
		t.Fatalf("commit of a forgotten commit: %v %+v", err, resp)
	}
	if _, err := end(t, tc, endReq("pg", "orders", r2, pb.TransactionState_TRANSACTION_STATE_COMMIT)); !codeIs(err, pb.Code_TRANSACTION_STATE_CONFLICT) {
		t.Fatalf("commit of a forgotten rollback: %v", err)
	}
	if n := len(queueMessages(t, b, "orders", 2)); n != 1 {
		t.Fatalf("%d messages in the real queue", n)
	}
}

// TestTransactionBadInput: sends and ends that must be refused, with clear
// codes, changing nothing.
func TestTransactionBadInput(t *testing.T) {
	b, c := testBroker(t, fastTxn(time.Hour, time.Hour, 15))
	tc := txnClient(t, b)
	ctx := context.Background()
	createTopic(t, c, "orders", 2)

	noUniq := halfMsg("orders", 0, "x", "pg")
	delete(noUniq.Properties, message.PropertyUniqueKey)
	delayed := halfMsg("orders", 0, "x", "pg")
	delayed.Properties[message.PropertyDelayLevel] = "3"
	committed := halfMsg("orders", 0, "x", "pg")
	committed.SysFlag = message.SysFlagTransCommit
	for name, req := range map[string]*pb.SendRequest{
		"no unique id":    {Messages: []*pb.Message{noUniq}},
		"delayed half":    {Messages: []*pb.Message{delayed}},
		"batch of halves": {Messages: []*pb.Message{halfMsg("orders", 0, "a", "pg"), halfMsg("orders", 0, "b", "pg")}},
		"commit sysflag":  {Messages: []*pb.Message{committed}},
	} {
		resp, err := c.Send(ctx, req)
		if err != nil || resp.Status.GetCode() != pb.Code_MESSAGE_ILLEGAL {
			t.Errorf("%s: %v %v", name, err, resp.GetStatus())
		}
	}
	if n := len(queueMessages(t, b, message.TransHalfTopic, 0)); n != 0 {
		t.Fatalf("refused sends stored %d half messages", n)
	}

	r := sendHalf(t, c, halfMsg("orders", 1, "ok", "pg"))
	plain, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg("orders", 0, "plain", "", "")}})
	if err != nil || wire.FromStatus(plain.Status) != nil {
		t.Fatal(err, plain.GetStatus())
	}
	commit := pb.TransactionState_TRANSACTION_STATE_COMMIT
	cases := []struct {
		name string
		req  *pb.EndTransactionRequest
		code pb.Code
	}{
		{"wrong group", endReq("other", "orders", r, commit), pb.Code_INVALID_PARAMETER},
		{"illegal group", endReq("bad group!", "orders", r, commit), pb.Code_ILLEGAL_GROUP},
		{"wrong topic", endReq("pg", "payments", r, commit), pb.Code_INVALID_PARAMETER},
		{"wrong half queue offset", func() *pb.EndTransactionRequest {
			q := endReq("pg", "orders", r, commit)
			q.TranStateTableOffset++
			return q
		}(), pb.Code_INVALID_PARAMETER},
		{"wrong transaction id", func() *pb.EndTransactionRequest {
			q := endReq("pg", "orders", r, commit)
			q.TransactionId = "nope"
			return q
		}(), pb.Code_INVALID_PARAMETER},
		{"not a half message", endReq("pg", "orders", plain.Results[0], commit), pb.Code_TRANSACTION_NOT_FOUND},
		{"no record there", func() *pb.EndTransactionRequest {
			q := endReq("pg", "orders", r, commit)
			q.CommitLogOffset = 1 << 40
			return q
		}(), pb.Code_TRANSACTION_NOT_FOUND},
		{"unknown state value", endReq("pg", "orders", r, pb.TransactionState(9)), pb.Code_INVALID_PARAMETER},
	}
	for _, tc2 := range cases {
		if _, err := end(t, tc, tc2.req); !codeIs(err, tc2.code) {
			t.Errorf("%s: %v, want %v", tc2.name, err, tc2.code)
		}
	}
	if n := len(queueMessages(t, b, "orders", 1)); n != 0 {
		t.Fatalf("a refused end wrote the message")
	}
	// UNKNOWN is accepted and changes nothing.
	if _, err := end(t, tc, endReq("pg", "orders", r, pb.TransactionState_TRANSACTION_STATE_UNKNOWN)); err != nil {
		t.Fatal(err)
	}
	// The listing follows the half queue, which is dispatched after the
	// send's reply: wait for it.
	waitCond(t, 10*time.Second, "the half message listed", func() error {
		if l, _ := tc.ListPending(ctx, &pb.ListPendingRequest{}); l.Total != 1 || l.Transactions[0].TransactionId != r.UniqueId {
			return fmt.Errorf("pending: %+v", l)
		}
		return nil
	})
}

// connectProducer opens a Connect stream announcing a producer group and
// returns the checks it receives.
func connectProducer(t *testing.T, c pb.BrokerClient, clientID, group string) <-chan *pb.TransactionCheck {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.ClientMessage{Kind: &pb.ClientMessage_Heartbeat{Heartbeat: &pb.Heartbeat{
		ClientId: clientID, ProducerGroups: []string{group}}}}); err != nil {
		t.Fatal(err)
	}
	checks := make(chan *pb.TransactionCheck, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			if ck := m.GetCheckTransaction(); ck != nil {
				checks <- ck
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return checks
}

// TestTransactionCheckBack: an undecided half message is checked back on a
// live producer's stream after the timeout, once per interval, with the
// check count persisted in the re-appended copy; the producer's answer
// naming the copy commits it; answers UNKNOWN keep it pending.
func TestTransactionCheckBack(t *testing.T) {
	b, c := testBroker(t, fastTxn(200*time.Millisecond, 200*time.Millisecond, 15))
	tc := txnClient(t, b)
	createTopic(t, c, "orders", 2)
	checks := connectProducer(t, c, "127.0.0.1@test", "pg")
	waitCond(t, 5*time.Second, "producer registered", func() error {
		if b.ProducerCount("pg") == 0 {
			return errors.New("no producer")
		}
		return nil
	})
	sent := time.Now()
	r := sendHalf(t, c, halfMsg("orders", 1, "later", "pg"))
	var ck *pb.TransactionCheck
	select {
	case ck = <-checks:
	case <-time.After(10 * time.Second):
		t.Fatal("no check-back")
	}
	if time.Since(sent) < 200*time.Millisecond {
		t.Fatalf("checked after %v, before the timeout", time.Since(sent))
	}
	if ck.Topic != "orders" || ck.QueueId != 1 || ck.TransactionId != r.UniqueId || ck.MsgId != r.UniqueId ||
		ck.CheckTimes != 1 || ck.ProducerGroup != "pg" || ck.CommitLogOffset == r.CommitLogOffset {
		t.Fatalf("check: %+v", ck)
	}
	rec, err := message.Decode(ck.Record)
	if err != nil || string(rec.Body) != "later" || rec.Properties[message.PropertyTransactionCheckTimes] != "1" ||
		rec.PhysicalOffset != ck.CommitLogOffset || rec.QueueOffset != ck.TranStateTableOffset {
		t.Fatalf("check record: %v %+v", err, rec)
	}
	// Answer UNKNOWN: checked again, count 2.
	answer := &pb.EndTransactionRequest{ProducerGroup: "pg", Topic: ck.Topic, CommitLogOffset: ck.CommitLogOffset,
		TranStateTableOffset: ck.TranStateTableOffset, MsgId: ck.MsgId, TransactionId: ck.TransactionId, FromCheck: true}
	if _, err := end(t, tc, answer); err != nil {
		t.Fatal(err)
	}
	select {
	case ck = <-checks:
	case <-time.After(10 * time.Second):
		t.Fatal("no second check-back")
	}
	if ck.CheckTimes != 2 {
		t.Fatalf("second check counts %d", ck.CheckTimes)
	}
	if n := len(queueMessages(t, b, "orders", 1)); n != 0 {
		t.Fatal("message visible before its outcome")
	}
	answer = &pb.EndTransactionRequest{ProducerGroup: "pg", Topic: ck.Topic, CommitLogOffset: ck.CommitLogOffset,
		TranStateTableOffset: ck.TranStateTableOffset, MsgId: ck.MsgId, TransactionId: ck.TransactionId,
		State: pb.TransactionState_TRANSACTION_STATE_COMMIT, FromCheck: true}
	if resp, err := end(t, tc, answer); err != nil || resp.Duplicate {
		t.Fatalf("commit from check: %v %+v", err, resp)
	}
	// The producer's own late commit, naming the first copy: a repeat.
	if resp, err := end(t, tc, endReq("pg", "orders", r, pb.TransactionState_TRANSACTION_STATE_COMMIT)); err != nil || !resp.Duplicate {
		t.Fatalf("late commit: %v %+v", err, resp)
	}
	if n := len(queueMessages(t, b, "orders", 1)); n != 1 {
		t.Fatalf("%d committed messages", n)
	}
	// No more checks.
	waitCond(t, 5*time.Second, "op record", func() error {
		if _, maxOff := b.Store().QueueOffsets(message.TransOpHalfTopic, 0); maxOff != 1 {
			return fmt.Errorf("%d op records", maxOff)
		}
		return nil
	})
	time.Sleep(600 * time.Millisecond)
	select {
	case ck := <-checks:
		t.Fatalf("checked after the commit: %+v", ck)
	default:
	}
	st, _ := tc.Stats(context.Background(), &pb.TransactionStatsRequest{})
	if st.Checks != 2 || st.ChecksSent != 2 || st.UnknownAnswers != 1 || st.Commits != 1 || st.Pending != 0 {
		t.Fatalf("stats: %+v", st)
	}
	// The internal group's offsets moved past everything.
	waitCond(t, 5*time.Second, "consume offsets", func() error {
		_, halfMax := b.Store().QueueOffsets(message.TransHalfTopic, 0)
		if h := b.OffsetTable().Query(txn.Group, message.TransHalfTopic, 0); h != halfMax {
			return fmt.Errorf("half consume offset %d of %d", h, halfMax)
		}
		if o := b.OffsetTable().Query(txn.Group, message.TransOpHalfTopic, 0); o != 1 {
			return fmt.Errorf("op consume offset %d", o)
		}
		return nil
	})
}

// TestTransactionDiscardWithoutProducer: with no live producer the checks
// are counted and retried; after CheckMax the half message is discarded
// into TRANS_CHECK_MAX_TIME_TOPIC, listed by ListDiscarded, and a late
// commit is refused.
func TestTransactionDiscardWithoutProducer(t *testing.T) {
	b, c := testBroker(t, fastTxn(100*time.Millisecond, 100*time.Millisecond, 3))
	tc := txnClient(t, b)
	ctx := context.Background()
	createTopic(t, c, "orders", 2)
	r := sendHalf(t, c, halfMsg("orders", 1, "orphan", "lonely"))
	keep := sendHalf(t, c, halfMsg("orders", 0, "other", "pg"))
	if _, err := end(t, tc, endReq("pg", "orders", keep, pb.TransactionState_TRANSACTION_STATE_COMMIT)); err != nil {
		t.Fatal(err)
	}
	var l *pb.ListDiscardedResponse
	waitCond(t, 10*time.Second, "discarded", func() error {
		var err error
		l, err = tc.ListDiscarded(ctx, &pb.ListDiscardedRequest{})
		if err != nil {
			return err
		}
		if len(l.Transactions) != 1 {
			return fmt.Errorf("%d discarded", len(l.Transactions))
		}
		return nil
	})
	d := l.Transactions[0]
	if d.TransactionId != r.UniqueId || d.Topic != "orders" || d.QueueId != 1 || d.ProducerGroup != "lonely" ||
		d.CheckTimes != 3 || d.Tags != "tag-orphan" || d.DiscardedAtMs == 0 || l.NextOffset != 1 || l.MaxOffset != 1 {
		t.Fatalf("discarded: %+v", d)
	}
	if m, err := message.Decode(d.Record); err != nil || string(m.Body) != "orphan" {
		t.Fatalf("discarded record: %v", err)
	}
	// Filters.
	if l, _ := tc.ListDiscarded(ctx, &pb.ListDiscardedRequest{ProducerGroup: "pg"}); len(l.Transactions) != 0 {
		t.Fatalf("group filter: %+v", l.Transactions)
	}
	// The discard is counted once its append has returned, which may be
	// after the discarded record can be listed.
	waitCond(t, 5*time.Second, "discard counted", func() error {
		st, err := tc.Stats(ctx, &pb.TransactionStatsRequest{})
		if err != nil {
			return err
		}
		if st.Checks != 3 || st.ChecksWithoutProducer != 3 || st.ChecksSent != 0 || st.Discards != 1 || st.Pending != 0 || st.DiscardedTotal != 1 {
			return fmt.Errorf("stats: %+v", st)
		}
		return nil
	})
	if _, err := end(t, tc, endReq("lonely", "orders", r, pb.TransactionState_TRANSACTION_STATE_COMMIT)); !codeIs(err, pb.Code_TRANSACTION_STATE_CONFLICT) {
		t.Fatalf("commit after discard: %v", err)
	}
	if n := len(queueMessages(t, b, "orders", 1)); n != 0 {
		t.Fatalf("discarded message delivered (%d)", n)
	}
	// Nobody pulls the discard topic either.
	pull, _ := c.Pull(ctx, &pb.PullRequest{Topic: message.TransCheckMaxTopic, CommitOffset: -1})
	if pull.Status.GetCode() != pb.Code_NO_PERMISSION {
		t.Fatalf("pull of the discard topic: %v", pull.GetStatus())
	}
}

// restartable starts a broker on dir and returns a restart function.
func restartable(t *testing.T, dir string, mutate func(*broker.Options)) (func() (*server.Server, pb.BrokerClient, pb.TransactionClient), func()) {
	var b *server.Server
	var conn *grpc.ClientConn
	stop := func() {
		if conn != nil {
			conn.Close()
			conn = nil
		}
		if b != nil {
			if err := b.Close(); err != nil {
				t.Error(err)
			}
			b = nil
		}
	}
	start := func() (*server.Server, pb.BrokerClient, pb.TransactionClient) {
		t.Helper()
		stop()
		opts := testOptions(dir)
		mutate(&opts)
		var err error
		if b, err = newBroker(opts, nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		if conn, err = grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			t.Fatal(err)
		}
		return b, pb.NewBrokerClient(conn), pb.NewTransactionClient(conn)
	}
	t.Cleanup(stop)
	return start, stop
}

// TestTransactionStateSurvivesRestart: pending transactions, their check
// counts, outcomes and the internal group's offsets survive a restart; an
// ended transaction is not checked again.
func TestTransactionStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	start, _ := restartable(t, dir, fastTxn(100*time.Millisecond, 150*time.Millisecond, 50))
	b, c, tc := start()
	ctx := context.Background()
	createTopic(t, c, "orders", 1)
	committed := sendHalf(t, c, halfMsg("orders", 0, "committed", "pg"))
	if _, err := end(t, tc, endReq("pg", "orders", committed, pb.TransactionState_TRANSACTION_STATE_COMMIT)); err != nil {
		t.Fatal(err)
	}
	rolled := sendHalf(t, c, halfMsg("orders", 0, "rolled", "pg"))
	if _, err := end(t, tc, endReq("pg", "orders", rolled, pb.TransactionState_TRANSACTION_STATE_ROLLBACK)); err != nil {
		t.Fatal(err)
	}
	open := sendHalf(t, c, halfMsg("orders", 0, "open", "pg"))
	var before int32
	waitCond(t, 10*time.Second, "two checks", func() error {
		l, _ := tc.ListPending(ctx, &pb.ListPendingRequest{})
		if len(l.Transactions) != 1 || l.Transactions[0].CheckTimes < 2 {
			return fmt.Errorf("pending %+v", l.Transactions)
		}
		before = l.Transactions[0].CheckTimes
		return nil
	})
	b, c, tc = start()
	l, err := tc.ListPending(ctx, &pb.ListPendingRequest{})
	if err != nil || l.Total != 1 || l.Transactions[0].TransactionId != open.UniqueId || l.Transactions[0].CheckTimes < before {
		t.Fatalf("pending after restart: %v %+v (had %d checks)", err, l, before)
	}
	// The persisted offsets put the walk past the ended transactions.
	if h := b.OffsetTable().Query(txn.Group, message.TransHalfTopic, 0); h <= rolled.QueueOffset {
		t.Fatalf("half consume offset %d, rolled back half at %d", h, rolled.QueueOffset)
	}
	if resp, err := end(t, tc, endReq("pg", "orders", committed, pb.TransactionState_TRANSACTION_STATE_COMMIT)); err != nil || !resp.Duplicate {
		t.Fatalf("commit repeated after restart: %v %+v", err, resp)
	}
	if _, err := end(t, tc, endReq("pg", "orders", rolled, pb.TransactionState_TRANSACTION_STATE_COMMIT)); !codeIs(err, pb.Code_TRANSACTION_STATE_CONFLICT) {
		t.Fatalf("commit of a rolled back transaction after restart: %v", err)
	}
	// The check count keeps growing from where it was.
	waitCond(t, 10*time.Second, "more checks", func() error {
		l, _ := tc.ListPending(ctx, &pb.ListPendingRequest{})
		if len(l.Transactions) != 1 || l.Transactions[0].CheckTimes <= before {
			return fmt.Errorf("pending %+v", l.Transactions)
		}
		return nil
	})
	// Commit it with the producer's original offsets.
	if _, err := end(t, tc, endReq("pg", "orders", open, pb.TransactionState_TRANSACTION_STATE_COMMIT)); err != nil {
		t.Fatal(err)
	}
	b, _, tc = start()
	if l, _ := tc.ListPending(ctx, &pb.ListPendingRequest{}); l.Total != 0 {
		t.Fatalf("pending after the last restart: %+v", l)
	}
	var bodies []string
	for _, m := range queueMessages(t, b, "orders", 0) {
		bodies = append(bodies, string(m.Body))
	}
	if fmt.Sprint(bodies) != "[committed open]" {
		t.Fatalf("real queue holds %v", bodies)
	}
}

// TestTransactionLostOpRecordRepaired: a crash between the real message
// and its op record (they share one append, so only a torn write does
// this) leaves a committed message whose half message looks pending. The
// check service finds the committed message, writes the op record, and
// neither checks back nor commits twice.
func TestTransactionLostOpRecordRepaired(t *testing.T) {
	dir := t.TempDir()
	start, _ := restartable(t, dir, fastTxn(time.Second, 100*time.Millisecond, 15))
	b, c, tc := start()
	createTopic(t, c, "orders", 1)
	// A producer is connected: a check would reach it.
	checks := connectProducer(t, c, "127.0.0.1@test", "pg")
	r := sendHalf(t, c, halfMsg("orders", 0, "torn", "pg"))
	half, err := b.Store().ReadMessage(r.CommitLogOffset)
	if err != nil {
		t.Fatal(err)
	}
	// The real message alone, as a torn append would leave it.
	real, err := txn.RealMessage(half)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store().Put(context.Background(), real); err != nil {
		t.Fatal(err)
	}
	waitCond(t, 10*time.Second, "repaired", func() error {
		st, _ := tc.Stats(context.Background(), &pb.TransactionStatsRequest{})
		if st.Pending != 0 || st.OpMaxOffset != 1 {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	select {
	case ck := <-checks:
		t.Fatalf("checked back: %+v", ck)
	default:
	}
	if n := len(queueMessages(t, b, "orders", 0)); n != 1 {
		t.Fatalf("%d messages", n)
	}
	if resp, err := end(t, tc, endReq("pg", "orders", r, pb.TransactionState_TRANSACTION_STATE_COMMIT)); err != nil || !resp.Duplicate {
		t.Fatalf("commit: %v %+v", err, resp)
	}
}

// TestTransactionSlaveRefusesEnd: a slave keeps no transaction state.
func TestTransactionSlaveRefusesEnd(t *testing.T) {
	b, _ := testBroker(t, func(o *broker.Options) { o.BrokerID = 1 })
	tc := txnClient(t, b)
	_, err := end(t, tc, &pb.EndTransactionRequest{ProducerGroup: "pg", State: pb.TransactionState_TRANSACTION_STATE_COMMIT})
	if !codeIs(err, pb.Code_NOT_MASTER) {
		t.Fatalf("end on a slave: %v", err)
	}
}

// TestTransactionServiceFollowsRole: a broker that stops being the master
// refuses ends; once master again it reloads the state from the store and
// carries on.
func TestTransactionServiceFollowsRole(t *testing.T) {
	b, c := testBroker(t, fastTxn(time.Hour, time.Hour, 15))
	tc := txnClient(t, b)
	ctx := context.Background()
	createTopic(t, c, "orders", 1)
	done := sendHalf(t, c, halfMsg("orders", 0, "done", "pg"))
	if _, err := end(t, tc, endReq("pg", "orders", done, pb.TransactionState_TRANSACTION_STATE_ROLLBACK)); err != nil {
		t.Fatal(err)
	}
	open := sendHalf(t, c, halfMsg("orders", 0, "open", "pg"))
	setRole := func(r broker.Role) { // as replication does on a fence or a promotion
		if err := b.Replication().ForceRole(r); err != nil {
			t.Fatal(err)
		}
	}
	setRole(broker.RoleFenced)
	b.SyncRole()
	if _, err := end(t, tc, endReq("pg", "orders", open, pb.TransactionState_TRANSACTION_STATE_COMMIT)); !codeIs(err, pb.Code_NOT_MASTER) {
		t.Fatalf("end on a demoted broker: %v", err)
	}
	setRole(broker.RoleMaster) // promoted again: the next end starts the service
	l, err := tc.ListPending(ctx, &pb.ListPendingRequest{})
	if err != nil || l.Total != 1 || l.Transactions[0].TransactionId != open.UniqueId {
		t.Fatalf("pending after promotion: %v %+v", err, l)
	}
	if _, err := end(t, tc, endReq("pg", "orders", done, pb.TransactionState_TRANSACTION_STATE_COMMIT)); !codeIs(err, pb.Code_TRANSACTION_STATE_CONFLICT) {
		t.Fatalf("commit of a rolled back transaction: %v", err)
	}
	if _, err := end(t, tc, endReq("pg", "orders", open, pb.TransactionState_TRANSACTION_STATE_COMMIT)); err != nil {
		t.Fatal(err)
	}
	if n := len(queueMessages(t, b, "orders", 0)); n != 1 {
		t.Fatalf("%d messages", n)
	}
}

// TestTransactionStateNumbers: the gRPC front end converts a
// TransactionState by number; txn.State keeps the enum's numbers.
func TestTransactionStateNumbers(t *testing.T) {
	for st, want := range map[pb.TransactionState]txn.State{
		pb.TransactionState_TRANSACTION_STATE_UNKNOWN:  txn.StateUnknown,
		pb.TransactionState_TRANSACTION_STATE_COMMIT:   txn.StateCommit,
		pb.TransactionState_TRANSACTION_STATE_ROLLBACK: txn.StateRollback,
	} {
		if txn.State(st) != want {
			t.Errorf("%v is %d, txn.State %d", st, st, want)
		}
	}
}
