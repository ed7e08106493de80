package broker_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/hotwire"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// packed is the request the SDK sends over frames for msgs: their
// messages packed.
func packed(t *testing.T, msgs ...*pb.Message) *pb.SendRequest {
	t.Helper()
	b, ok := hotwire.AppendPackedSendRequest(nil, &pb.SendRequest{ProducerGroup: "pg", Messages: msgs})
	if !ok {
		t.Fatal("the messages cannot be packed")
	}
	req := new(pb.SendRequest)
	if err := proto.Unmarshal(b, req); err != nil {
		t.Fatal(err)
	}
	if len(req.Messages) != 0 || len(req.Packed) == 0 {
		t.Fatalf("request not packed: %v", req)
	}
	return req
}

// sendReq sends req and returns its results, failing the test on any error.
func sendReq(t *testing.T, c pb.BrokerClient, req *pb.SendRequest) []*pb.SendResult {
	t.Helper()
	resp, err := c.Send(context.Background(), req)
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("send: %v %v", err, resp.GetStatus())
	}
	if len(resp.Results) == 0 {
		t.Fatal("no results")
	}
	return resp.Results
}

// sendCode sends req and returns the code it is answered with.
func sendCode(t *testing.T, c pb.BrokerClient, req *pb.SendRequest) pb.Code {
	t.Helper()
	resp, err := c.Send(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetStatus().GetCode()
}

// variedBatch is a batch of messages to topic, queue 0, with every field a
// producer sets, each in several forms.
func variedBatch(topic string, n, round int) []*pb.Message {
	hosts := []string{"", "10.1.2.3:4567", "[2001:db8::7]:9876", "[::ffff:192.168.0.9]:1"}
	var msgs []*pb.Message
	for i := range n {
		m := &pb.Message{Topic: topic, Body: bytes.Repeat([]byte{byte('a' + i%26)}, 1+i*37%500), Flag: int32(i) - 3,
			BornHost: hosts[i%len(hosts)], SysFlag: message.SysFlagCompressed * int32(i%2), ReconsumeTimes: int32(i % 3),
			Properties: map[string]string{
				message.PropertyTags:      fmt.Sprint("tag", i%3),
				message.PropertyKeys:      fmt.Sprintf("key-%d shared", i),
				message.PropertyUniqueKey: fmt.Sprintf("%s-UID-%d-%04d", topic, round, i),
				"custom":                  strconv.Itoa(i * i),
			}}
		if i%4 != 0 {
			m.BornTimestamp = 1_700_000_000_000 + int64(i)
		}
		if i%5 == 0 {
			delete(m.Properties, message.PropertyKeys)
			delete(m.Properties, message.PropertyTags)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// TestPackedSendStoresWhatSendStores sends the same messages as they are
// to one topic and packed to another: the stored messages are the same
// (but for their topic, offsets and the times the broker sets), and so are
// what the ConsumeQueues and the index make of them: the tag filter, the
// key lookup, the unique-id lookup.
func TestPackedSendStoresWhatSendStores(t *testing.T) {
	b, c := testBroker(t)
	createTopic(t, c, "unpack", 1)
	createTopic(t, c, "packed", 1)
	const n = 40
	for round, size := range []int{1, 7, 32} {
		var got, want []*pb.SendResult
		for at := 0; at < n; at += size {
			plain := variedBatch("unpack", n, round)[at:min(at+size, n)]
			pack := variedBatch("packed", n, round)[at:min(at+size, n)]
			want = append(want, sendReq(t, c, &pb.SendRequest{Messages: plain})...)
			got = append(got, sendReq(t, c, packed(t, pack...))...)
		}
		for i := range got {
			if got[i].QueueId != 0 || got[i].QueueOffset != want[i].QueueOffset || got[i].MsgId == "" || got[i].MsgId == want[i].MsgId {
				t.Fatalf("batches of %d, message %d: packed result %+v, plain %+v", size, i, got[i], want[i])
			}
		}
	}
	plain, pack := queueMessages(t, b, "unpack", 0), queueMessages(t, b, "packed", 0)
	if len(plain) != 3*n || len(pack) != 3*n {
		t.Fatalf("stored %d plain and %d packed messages, want %d each", len(plain), len(pack), 3*n)
	}
	for i := range plain {
		p, q := plain[i], pack[i]
		if p.Properties[message.PropertyUniqueKey] != "unpack-UID-"+q.Properties[message.PropertyUniqueKey][len("packed-UID-"):] {
			t.Fatalf("message %d: ids %q and %q", i, p.Properties[message.PropertyUniqueKey], q.Properties[message.PropertyUniqueKey])
		}
		p.Properties[message.PropertyUniqueKey], q.Properties[message.PropertyUniqueKey] = "", ""
		if p.BornTimestamp >= 1_700_000_000_000+n { // set by the broker: a clock reading
			if q.BornTimestamp < p.BornTimestamp || q.BornTimestamp > time.Now().UnixMilli() {
				t.Fatalf("message %d: born %d plain, %d packed", i, p.BornTimestamp, q.BornTimestamp)
			}
			q.BornTimestamp = p.BornTimestamp
		}
		if q.QueueOffset != p.QueueOffset || q.QueueID != p.QueueID || q.Flag != p.Flag || q.SysFlag != p.SysFlag ||
			q.BornTimestamp != p.BornTimestamp || q.BornHost != p.BornHost || q.StoreHost != p.StoreHost ||
			q.ReconsumeTimes != p.ReconsumeTimes || q.StoreSize != p.StoreSize || !bytes.Equal(q.Body, p.Body) ||
			fmt.Sprint(q.Properties) != fmt.Sprint(p.Properties) {
			t.Fatalf("message %d:\npacked %+v\n plain %+v", i, q, p)
		}
	}
	ctx := context.Background()
	for _, topic := range []string{"unpack", "packed"} {
		pull, err := c.Pull(ctx, &pb.PullRequest{Topic: topic, QueueId: 0, TagExpression: "tag1", MaxMessages: 1000, CommitOffset: -1})
		if err != nil || len(pull.Records) != 3*11 {
			t.Fatalf("%s: tag filter found %d records (%v), want %d", topic, len(pull.GetRecords()), err, 3*11)
		}
		var qr *pb.QueryMessageResponse
		testutil.Eventually(t, 5*time.Second, "the keys to be indexed", func() bool {
			qr, _ = c.QueryMessage(ctx, &pb.QueryMessageRequest{Topic: topic, Key: "key-13", Max: 8})
			return len(qr.GetRecords()) == 3
		})
		qr, _ = c.QueryMessage(ctx, &pb.QueryMessageRequest{Topic: topic, Key: topic + "-UID-2-0021", Max: 8})
		if len(qr.GetRecords()) != 1 {
			t.Fatalf("%s: unique id found in %d records, want 1", topic, len(qr.GetRecords()))
		}
	}
}

// TestPackedSendRewritten: packed messages that Send rewrites (a delay
// level, a delivery time, a half message) and sends to a retry topic are
// treated exactly as the same messages sent as they are.
func TestPackedSendRewritten(t *testing.T) {
	db := startDelayBroker(t, t.TempDir())
	c := db.c
	createTopic(t, c, "later", 2)
	m := delayedMsg("later", 1, "in a second", message.PropertyDelayLevel, "1")
	r := sendReq(t, c, packed(t, m))[0]
	if r.QueueId != 0 { // as Send answers: level 1 waits in SCHEDULE_TOPIC_XXXX's queue 0
		t.Fatalf("delayed result %+v", r)
	}
	if n := queueSize(t, c, "later", 1); n != 0 {
		t.Fatalf("a delayed message reached its topic at once (%d)", n)
	}
	waitQueue(t, c, "later", 1, 1)
	got := queueMessages(t, db.b, "later", 1)
	if len(got) != 1 || string(got[0].Body) != "in a second" || got[0].Properties[message.PropertyUniqueKey] != "Uin a second" {
		t.Fatalf("delivered %+v", got)
	}

	// A delivery time, packed between two plain messages: they are in
	// their topic at once, it when due, as Send stores it (the timer
	// topic's queue 0 in its answer); each comes out as it was sent.
	early := delayedMsg("later", 1, "at once")
	timed := delayedMsg("later", 1, "at a time", message.PropertyTimerDelayMS, "800")
	late := delayedMsg("later", 1, "at once too")
	sent := time.Now()
	res := sendReq(t, c, packed(t, early, timed, late))
	if res[0].QueueId != 1 || res[1].QueueId != 0 || res[2].QueueId != 1 {
		t.Fatalf("answered queues %d, %d, %d; want 1, 0, 1", res[0].QueueId, res[1].QueueId, res[2].QueueId)
	}
	waitQueue(t, c, "later", 1, 3)
	if n, d := queueSize(t, c, "later", 1), time.Since(sent); n != 3 && d < 800*time.Millisecond {
		t.Fatalf("%d messages in the queue %v after the send: the timer message came early", n, d)
	}
	waitQueue(t, c, "later", 1, 4)
	if d := time.Since(sent); d < 800*time.Millisecond {
		t.Fatalf("the timer message was delivered after %v, asked 800ms", d)
	}
	got = queueMessages(t, db.b, "later", 1)
	if len(got) != 4 || string(got[3].Body) != "at a time" || got[3].Properties[message.PropertyUniqueKey] != "Uat a time" {
		t.Fatalf("delivered %+v", got)
	}
	checkRestored(t, got[3])

	half := halfMsg("later", 0, "half", "txn-group")
	sendReq(t, c, packed(t, half))
	if n := queueSize(t, c, "later", 0); n != 0 {
		t.Fatalf("a half message became visible (%d)", n)
	}
	if hm := queueMessages(t, db.b, message.TransHalfTopic, 0); len(hm) != 1 || hm[0].Properties[message.PropertyRealTopic] != "later" {
		t.Fatalf("half topic holds %+v", hm)
	}

	retry := &pb.Message{Topic: message.RetryTopicPrefix + "g", Body: []byte("x")}
	if code := sendCode(t, c, packed(t, retry, retry)); code != pb.Code_NO_PERMISSION {
		t.Fatalf("packed batch to a retry topic answered %v", code)
	}
}

// TestPackedSendDeduplicated: a packed send repeating unique ids is
// answered with the first copies' results, in the queues they went to,
// and stores nothing more.
func TestPackedSendDeduplicated(t *testing.T) {
	b, c := testBroker(t)
	createTopic(t, c, "orders", 2)
	first := sendReq(t, c, &pb.SendRequest{Messages: []*pb.Message{idMsg("orders", 0, "ID-1", "one")}})[0]
	res := sendReq(t, c, packed(t, idMsg("orders", 1, "ID-1", "one again"), idMsg("orders", 1, "ID-2", "two"), idMsg("orders", 1, "ID-2", "two")))
	first.UniqueId = ""
	sameResult(t, "retry of a plain send, packed", res[0], first)
	sameResult(t, "repeat inside a packed batch", res[2], res[1])
	if res[1].QueueId != 1 {
		t.Fatalf("new message answered %+v", res[1])
	}
	again := sendReq(t, c, packed(t, idMsg("orders", 1, "ID-2", "two"), idMsg("orders", 1, "ID-1", "one")))
	sameResult(t, "packed retry", again[0], res[1])
	sameResult(t, "packed retry", again[1], first)
	waitQueue(t, c, "orders", 1, 1)
	if n0, n1 := queueSize(t, c, "orders", 0), queueSize(t, c, "orders", 1); n0 != 1 || n1 != 1 {
		t.Fatalf("queues hold %d and %d messages, want 1 and 1", n0, n1)
	}
	if st := b.DedupStats(); st.Hits != 4 {
		t.Fatalf("window stats %+v: want 4 hits", st)
	}
}

// TestPackedSendBadInput: broken or refused packed sends get their coded
// answer, store nothing, and the broker goes on serving.
func TestPackedSendBadInput(t *testing.T) {
	_, c := testBroker(t, func(o *broker.Options) { o.AutoCreateTopic = false; o.MaxBatchMessages = 8 })
	createTopic(t, c, "orders", 2)
	good := packed(t, msg("orders", 1, "body", "tag", "key"))
	with := func(f func(r *pb.SendRequest)) *pb.SendRequest {
		r := proto.Clone(good).(*pb.SendRequest)
		f(r)
		return r
	}
	entry := func(e *message.Ext) []byte {
		b, err := message.AppendPacked(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	plainEntry := entry(&message.Ext{Message: message.Message{Body: []byte("x")}})
	for name, tc := range map[string]struct {
		req  *pb.SendRequest
		code pb.Code
	}{
		"truncated entry":   {with(func(r *pb.SendRequest) { r.Packed = r.Packed[:len(r.Packed)-1] }), pb.Code_MESSAGE_ILLEGAL},
		"trailing bytes":    {with(func(r *pb.SendRequest) { r.Packed = append(r.Packed, 0, 0, 0) }), pb.Code_MESSAGE_ILLEGAL},
		"size past the end": {with(func(r *pb.SendRequest) { binary.BigEndian.PutUint32(r.Packed, 1<<31) }), pb.Code_MESSAGE_ILLEGAL},
		"unsorted properties": {with(func(r *pb.SendRequest) {
			r.Packed = bytes.Replace(r.Packed, []byte("KEYS\x01key\x02TAGS\x01tag"), []byte("TAGS\x01tag\x02KEYS\x01key"), 1)
		}), pb.Code_MESSAGE_ILLEGAL},
		"messages and packed": {with(func(r *pb.SendRequest) { r.Messages = []*pb.Message{msg("orders", 1, "b", "", "")} }), pb.Code_INVALID_PARAMETER},
		"no entry":            {with(func(r *pb.SendRequest) { r.Packed = nil }), pb.Code_INVALID_PARAMETER},
		"too many":            {with(func(r *pb.SendRequest) { r.Packed = bytes.Repeat(plainEntry, 9) }), pb.Code_INVALID_PARAMETER},
		"empty body":          {with(func(r *pb.SendRequest) { r.Packed = entry(&message.Ext{}) }), pb.Code_MESSAGE_ILLEGAL},
		"body too large": {with(func(r *pb.SendRequest) {
			r.Packed = entry(&message.Ext{Message: message.Message{Body: make([]byte, 1<<20+1)}})
		}), pb.Code_MESSAGE_TOO_LARGE},
		"unknown topic":         {with(func(r *pb.SendRequest) { r.PackedTopic = "nowhere" }), pb.Code_TOPIC_NOT_EXIST},
		"illegal topic":         {with(func(r *pb.SendRequest) { r.PackedTopic = "bad topic!" }), pb.Code_ILLEGAL_TOPIC},
		"no topic":              {with(func(r *pb.SendRequest) { r.PackedTopic = "" }), pb.Code_ILLEGAL_TOPIC},
		"queue out of range":    {with(func(r *pb.SendRequest) { r.PackedQueueId = 2 }), pb.Code_INVALID_PARAMETER},
		"negative queue":        {with(func(r *pb.SendRequest) { r.PackedQueueId = -1 }), pb.Code_INVALID_PARAMETER},
		"system topic":          {with(func(r *pb.SendRequest) { r.PackedTopic = message.ScheduleTopic }), pb.Code_NO_PERMISSION},
		"dead-letter topic":     {with(func(r *pb.SendRequest) { r.PackedTopic = message.DLQTopicPrefix + "g" }), pb.Code_NO_PERMISSION},
		"committed transaction": {with(func(r *pb.SendRequest) { binary.BigEndian.PutUint32(r.Packed[8:], uint32(message.SysFlagTransCommit)) }), pb.Code_MESSAGE_ILLEGAL},
	} {
		if code := sendCode(t, c, tc.req); code != tc.code {
			t.Errorf("%s: answered %v, want %v", name, code, tc.code)
		}
	}
	for q := int32(0); q < 2; q++ {
		if n := queueSize(t, c, "orders", q); n != 0 {
			t.Fatalf("refused sends stored %d messages in queue %d", n, q)
		}
	}
	if r := sendReq(t, c, good); r[0].QueueOffset != 0 || r[0].QueueId != 1 {
		t.Fatalf("after the refusals: %+v", r[0])
	}
}
