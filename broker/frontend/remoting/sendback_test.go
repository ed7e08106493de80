package remoting_test

import (
	"strconv"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

// sendBackExt is CONSUMER_SEND_MSG_BACK's header as the Go client writes it.
func sendBackExt(group string, m *message.Ext, delayLevel, maxTimes int) map[string]string {
	return map[string]string{"group": group, "offset": strconv.FormatInt(m.PhysicalOffset, 10),
		"delayLevel": strconv.Itoa(delayLevel), "originMsgId": m.UniqueID(), "originTopic": m.Topic,
		"unitMode": "false", "maxReconsumeTimes": strconv.Itoa(maxTimes), "bname": "broker-a"}
}

func TestSendBack(t *testing.T) {
	b := startBroker(t)
	newTopic(t, b, "work", 1)
	c := dialBroker(t, b.Addr(), nil)
	for i := range 3 {
		resp := invoke(t, c, rmq.SendMessage, sendExt("PG", "work", 0, 0, props("TAGS", "job", "UNIQ_KEY", "DDDD000000000000000000000000000"+strconv.Itoa(i))), []byte("job"+strconv.Itoa(i)))
		checkSent(t, b, resp, 0, int64(i))
	}
	msgs := waitMessages(t, b, "work", 0, 3)

	// Level 1 (1 s): into %RETRY%CG, reconsumed once, remembering its topic.
	if resp := invoke(t, c, rmq.ConsumerSendMsgBack, sendBackExt("CG", msgs[0], 1, 16), nil); resp.Code != rmq.Success {
		t.Fatalf("send back: %d %q", resp.Code, resp.Remark)
	}
	r := waitMessages(t, b, "%RETRY%CG", 0, 1)[0]
	if string(r.Body) != "job0" || r.ReconsumeTimes != 1 || r.Properties[message.PropertyRetryTopic] != "work" ||
		r.Properties[message.PropertyOriginMessageID] != msgs[0].UniqueID() || r.UniqueID() != msgs[0].UniqueID() {
		t.Fatalf("retry copy %+v", r)
	}
	// delayLevel -1 (an orderly consumer gave up): straight to %DLQ%CG.
	if resp := invoke(t, c, rmq.ConsumerSendMsgBack, sendBackExt("CG", msgs[1], -1, 16), nil); resp.Code != rmq.Success {
		t.Fatalf("send back to DLQ: %d %q", resp.Code, resp.Remark)
	}
	// maxReconsumeTimes 0: no retry at all. The retry copy, sent back with
	// maxReconsumeTimes 1, has been reconsumed once: dead letter too.
	if resp := invoke(t, c, rmq.ConsumerSendMsgBack, sendBackExt("CG", msgs[2], 0, 0), nil); resp.Code != rmq.Success {
		t.Fatalf("send back, max 0: %d %q", resp.Code, resp.Remark)
	}
	if resp := invoke(t, c, rmq.ConsumerSendMsgBack, sendBackExt("CG", r, 0, 1), nil); resp.Code != rmq.Success {
		t.Fatalf("send back retry copy: %d %q", resp.Code, resp.Remark)
	}
	dlq := waitMessages(t, b, "%DLQ%CG", 0, 3)
	for i, want := range []string{"job1", "job2", "job0"} {
		if string(dlq[i].Body) != want || dlq[i].Properties[message.PropertyDLQOriginTopic] != "work" {
			t.Fatalf("dead letter %d: %+v", i, dlq[i])
		}
	}
	if st, _ := b.QueueState("%RETRY%CG", 0); st.MaxOffset != 1 {
		t.Fatalf("retry queue %+v", st)
	}

	// No message at the offset, or no group: an error, so the client sends
	// the retry itself.
	bad := sendBackExt("CG", msgs[0], 0, 16)
	bad["offset"] = "123456789"
	if resp := invoke(t, c, rmq.ConsumerSendMsgBack, bad, nil); resp.Code == rmq.Success {
		t.Fatal("send back of no message succeeded")
	}
	delete(bad, "group")
	if resp := invoke(t, c, rmq.ConsumerSendMsgBack, bad, nil); resp.Code != rmq.InvalidParameter {
		t.Fatalf("no group: %d %q", resp.Code, resp.Remark)
	}
}

// TestRetrySentAsNormal: the Go client's fallback when a send-back fails
// is a SEND to %RETRY%<group> with reconsumeTimes + 1 and DELAY; once past
// maxReconsumeTimes the broker puts it in the dead-letter topic.
func TestRetrySentAsNormal(t *testing.T) {
	b := startBroker(t)
	c := dialBroker(t, b.Addr(), nil)
	invoke(t, c, rmq.HeartBeat, nil, goHeartbeat("10.0.0.1@1", "PG", "CG", "work")) // creates %RETRY%CG
	// The properties of the consumed message, its checksum trailer included
	// (RocketMQ's clients see it as a property).
	ext := sendExt("CLIENT_INNER_PRODUCER", "%RETRY%CG", 0, 0, props("RETRY_TOPIC", "work", "ORIGIN_MESSAGE_ID", "X", "DELAY", "1",
		"UNIQ_KEY", "E1", "MIN_OFFSET", "0", "MAX_OFFSET", "1", "__CRC32#", "1234567890"))
	ext["reconsumeTimes"], ext["maxReconsumeTimes"] = "3", "2"
	if resp := invoke(t, c, rmq.SendMessage, ext, []byte("dead")); resp.Code != rmq.Success {
		t.Fatalf("retry past max: %d %q", resp.Code, resp.Remark)
	}
	m := waitMessages(t, b, "%DLQ%CG", 0, 1)[0]
	if string(m.Body) != "dead" || m.ReconsumeTimes != 3 || m.Properties[message.PropertyDLQOriginTopic] != "work" || m.Properties["DELAY"] != "" {
		t.Fatalf("dead letter %+v", m)
	}
	// Without maxReconsumeTimes the broker's setting (16) applies.
	delete(ext, "maxReconsumeTimes")
	ext["reconsumeTimes"] = "17"
	if resp := invoke(t, c, rmq.SendMessage, ext, []byte("dead too")); resp.Code != rmq.Success {
		t.Fatalf("retry past the broker's max: %d %q", resp.Code, resp.Remark)
	}
	if m := waitMessages(t, b, "%DLQ%CG", 0, 2)[1]; string(m.Body) != "dead too" {
		t.Fatalf("dead letter %+v", m)
	}
	ext["reconsumeTimes"], ext["maxReconsumeTimes"] = "2", "2"
	if resp := invoke(t, c, rmq.SendMessage, ext, []byte("retry")); resp.Code != rmq.Success {
		t.Fatalf("retry: %d %q", resp.Code, resp.Remark)
	}
	if m := waitMessages(t, b, "%RETRY%CG", 0, 1)[0]; string(m.Body) != "retry" || m.ReconsumeTimes != 2 {
		t.Fatalf("retry %+v", m)
	}
}

// TestRetrySentAsNormalByOrderlyGroup: a retry that a client of an
// orderly group (one holding queue locks) sends itself goes to the
// dead-letter topic at once, as RocketMQ's broker does it: older Java
// orderly consumers send it when they give up, without raising its count.
func TestRetrySentAsNormalByOrderlyGroup(t *testing.T) {
	b := startBroker(t)
	newTopic(t, b, "work", 1)
	c := dialBroker(t, b.Addr(), nil)
	invoke(t, c, rmq.HeartBeat, nil, goHeartbeat("10.0.0.1@1", "PG", "OG", "work"))
	if _, err := b.LockQueues("OG", "10.0.0.1@1", []broker.Queue{{Topic: "work", ID: 0}}); err != nil {
		t.Fatal(err)
	}
	ext := sendExt("CLIENT_INNER_PRODUCER", "%RETRY%OG", 0, 0, props("RETRY_TOPIC", "work", "DELAY", "5", "UNIQ_KEY", "F1"))
	ext["reconsumeTimes"], ext["maxReconsumeTimes"] = "2", "2"
	if resp := invoke(t, c, rmq.SendMessage, ext, []byte("gave up")); resp.Code != rmq.Success {
		t.Fatalf("orderly give-up: %d %q", resp.Code, resp.Remark)
	}
	if m := waitMessages(t, b, "%DLQ%OG", 0, 1)[0]; string(m.Body) != "gave up" {
		t.Fatalf("dead letter %+v", m)
	}
}
