package grpcv5_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/message"
)

func TestSendNormal(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "orders", topic.TypeNormal)
	c := dial(t, b)
	ctx := asClient(t, newClientID())

	m := newMessage("orders", "hello")
	tag := "paid"
	m.SystemProperties.Tag = &tag
	m.SystemProperties.Keys = []string{"order-42", "customer-7"}
	m.UserProperties = map[string]string{"region": "eu", "empty": ""}
	e := mustSend(t, c, ctx, m)
	if e.GetTransactionId() != "" {
		t.Errorf("a normal message got transaction id %q", e.GetTransactionId())
	}

	got := findStored(t, b, "orders", m.SystemProperties.MessageId)
	if string(got.Body) != "hello" || got.Tags() != "paid" || got.Properties[message.PropertyKeys] != "order-42 customer-7" ||
		got.Properties["region"] != "eu" || got.QueueOffset != e.GetOffset() {
		t.Fatalf("stored %+v (props %v), want body, tag, keys, property and offset %d", got, got.Properties, e.GetOffset())
	}
	if got.Properties["__BORNHOST"] != "testhost" || got.BornTimestamp != m.SystemProperties.BornTimestamp.AsTime().UnixMilli() {
		t.Errorf("born host %q, born %d; want the client's", got.Properties["__BORNHOST"], got.BornTimestamp)
	}
	// A key finds it too.
	waitFor(t, "the message indexed by its key", func() bool {
		recs, err := b.QueryMessage("orders", "customer-7", 0, 0, 4)
		return err == nil && len(recs) == 1
	})

	// A GZIP body is stored inflated.
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write([]byte("compressed"))
	_ = zw.Close()
	gz := newMessage("orders", "")
	gz.Body, gz.SystemProperties.BodyEncoding = zb.Bytes(), v2.Encoding_GZIP
	mustSend(t, c, ctx, gz)
	if got := findStored(t, b, "orders", gz.SystemProperties.MessageId); string(got.Body) != "compressed" {
		t.Errorf("gzip body stored as %q", got.Body)
	}

	// Round robin over the write queues.
	queues := map[int32]bool{}
	for i := 0; i < 8; i++ {
		m := newMessage("orders", "rr")
		mustSend(t, c, ctx, m)
		queues[findStored(t, b, "orders", m.SystemProperties.MessageId).QueueID] = true
	}
	if len(queues) != 4 {
		t.Errorf("8 sends used queues %v, want all 4", queues)
	}
}

func TestSendFIFO(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "fifo", topic.TypeFIFO)
	c := dial(t, b)
	ctx := asClient(t, newClientID())
	queueOf := map[string]int32{}
	for i := 0; i < 12; i++ {
		group := "group-" + strconv.Itoa(i%3)
		m := newMessage("fifo", "step "+strconv.Itoa(i))
		m.SystemProperties.MessageGroup = &group
		m.SystemProperties.MessageType = v2.MessageType_FIFO
		e := mustSend(t, c, ctx, m)
		got := findStored(t, b, "fifo", m.SystemProperties.MessageId)
		if got.Properties[message.PropertyShardingKey] != group {
			t.Fatalf("sharding key %q, want %q", got.Properties[message.PropertyShardingKey], group)
		}
		if q, ok := queueOf[group]; ok && q != got.QueueID {
			t.Fatalf("group %s went to queues %d and %d", group, q, got.QueueID)
		}
		queueOf[group] = got.QueueID
		if got.QueueOffset != e.GetOffset() {
			t.Fatalf("offset %d answered, %d stored", e.GetOffset(), got.QueueOffset)
		}
	}
	// A normal message is refused by a FIFO topic.
	resp := send(t, c, ctx, newMessage("fifo", "plain"))
	wantCode(t, "normal message to a FIFO topic", resp.GetStatus(), v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
	wantCode(t, "its entry", resp.GetEntries()[0].GetStatus(), v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
}

func TestSendDelay(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "later", topic.TypeDelay)
	c := dial(t, b)
	ctx := asClient(t, newClientID())
	m := newMessage("later", "wake up")
	due := time.Now().Add(500 * time.Millisecond)
	m.SystemProperties.DeliveryTimestamp = timestamppb.New(due)
	m.SystemProperties.MessageType = v2.MessageType_DELAY
	mustSend(t, c, ctx, m)
	// Parked in the timer topic until due, then in the topic, with its id.
	got := findStored(t, b, "later", m.SystemProperties.MessageId)
	if string(got.Body) != "wake up" {
		t.Fatalf("body %q", got.Body)
	}
	if out, _ := strconv.ParseInt(got.Properties[message.PropertyTimerOutMS], 10, 64); out != due.UnixMilli() {
		t.Errorf("%s = %d, want the delivery timestamp %d", message.PropertyTimerOutMS, out, due.UnixMilli())
	}
	if got.StoreTimestamp < due.UnixMilli() {
		t.Errorf("delivered at %d, before its delivery timestamp %d", got.StoreTimestamp, due.UnixMilli())
	}
	// Too far in the future.
	far := newMessage("later", "never")
	far.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(500 * 24 * time.Hour))
	wantCode(t, "delivery beyond the maximum delay", send(t, c, ctx, far).GetStatus(), v2.Code_ILLEGAL_DELIVERY_TIME)
	// A delayed message is refused by a NORMAL topic.
	createTopic(t, b, "plain", topic.TypeNormal)
	d := newMessage("plain", "x")
	d.SystemProperties.DeliveryTimestamp = timestamppb.New(due)
	wantCode(t, "delay to a NORMAL topic", send(t, c, ctx, d).GetStatus(), v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
}

func TestSendNamespace(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "shop%orders", "")
	c := dial(t, b)
	ctx := asClient(t, newClientID())
	m := newMessage("orders", "in a namespace")
	m.Topic.ResourceNamespace = "shop"
	mustSend(t, c, ctx, m)
	findStored(t, b, "shop%orders", m.SystemProperties.MessageId)
	// Already folded: the same topic.
	m2 := newMessage("shop%orders", "folded")
	m2.Topic.ResourceNamespace = "shop"
	mustSend(t, c, ctx, m2)
	findStored(t, b, "shop%orders", m2.SystemProperties.MessageId)
	// Without the namespace the topic does not exist.
	wantCode(t, "no namespace", send(t, c, ctx, newMessage("orders", "x")).GetStatus(), v2.Code_TOPIC_NOT_FOUND)
	bad := newMessage("orders", "x")
	bad.Topic.ResourceNamespace = "sh%op"
	wantCode(t, "illegal namespace", send(t, c, ctx, bad).GetStatus(), v2.Code_ILLEGAL_TOPIC)
}

func TestSendBadInput(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "orders", "")
	createTopic(t, b, "normal", topic.TypeNormal)
	c := dial(t, b)
	ctx := asClient(t, newClientID())
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name   string
		mutate func(m *v2.Message)
		want   v2.Code
	}{
		{"unknown topic", func(m *v2.Message) { m.Topic.Name = "nowhere" }, v2.Code_TOPIC_NOT_FOUND},
		{"illegal topic", func(m *v2.Message) { m.Topic.Name = "no spaces" }, v2.Code_ILLEGAL_TOPIC},
		{"system topic", func(m *v2.Message) { m.Topic.Name = message.TransHalfTopic }, v2.Code_ILLEGAL_TOPIC},
		{"empty body", func(m *v2.Message) { m.Body = nil }, v2.Code_MESSAGE_BODY_EMPTY},
		{"oversize body", func(m *v2.Message) { m.Body = make([]byte, 1<<20+1) }, v2.Code_MESSAGE_BODY_TOO_LARGE},
		{"tag with |", func(m *v2.Message) { m.SystemProperties.Tag = str("a|b") }, v2.Code_ILLEGAL_MESSAGE_TAG},
		{"blank tag", func(m *v2.Message) { m.SystemProperties.Tag = str("  ") }, v2.Code_ILLEGAL_MESSAGE_TAG},
		{"tag with control", func(m *v2.Message) { m.SystemProperties.Tag = str("a\x01") }, v2.Code_ILLEGAL_MESSAGE_TAG},
		{"blank key", func(m *v2.Message) { m.SystemProperties.Keys = []string{"ok", " "} }, v2.Code_ILLEGAL_MESSAGE_KEY},
		{"key with control", func(m *v2.Message) { m.SystemProperties.Keys = []string{"a\x02b"} }, v2.Code_ILLEGAL_MESSAGE_KEY},
		{"long group", func(m *v2.Message) { m.SystemProperties.MessageGroup = str(strings.Repeat("g", 64)) }, v2.Code_ILLEGAL_MESSAGE_GROUP},
		{"blank group", func(m *v2.Message) { m.SystemProperties.MessageGroup = str(" ") }, v2.Code_ILLEGAL_MESSAGE_GROUP},
		{"group with control", func(m *v2.Message) { m.SystemProperties.MessageGroup = str("g\n") }, v2.Code_ILLEGAL_MESSAGE_GROUP},
		{"reserved property", func(m *v2.Message) { m.UserProperties = map[string]string{"UNIQ_KEY": "x"} }, v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"property with control", func(m *v2.Message) { m.UserProperties = map[string]string{"k": "v\x01"} }, v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"too many properties", func(m *v2.Message) {
			m.UserProperties = map[string]string{}
			for i := 0; i < 129; i++ {
				m.UserProperties["p"+strconv.Itoa(i)] = "v"
			}
		}, v2.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		{"properties too large", func(m *v2.Message) { m.UserProperties = map[string]string{"big": strings.Repeat("v", 17<<10)} }, v2.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		{"empty message id", func(m *v2.Message) { m.SystemProperties.MessageId = "" }, v2.Code_ILLEGAL_MESSAGE_ID},
		{"transaction with group", func(m *v2.Message) {
			m.SystemProperties.MessageType = v2.MessageType_TRANSACTION
			m.SystemProperties.MessageGroup = str("g")
		}, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"transaction to a NORMAL topic", func(m *v2.Message) {
			m.Topic.Name = "normal"
			m.SystemProperties.MessageType = v2.MessageType_TRANSACTION
		}, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"FIFO to a NORMAL topic", func(m *v2.Message) {
			m.Topic.Name = "normal"
			m.SystemProperties.MessageGroup = str("g")
		}, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"lite topic", func(m *v2.Message) { m.SystemProperties.LiteTopic = str("lite") }, v2.Code_NOT_IMPLEMENTED},
		{"gzip that is not", func(m *v2.Message) { m.SystemProperties.BodyEncoding = v2.Encoding_GZIP }, v2.Code_MESSAGE_CORRUPTED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMessage("orders", "body")
			tc.mutate(m)
			resp := send(t, c, ctx, m)
			wantCode(t, tc.name, resp.GetStatus(), tc.want)
			if len(resp.GetEntries()) != 1 {
				t.Fatalf("%d entries", len(resp.GetEntries()))
			}
			wantCode(t, tc.name+" (entry)", resp.Entries[0].GetStatus(), tc.want)
		})
	}
	resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "no message", resp.GetStatus(), v2.Code_MESSAGE_CORRUPTED)
	// Nothing of the above was stored.
	if st, err := b.QueueState("orders", 0); err != nil || st.MaxOffset != 0 {
		t.Errorf("orders queue 0 after bad sends: %+v, %v", st, err)
	}
}

func TestRecallDelayed(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "later", topic.TypeDelay)
	createTopic(t, b, "plain", topic.TypeNormal)
	c := dial(t, b)
	ctx := asClient(t, newClientID())
	m := newMessage("later", "maybe")
	m.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(time.Hour))
	e := mustSend(t, c, ctx, m)
	if e.GetRecallHandle() == "" {
		t.Fatal("a delayed message got no recall handle")
	}
	recall := func(topicName, handle string) *v2.RecallMessageResponse {
		t.Helper()
		resp, err := c.RecallMessage(ctx, &v2.RecallMessageRequest{Topic: &v2.Resource{Name: topicName}, RecallHandle: handle})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	wantCode(t, "recall with another topic", recall("plain", e.GetRecallHandle()).GetStatus(), v2.Code_BAD_REQUEST)
	wantCode(t, "recall with a bad handle", recall("later", "not-a-handle").GetStatus(), v2.Code_BAD_REQUEST)
	resp := recall("later", e.GetRecallHandle())
	wantCode(t, "recall", resp.GetStatus(), v2.Code_OK)
	if resp.GetMessageId() != m.SystemProperties.MessageId {
		t.Errorf("recalled %q, want %q", resp.GetMessageId(), m.SystemProperties.MessageId)
	}
	wantCode(t, "recall again (idempotent)", recall("later", e.GetRecallHandle()).GetStatus(), v2.Code_OK)
	// A message due at once is not parked: no handle.
	now := newMessage("later", "now")
	now.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(-time.Second))
	if h := mustSend(t, c, ctx, now).GetRecallHandle(); h != "" {
		t.Errorf("a message due at once got recall handle %q", h)
	}
	findStored(t, b, "later", now.SystemProperties.MessageId)
	h := base64.URLEncoding.EncodeToString([]byte("v1 later broker-a 1 " + now.SystemProperties.MessageId))
	wantCode(t, "recall of a delivered message", recall("later", h).GetStatus(), v2.Code_NOT_FOUND)
	h = base64.URLEncoding.EncodeToString([]byte("v1 later broker-b 1 " + now.SystemProperties.MessageId))
	wantCode(t, "recall at the wrong broker", recall("later", h).GetStatus(), v2.Code_BAD_REQUEST)
}

// A client retrying a send reuses the message id: the broker stores it
// once and answers the retry as the first send.
func TestSendRetryStoredOnce(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "orders", "")
	c := dial(t, b)
	ctx := asClient(t, newClientID())
	for _, tc := range []struct {
		name   string
		mutate func(*v2.Message)
	}{
		{"normal", func(*v2.Message) {}},
		{"delay", func(m *v2.Message) {
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(time.Hour))
		}},
		{"transaction", func(m *v2.Message) { m.SystemProperties.MessageType = v2.MessageType_TRANSACTION }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMessage("orders", "once")
			tc.mutate(m)
			first := mustSend(t, c, ctx, m)
			again := mustSend(t, c, ctx, m)
			if again.GetOffset() != first.GetOffset() || again.GetTransactionId() != first.GetTransactionId() ||
				again.GetRecallHandle() != first.GetRecallHandle() {
				t.Fatalf("retry answered %v, first send %v", again, first)
			}
		})
	}
	var stored int64
	for q := int32(0); q < 4; q++ {
		st, err := b.QueueState("orders", q)
		if err != nil {
			t.Fatal(err)
		}
		stored += st.MaxOffset
	}
	if stored != 1 { // the delayed and the half message are parked elsewhere
		t.Errorf("the topic holds %d messages after one normal send and its retry", stored)
	}
}
