package remoting_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

func offsetReqExt(group, topic string, q int32, kv ...string) map[string]string {
	ext := map[string]string{"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(q)), "bname": "broker-a"}
	for i := 0; i+1 < len(kv); i += 2 {
		ext[kv[i]] = kv[i+1]
	}
	return ext
}

func TestConsumerOffsetRoundTrip(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 2)
	// A group with no offset: QUERY_NOT_FOUND, so the client applies its
	// consume-from-where.
	if resp := cb.invoke(t, rmq.QueryConsumerOffset, offsetReqExt("CG", "T", 1), nil); resp.Code != rmq.QueryNotFound {
		t.Fatalf("query before any commit: %d %s %v", resp.Code, resp.Remark, resp.Ext)
	}
	if resp := cb.invoke(t, rmq.UpdateConsumerOffset, offsetReqExt("CG", "T", 1, "commitOffset", "7"), nil); resp.Code != rmq.Success {
		t.Fatalf("update: %d %s", resp.Code, resp.Remark)
	}
	resp := cb.invoke(t, rmq.QueryConsumerOffset, offsetReqExt("CG", "T", 1), nil)
	if resp.Code != rmq.Success || resp.String("offset") != "7" {
		t.Fatalf("query after committing 7: %d %v", resp.Code, resp.Ext)
	}
	// −1 (queues that never advanced) is ignored, and answered success.
	if resp := cb.invoke(t, rmq.UpdateConsumerOffset, offsetReqExt("CG", "T", 1, "commitOffset", "-1"), nil); resp.Code != rmq.Success {
		t.Fatalf("update with -1: %d %s", resp.Code, resp.Remark)
	}
	if resp := cb.invoke(t, rmq.QueryConsumerOffset, offsetReqExt("CG", "T", 1), nil); resp.String("offset") != "7" {
		t.Fatalf("query after committing -1: %v", resp.Ext)
	}
	// An explicit commit may move the offset back (a reset).
	cb.invoke(t, rmq.UpdateConsumerOffset, offsetReqExt("CG", "T", 1, "commitOffset", "3"), nil)
	if resp := cb.invoke(t, rmq.QueryConsumerOffset, offsetReqExt("CG", "T", 1), nil); resp.String("offset") != "3" {
		t.Fatalf("query after committing 3: %v", resp.Ext)
	}
	// The other queue and other groups are untouched; the core sees it all.
	if resp := cb.invoke(t, rmq.QueryConsumerOffset, offsetReqExt("CG", "T", 0), nil); resp.Code != rmq.QueryNotFound {
		t.Fatalf("other queue: %d %v", resp.Code, resp.Ext)
	}
	if off, _ := cb.b.QueryOffset("CG", "T", 1); off != 3 {
		t.Fatalf("the core holds offset %d", off)
	}
	// Refusals are coded: an unknown topic, a bad group, no queue id.
	for name, tc := range map[string]struct {
		code int32
		ext  map[string]string
	}{
		"unknown topic": {rmq.TopicNotExist, offsetReqExt("CG", "Nope", 0, "commitOffset", "1")},
		"bad group":     {rmq.InvalidParameter, offsetReqExt("C G", "T", 0, "commitOffset", "1")},
		"no queue id":   {rmq.InvalidParameter, map[string]string{"consumerGroup": "CG", "topic": "T", "commitOffset": "1"}},
		"no offset":     {rmq.InvalidParameter, offsetReqExt("CG", "T", 0)},
	} {
		if resp := cb.invoke(t, rmq.UpdateConsumerOffset, tc.ext, nil); resp.Code != tc.code {
			t.Errorf("update, %s: %d %s, want %d", name, resp.Code, resp.Remark, tc.code)
		}
	}
}

func TestQueueOffsets(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 2)
	q := map[string]string{"topic": "T", "queueId": "1"}
	// An empty queue.
	if resp := cb.invoke(t, rmq.GetMaxOffset, q, nil); resp.Code != rmq.Success || resp.String("offset") != "0" {
		t.Fatalf("max offset of an empty queue: %d %v", resp.Code, resp.Ext)
	}
	if resp := cb.invoke(t, rmq.GetEarliestMsgStoreTime, q, nil); resp.Code != rmq.Success || resp.String("timestamp") != "-1" {
		t.Fatalf("earliest store time of an empty queue: %d %v", resp.Code, resp.Ext)
	}
	before := time.Now().UnixMilli()
	cb.send(t, "T", 1, "a", "")
	cb.send(t, "T", 1, "b", "")
	cb.waitQueue(t, "T", 1, 2)
	time.Sleep(20 * time.Millisecond) // store times now differ from the third's
	middle := time.Now().UnixMilli()
	cb.send(t, "T", 1, "c", "")
	cb.waitQueue(t, "T", 1, 3)
	// The max offset is the next one to be written.
	if resp := cb.invoke(t, rmq.GetMaxOffset, q, nil); resp.String("offset") != "3" {
		t.Fatalf("max offset: %v", resp.Ext)
	}
	if resp := cb.invoke(t, rmq.GetMinOffset, q, nil); resp.Code != rmq.Success || resp.String("offset") != "0" {
		t.Fatalf("min offset: %d %v", resp.Code, resp.Ext)
	}
	resp := cb.invoke(t, rmq.GetEarliestMsgStoreTime, q, nil)
	if ts, err := resp.Int64("timestamp"); err != nil || ts < before || ts > middle {
		t.Fatalf("earliest store time %v, sent between %d and %d", resp.Ext, before, middle)
	}
	for _, tc := range []struct {
		ts   int64
		want string
	}{{0, "0"}, {before, "0"}, {middle, "2"}, {time.Now().Add(time.Hour).UnixMilli(), "3"}} {
		ext := map[string]string{"topic": "T", "queueId": "1", "timestamp": strconv.FormatInt(tc.ts, 10)}
		if resp := cb.invoke(t, rmq.SearchOffsetByTimestamp, ext, nil); resp.Code != rmq.Success || resp.String("offset") != tc.want {
			t.Errorf("search %d: %d %v, want offset %s", tc.ts, resp.Code, resp.Ext, tc.want)
		}
	}
	// A topic this broker does not know holds nothing: the offset the Go
	// client reads whatever the code is 0, and the code says why.
	for _, code := range []int32{rmq.GetMaxOffset, rmq.GetMinOffset, rmq.SearchOffsetByTimestamp} {
		resp := cb.invoke(t, code, map[string]string{"topic": "Nope", "queueId": "0", "timestamp": "1"}, nil)
		if resp.Code != rmq.TopicNotExist || resp.String("offset") != "0" {
			t.Errorf("request %d for an unknown topic: %d %v", code, resp.Code, resp.Ext)
		}
	}
	// A malformed request gets no offset at all.
	if resp := cb.invoke(t, rmq.GetMaxOffset, map[string]string{"topic": "T"}, nil); resp.Code != rmq.InvalidParameter || resp.Has("offset") {
		t.Errorf("max offset without a queue id: %d %v", resp.Code, resp.Ext)
	}
}

func TestConsumerListAllProtocols(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	ask := func() (int32, []string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := cb.conn.Invoke(ctx, rmq.NewRequest(rmq.GetConsumerListByGroup, map[string]string{"consumerGroup": "CG"}, nil))
		if errors.Is(err, context.DeadlineExceeded) {
			return -1, nil // not answered: a group without connected members
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Body) == 0 {
			return resp.Code, nil
		}
		var l struct {
			IDs []string `json:"consumerIdList"`
		}
		if err := json.Unmarshal(resp.Body, &l); err != nil {
			t.Fatalf("body %q: %v", resp.Body, err)
		}
		return resp.Code, l.IDs
	}
	if code, ids := ask(); code != -1 || ids != nil {
		t.Fatalf("a group nobody joined: answered %d %v", code, ids)
	}
	// Members join through the core, as every front end's heartbeat does:
	// the list holds them all, sorted.
	var sessions []*broker.Session
	for _, id := range []string{"192.0.2.9@77", "192.0.2.2@5", "bolide-sdk-1"} {
		s, err := cb.b.Connect(broker.Heartbeat{ClientID: id, Consumers: []broker.ConsumerData{{Group: "CG",
			Subscriptions: []broker.Subscription{{Topic: "T", Expression: "*"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	code, ids := ask()
	if code != rmq.Success || len(ids) != 3 || ids[0] != "192.0.2.2@5" || ids[1] != "192.0.2.9@77" || ids[2] != "bolide-sdk-1" {
		t.Fatalf("consumer list: %d %v", code, ids)
	}
	for _, s := range sessions {
		s.Close()
	}
	if code, ids := ask(); code != -1 || len(ids) != 0 {
		t.Fatalf("a group whose members left: answered %d %v", code, ids)
	}
}

// lockMQ, lockBody and lockReply are LOCK_BATCH_MQ's JSON as the Go client
// writes and reads it.
type lockMQ struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

type lockBody struct {
	ConsumerGroup string   `json:"consumerGroup"`
	ClientID      string   `json:"clientId"`
	MQSet         []lockMQ `json:"mqSet"`
}

type lockReply struct {
	LockOKMQSet []lockMQ `json:"lockOKMQSet"`
}

func TestLockBatchExclusive(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "TopicO", 4)
	mq := func(q int32) lockMQ { return lockMQ{Topic: "TopicO", BrokerName: "broker-a", QueueID: q} }
	lock := func(code int32, client string, qs ...int32) (int32, []int32) {
		t.Helper()
		body := lockBody{ConsumerGroup: "CG3", ClientID: client}
		for _, q := range qs {
			body.MQSet = append(body.MQSet, mq(q))
		}
		raw, _ := json.Marshal(body)
		resp := cb.invoke(t, code, nil, raw)
		if code == rmq.UnlockBatchMQ {
			return resp.Code, nil
		}
		var out lockReply
		if err := json.Unmarshal(resp.Body, &out); err != nil {
			t.Fatalf("lock answer %q: %v", resp.Body, err)
		}
		var got []int32
		for _, m := range out.LockOKMQSet {
			if m.Topic != "TopicO" || m.BrokerName != "broker-a" {
				t.Fatalf("locked %+v", m)
			}
			got = append(got, m.QueueID)
		}
		return resp.Code, got
	}
	eq := func(a []int32, b ...int32) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	if code, got := lock(rmq.LockBatchMQ, "192.0.2.2@1", 0, 1); code != rmq.Success || !eq(got, 0, 1) {
		t.Fatalf("A locks 0,1: %d %v", code, got)
	}
	if _, got := lock(rmq.LockBatchMQ, "192.0.2.3@2", 1, 2); !eq(got, 2) {
		t.Fatalf("B locks 1,2: %v (1 is A's)", got)
	}
	// Renewing is locking again.
	if _, got := lock(rmq.LockBatchMQ, "192.0.2.2@1", 0, 1, 2); !eq(got, 0, 1) {
		t.Fatalf("A renews 0,1 and asks 2: %v", got)
	}
	// B cannot release A's lock; A can.
	if code, _ := lock(rmq.UnlockBatchMQ, "192.0.2.3@2", 1); code != rmq.Success {
		t.Fatalf("unlock: %d", code)
	}
	if _, got := lock(rmq.LockBatchMQ, "192.0.2.3@2", 1); len(got) != 0 {
		t.Fatalf("B took 1 after unlocking a lock it did not hold: %v", got)
	}
	lock(rmq.UnlockBatchMQ, "192.0.2.2@1", 1)
	if _, got := lock(rmq.LockBatchMQ, "192.0.2.3@2", 1); !eq(got, 1) {
		t.Fatalf("B locks 1 after A released it: %v", got)
	}
	// A refused request still answers an empty set, which the client reads
	// whatever the code.
	resp := cb.invoke(t, rmq.LockBatchMQ, nil, []byte(`{"consumerGroup":"CG3","mqSet":[{"topic":"TopicO","brokerName":"broker-a","queueId":3}]}`))
	if resp.Code == rmq.Success || string(resp.Body) != `{"lockOKMQSet":[]}` {
		t.Fatalf("lock without a client id: %d %q", resp.Code, resp.Body)
	}
	resp = cb.invoke(t, rmq.LockBatchMQ, nil, []byte(`not json`))
	if resp.Code != rmq.InvalidParameter || string(resp.Body) != `{"lockOKMQSet":[]}` {
		t.Fatalf("lock with a bad body: %d %q", resp.Code, resp.Body)
	}
	// Java's body (fastjson field order, onlyThisBroker) is read too.
	resp = cb.invoke(t, rmq.LockBatchMQ, nil, []byte(`{"clientId":"192.0.2.4@3","consumerGroup":"CG3","mqSet":[{"brokerName":"broker-a","queueId":3,"topic":"TopicO"}],"onlyThisBroker":false}`))
	if string(resp.Body) != `{"lockOKMQSet":[{"topic":"TopicO","brokerName":"broker-a","queueId":3}]}` {
		t.Fatalf("Java lock body: %d %q", resp.Code, resp.Body)
	}
}

// TestGoClientCommitUnanswered: RocketMQ's Go client sends its commits as
// oneway requests without the oneway flag and closes its connections right
// after the last ones on shutdown, so it is not answered (an unread answer
// makes its close a reset that drops the commits behind it); the commit is
// applied all the same, and a refused one is still answered.
func TestGoClientCommitUnanswered(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 2)
	req := rmq.NewRequest(rmq.UpdateConsumerOffset, offsetReqExt("CG", "T", 1, "commitOffset", "9"), nil)
	req.Language = "GO"
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if resp, err := cb.conn.Invoke(ctx, req); err == nil {
		t.Fatalf("the Go client's commit was answered: %d %s", resp.Code, resp.Remark)
	}
	if resp := cb.invoke(t, rmq.QueryConsumerOffset, offsetReqExt("CG", "T", 1), nil); resp.String("offset") != "9" {
		t.Fatalf("query after the Go client's commit: %d %v", resp.Code, resp.Ext)
	}
	bad := rmq.NewRequest(rmq.UpdateConsumerOffset, offsetReqExt("CG", "Nope", 0, "commitOffset", "1"), nil)
	bad.Language = "GO"
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if resp, err := cb.conn.Invoke(ctx2, bad); err != nil || resp.Code != rmq.TopicNotExist {
		t.Fatalf("the Go client's refused commit: %v %v", resp, err)
	}
}
