package remoting_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// newTopic creates a topic of n read and write queues.
func newTopic(t *testing.T, b *server.Server, name string, n int32) {
	t.Helper()
	if err := b.CreateTopic(broker.TopicConfig{Name: name, ReadQueueNums: n, WriteQueueNums: n}, false); err != nil {
		t.Fatal(err)
	}
}

// props encodes a property string as the clients do.
func props(kv ...string) string {
	var sb strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		sb.WriteString(kv[i] + "\x01" + kv[i+1] + "\x02")
	}
	return sb.String()
}

// sendExt is the long SEND_MESSAGE header the Go client writes.
func sendExt(group, topic string, queueID, sysFlag int, properties string) map[string]string {
	return map[string]string{
		"producerGroup": group, "topic": topic, "queueId": strconv.Itoa(queueID), "sysFlag": strconv.Itoa(sysFlag),
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0", "properties": properties,
		"reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "batch": "false", "bname": "broker-a",
	}
}

// waitMessages waits until a queue holds n messages and returns them.
func waitMessages(t *testing.T, b *server.Server, topic string, q int32, n int) []*message.Ext {
	t.Helper()
	var out []*message.Ext
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d messages in %s/%d", n, topic, q), func() error {
		res, err := b.Pull(context.Background(), broker.PullRequest{Group: "probe", Topic: topic, QueueID: q, MaxMessages: 64, CommitOffset: -1})
		if err != nil {
			return err
		}
		if len(res.Records) < n {
			return fmt.Errorf("%d messages", len(res.Records))
		}
		out = out[:0]
		for _, r := range res.Records {
			m, err := message.Decode(r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return nil
	})
	return out
}

// checkSent checks a SEND response and returns its offset id's CommitLog
// offset.
func checkSent(t *testing.T, b *server.Server, resp *rmq.Command, queueID int32, queueOffset int64) int64 {
	t.Helper()
	if resp.Code != rmq.Success {
		t.Fatalf("send: code %d %q", resp.Code, resp.Remark)
	}
	if resp.String("queueId") != strconv.Itoa(int(queueID)) || resp.String("queueOffset") != strconv.FormatInt(queueOffset, 10) {
		t.Fatalf("send response queue %s offset %s, want %d %d", resp.String("queueId"), resp.String("queueOffset"), queueID, queueOffset)
	}
	if resp.String("MSG_REGION") != "DefaultRegion" || resp.String("TRACE_ON") != "true" {
		t.Fatalf("send response region/trace: %v", resp.Ext)
	}
	id, _, _ := strings.Cut(resp.String("msgId"), ",")
	host, phys, err := message.ParseOffsetMsgID(id)
	if err != nil || len(id) != 32 || host.String() != b.Addr() {
		t.Fatalf("msgId %q: %v %v", id, host, err)
	}
	return phys
}

func TestSendMessage(t *testing.T) {
	b := startBroker(t)
	newTopic(t, b, "orders", 4)
	c := dialBroker(t, b.Addr(), nil)

	const uniq = "C0A800010001000000000000ABCD0001"
	resp := invoke(t, c, rmq.SendMessage, sendExt("PG", "orders", 2, 0,
		props("TAGS", "TagA", "KEYS", "k1 k2", "UNIQ_KEY", uniq, "custom", "v")), []byte("hello"))
	phys := checkSent(t, b, resp, 2, 0)
	if resp.String("transactionId") != uniq {
		t.Fatalf("transactionId %q", resp.String("transactionId"))
	}
	resp = invoke(t, c, rmq.SendMessage, sendExt("PG", "orders", 2, 0, props("TAGS", "TagB")), []byte("second"))
	checkSent(t, b, resp, 2, 1)

	msgs := waitMessages(t, b, "orders", 2, 2)
	m := msgs[0]
	if m.PhysicalOffset != phys || string(m.Body) != "hello" || m.Tags() != "TagA" || m.Properties["KEYS"] != "k1 k2" ||
		m.UniqueID() != uniq || m.Properties["custom"] != "v" || m.Properties["CLUSTER"] != b.Options().Cluster {
		t.Fatalf("stored %+v", m)
	}
	if m.BornHost.String() != c.LocalAddr().String() {
		t.Fatalf("born host %v, the client is %v", m.BornHost, c.LocalAddr())
	}
	// A message sent without UNIQ_KEY gets one, as RocketMQ's broker gives it.
	if id := msgs[1].UniqueID(); !message.IsUniqueID(id) || msgs[1].Properties["transactionId"] != "" {
		t.Fatalf("generated unique id %q", id)
	}
}

func TestSendMessageV2ShortHeader(t *testing.T) {
	b := startBroker(t)
	newTopic(t, b, "orders", 2)
	c := dialBroker(t, b.Addr(), nil)
	// What the Java client sends by default (SEND_MESSAGE_V2).
	ext := map[string]string{"a": "PG", "b": "orders", "c": "TBW102", "d": "4", "e": "1", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "7", "i": props("TAGS", "T", "UNIQ_KEY", "AA"),
		"j": "0", "k": "false", "m": "false", "n": "broker-a"}
	resp := invoke(t, c, rmq.SendMessageV2, ext, []byte("v2"))
	checkSent(t, b, resp, 1, 0)
	m := waitMessages(t, b, "orders", 1, 1)[0]
	if string(m.Body) != "v2" || m.Flag != 7 || m.Tags() != "T" || m.UniqueID() != "AA" {
		t.Fatalf("stored %+v", m)
	}
}

// batchBody encodes messages as Message.encode does for SEND_BATCH.
func batchBody(msgs ...[2]string) []byte {
	var out []byte
	be := binary.BigEndian
	for i, m := range msgs {
		body, p := []byte(m[0]), []byte(m[1])
		out = be.AppendUint32(out, uint32(20+len(body)+2+len(p)))
		out = be.AppendUint32(out, 0)
		out = be.AppendUint32(out, 0)
		out = be.AppendUint32(out, uint32(i)) // flag
		out = be.AppendUint32(out, uint32(len(body)))
		out = append(out, body...)
		out = be.AppendUint16(out, uint16(len(p)))
		out = append(out, p...)
	}
	return out
}

func TestSendBatch(t *testing.T) {
	b := startBroker(t)
	newTopic(t, b, "orders", 2)
	c := dialBroker(t, b.Addr(), nil)
	invoke(t, c, rmq.SendMessage, sendExt("PG", "orders", 0, 0, ""), []byte("first"))
	// The Go client's batch header: short names, no properties, m=true.
	ext := map[string]string{"a": "PG", "b": "orders", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "", "j": "0", "k": "false", "l": "0", "m": "true", "n": "broker-a"}
	body := batchBody([2]string{"b0", props("TAGS", "A")}, [2]string{"b1", ""}, [2]string{"b2", props("KEYS", "k2", "UNIQ_KEY", "U2")})
	resp := invoke(t, c, rmq.SendBatchMessage, ext, body)
	checkSent(t, b, resp, 0, 1)
	ids := strings.Split(resp.String("msgId"), ",")
	msgs := waitMessages(t, b, "orders", 0, 4)
	if len(ids) != 3 {
		t.Fatalf("msgId %q", resp.String("msgId"))
	}
	for i, m := range msgs[1:] {
		if m.MsgID() != ids[i] || string(m.Body) != fmt.Sprint("b", i) || m.Flag != int32(i) || m.QueueOffset != int64(i+1) {
			t.Fatalf("batch message %d: %+v (ids %v)", i, m, ids)
		}
	}
	if msgs[1].Tags() != "A" || msgs[2].UniqueID() != "" || msgs[3].UniqueID() != "U2" || msgs[3].Properties["KEYS"] != "k2" {
		t.Fatalf("batch properties: %v %v %v", msgs[1].Properties, msgs[2].Properties, msgs[3].Properties)
	}

	// A body that lies about its sizes is refused, whole.
	bad := batchBody([2]string{"b0", ""})
	bad[3]++
	if resp := invoke(t, c, rmq.SendBatchMessage, ext, bad); resp.Code != rmq.MessageIllegal {
		t.Fatalf("bad batch: %d %q", resp.Code, resp.Remark)
	}
}

func zlibBytes(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w, _ := zlib.NewWriterLevel(&buf, 5)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSendCompressed(t *testing.T) {
	b := startBroker(t)
	newTopic(t, b, "big", 1)
	c := dialBroker(t, b.Addr(), nil)
	body := bytes.Repeat([]byte("0123456789abcdef"), 600)
	// The Go client sets bit 0; the Java client also names zlib (3 << 8).
	for i, flag := range []int{0x1, 0x301} {
		resp := invoke(t, c, rmq.SendMessage, sendExt("PG", "big", 0, flag, props("TAGS", "Z")), zlibBytes(t, body))
		checkSent(t, b, resp, 0, int64(i))
	}
	for _, m := range waitMessages(t, b, "big", 0, 2) {
		if !bytes.Equal(m.Body, body) || m.SysFlag&(message.SysFlagCompressed|0x700) != 0 {
			t.Fatalf("stored body of %d bytes, sysflag %#x", len(m.Body), m.SysFlag)
		}
	}
	// LZ4 is not supported; a body that is not zlib is refused.
	if resp := invoke(t, c, rmq.SendMessage, sendExt("PG", "big", 0, 0x101, ""), []byte("x")); resp.Code != rmq.MessageIllegal {
		t.Fatalf("lz4: %d %q", resp.Code, resp.Remark)
	}
	if resp := invoke(t, c, rmq.SendMessage, sendExt("PG", "big", 0, 0x1, ""), []byte("not zlib")); resp.Code != rmq.MessageIllegal {
		t.Fatalf("bad zlib: %d %q", resp.Code, resp.Remark)
	}
}

func TestSendErrors(t *testing.T) {
	b := startBroker(t)
	newTopic(t, b, "orders", 2)
	c := dialBroker(t, b.Addr(), nil)
	ext := sendExt("PG", "orders", 0, 0, "")
	delete(ext, "topic")
	if resp := invoke(t, c, rmq.SendMessage, ext, []byte("x")); resp.Code != rmq.InvalidParameter || !strings.Contains(resp.Remark, "topic") {
		t.Fatalf("missing topic: %d %q", resp.Code, resp.Remark)
	}
	ext = sendExt("PG", "orders", 0, 0, "")
	ext["queueId"] = "x"
	if resp := invoke(t, c, rmq.SendMessage, ext, []byte("x")); resp.Code != rmq.InvalidParameter || !strings.Contains(resp.Remark, "queueId") {
		t.Fatalf("bad queueId: %d %q", resp.Code, resp.Remark)
	}
	if resp := invoke(t, c, rmq.SendMessage, sendExt("PG", "nosuchtopic", 0, 0, ""), []byte("x")); resp.Code != rmq.TopicNotExist {
		t.Fatalf("unknown topic: %d %q", resp.Code, resp.Remark)
	}
	if resp := invoke(t, c, rmq.SendMessage, sendExt("PG", "orders", 0, 0, ""), nil); resp.Code != rmq.MessageIllegal {
		t.Fatalf("empty body: %d %q", resp.Code, resp.Remark)
	}
	if resp := invoke(t, c, rmq.SendMessage, sendExt("PG", message.ScheduleTopic, 0, 0, ""), []byte("x")); resp.Code != rmq.NoPermission {
		t.Fatalf("system topic: %d %q", resp.Code, resp.Remark)
	}
	if resp := invoke(t, c, rmq.SendMessage, sendExt("PG", "orders", 0, 0, props("TIMER_DELAY_SEC", "x")), []byte("x")); resp.Code != rmq.MessageIllegal {
		t.Fatalf("bad timer: %d %q", resp.Code, resp.Remark)
	}
}

// TestSendDelayed: a delay level and RocketMQ 5's timer properties are
// delivered to the real queue when due.
func TestSendDelayed(t *testing.T) {
	b := startBroker(t)
	newTopic(t, b, "later", 1)
	c := dialBroker(t, b.Addr(), nil)
	start := time.Now()
	for _, p := range []string{
		props("DELAY", "1"),
		props("TIMER_DELAY_MS", "800"),
		props("TIMER_DELAY_SEC", "1"),
		props("TIMER_DELIVER_MS", strconv.FormatInt(time.Now().Add(700*time.Millisecond).UnixMilli(), 10)),
	} {
		if resp := invoke(t, c, rmq.SendMessage, sendExt("PG", "later", 0, 0, p), []byte(p)); resp.Code != rmq.Success {
			t.Fatalf("send %q: %d %q", p, resp.Code, resp.Remark)
		}
	}
	if st, _ := b.QueueState("later", 0); st.MaxOffset != 0 {
		t.Fatalf("delayed messages visible at once: %+v", st)
	}
	msgs := waitMessages(t, b, "later", 0, 4)
	if since := time.Since(start); since < 700*time.Millisecond {
		t.Fatalf("delivered after %v", since)
	}
	for _, m := range msgs {
		if m.Topic != "later" || m.Properties[message.PropertyRealTopic] != "" {
			t.Fatalf("delivered %+v", m)
		}
	}
}

// replier answers the broker's requests with SUCCESS and collects them.
type replier chan *rmq.Command

func (r replier) ServeRemoting(_ context.Context, _ *rmq.Conn, req *rmq.Command) *rmq.Command {
	r <- req
	return req.Reply(rmq.Success, "")
}

// TestSendReply: a reply (request-reply) is pushed to the requesting
// client on its connection, then stored in the reply topic.
func TestSendReply(t *testing.T) {
	b := startBroker(t)
	replyTopic := broker.ReplyTopic(b.Options().Cluster) // the broker creates it
	if _, err := b.QueueState(replyTopic, 0); err != nil {
		t.Fatalf("reply topic: %v", err)
	}
	pushed := make(replier, 4)
	requester := dialBroker(t, b.Addr(), pushed)
	hb := []byte(`{"clientID":"10.0.0.7@7","producerDataSet":[{"groupName":"REQ"}]}`)
	if resp := invoke(t, requester, rmq.HeartBeat, nil, hb); resp.Code != rmq.Success {
		t.Fatalf("heartbeat: %d %q", resp.Code, resp.Remark)
	}
	responder := dialBroker(t, b.Addr(), nil)
	p := props("MSG_TYPE", "reply", "CORRELATION_ID", "corr-1", "REPLY_TO_CLIENT", "10.0.0.7@7", "TTL", "3", "UNIQ_KEY", "FF01")
	resp := invoke(t, responder, rmq.SendReplyMessage, sendExt("RESP", replyTopic, 0, 0, p), []byte("the answer"))
	checkSent(t, b, resp, 0, 0)
	var push *rmq.Command
	select {
	case push = <-pushed:
	case <-time.After(5 * time.Second):
		t.Fatal("no reply pushed")
	}
	got := map[string]string{}
	for _, kv := range strings.Split(push.String("properties"), "\x02") {
		if k, v, ok := strings.Cut(kv, "\x01"); ok {
			got[k] = v
		}
	}
	if push.Code != rmq.PushReplyMessageToClient || string(push.Body) != "the answer" || got["CORRELATION_ID"] != "corr-1" ||
		push.String("topic") != replyTopic || push.String("storeHost") != b.Addr() || push.String("bornHost") != responder.LocalAddr().String() {
		t.Fatalf("pushed %d %v %q", push.Code, push.Ext, push.Body)
	}
	if m := waitMessages(t, b, replyTopic, 0, 1)[0]; string(m.Body) != "the answer" {
		t.Fatalf("stored reply %+v", m)
	}
	// A requester that has not heartbeated yet is found by the request it
	// sent (its REPLY_TO_CLIENT).
	newTopic(t, b, "requests", 1)
	early := make(replier, 4)
	requester2 := dialBroker(t, b.Addr(), early)
	rp := props("CORRELATION_ID", "corr-3", "REPLY_TO_CLIENT", "10.0.0.9@9", "TTL", "3")
	if resp := invoke(t, requester2, rmq.SendMessage, sendExt("REQ", "requests", 0, 0, rp), []byte("ping")); resp.Code != rmq.Success {
		t.Fatalf("request: %d %q", resp.Code, resp.Remark)
	}
	p = props("MSG_TYPE", "reply", "CORRELATION_ID", "corr-3", "REPLY_TO_CLIENT", "10.0.0.9@9")
	if resp := invoke(t, responder, rmq.SendReplyMessage, sendExt("RESP", replyTopic, 0, 0, p), []byte("pong")); resp.Code != rmq.Success {
		t.Fatalf("reply before a heartbeat: %d %q", resp.Code, resp.Remark)
	}
	select {
	case push = <-early:
		if string(push.Body) != "pong" {
			t.Fatalf("pushed %q", push.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reply pushed to the requester without a heartbeat")
	}

	// No such requester: SYSTEM_ERROR, as Java.
	p = props("MSG_TYPE", "reply", "CORRELATION_ID", "corr-2", "REPLY_TO_CLIENT", "10.0.0.8@8")
	if resp := invoke(t, responder, rmq.SendReplyMessageV2, map[string]string{"a": "RESP", "b": replyTopic, "e": "0", "i": p}, []byte("x")); resp.Code != rmq.SystemError {
		t.Fatalf("reply to nobody: %d %q", resp.Code, resp.Remark)
	}
}
