package grpcv5

import (
	"bytes"
	"compress/zlib"
	"crypto/md5"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/message"
)

// record encodes a stored message with the given properties and body.
func record(t *testing.T, props map[string]string, body []byte, sysFlag int32) []byte {
	t.Helper()
	e := &message.Ext{
		QueueID: 3, QueueOffset: 41, PhysicalOffset: 1234, SysFlag: sysFlag,
		BornTimestamp: 1_700_000_000_123, BornHost: netip.MustParseAddrPort("10.0.0.7:5555"),
		StoreTimestamp: 1_700_000_000_456, StoreHost: netip.MustParseAddrPort("10.0.0.9:10911"),
	}
	e.Topic = "orders"
	e.Body = body
	e.Properties = props
	rec, err := message.Encode(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestPoppedMessageFields(t *testing.T) {
	body := []byte("hello v5")
	props := map[string]string{
		message.PropertyUniqueKey:     "01A1B2C3D4E5F6000100000000000000AB",
		message.PropertyTags:          "paid",
		message.PropertyKeys:          "order-1 order-2",
		message.PropertyShardingKey:   "customer-9",
		propertyBornHost:              "producer-host",
		propertyTraceContext:          "00-trace",
		message.PropertyTransactionID: "tx",
		"color":                       "blue",
		"size":                        "L",
	}
	visibleAt := time.Now().Add(time.Minute)
	m, err := poppedMessage(&v2.Resource{ResourceNamespace: "ns", Name: "orders"}, broker.PoppedMessage{
		Record: record(t, props, body, 0), QueueID: 3, QueueOffset: 41, Attempt: 2, Handle: "h-1", VisibleAt: visibleAt,
	})
	if err != nil {
		t.Fatal(err)
	}
	sp := m.GetSystemProperties()
	sum := md5.Sum(body)
	checks := []struct {
		what      string
		got, want any
	}{
		{"topic", m.GetTopic().GetName() + "/" + m.GetTopic().GetResourceNamespace(), "orders/ns"},
		{"body", string(m.GetBody()), string(body)},
		{"message id", sp.GetMessageId(), props[message.PropertyUniqueKey]},
		{"tag", sp.GetTag(), "paid"},
		{"keys", strings.Join(sp.GetKeys(), ","), "order-1,order-2"},
		{"group", sp.GetMessageGroup(), "customer-9"},
		{"type", sp.GetMessageType(), v2.MessageType_FIFO},
		{"digest type", sp.GetBodyDigest().GetType(), v2.DigestType_MD5},
		{"digest", sp.GetBodyDigest().GetChecksum(), strings.ToUpper(hex.EncodeToString(sum[:]))},
		{"encoding", sp.GetBodyEncoding(), v2.Encoding_IDENTITY},
		{"born host", sp.GetBornHost(), "producer-host"},
		{"born time", sp.GetBornTimestamp().AsTime().UnixMilli(), int64(1_700_000_000_123)},
		{"store time", sp.GetStoreTimestamp().AsTime().UnixMilli(), int64(1_700_000_000_456)},
		{"store host", sp.GetStoreHost(), "10.0.0.9:10911"},
		{"handle", sp.GetReceiptHandle(), "h-1"},
		{"queue", sp.GetQueueId(), int32(3)},
		{"offset", sp.GetQueueOffset(), int64(41)},
		{"attempt", sp.GetDeliveryAttempt(), int32(2)},
		{"trace", sp.GetTraceContext(), "00-trace"},
		{"no delivery time", sp.DeliveryTimestamp == nil, true},
		{"no dlq", sp.DeadLetterQueue == nil, true},
		{"user properties", len(m.GetUserProperties()), 2},
		{"color", m.GetUserProperties()["color"], "blue"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if d := sp.GetInvisibleDuration().AsDuration(); d <= 0 || d > time.Minute {
		t.Errorf("invisible duration %v, want (0, 1m]", d)
	}
}

func TestStoredMessageVariants(t *testing.T) {
	t.Run("no unique key: offset message id, born host address", func(t *testing.T) {
		e, err := message.Decode(record(t, map[string]string{"a": "b"}, []byte("x"), 0))
		if err != nil {
			t.Fatal(err)
		}
		m, err := storedMessage(&v2.Resource{Name: "orders"}, e)
		if err != nil {
			t.Fatal(err)
		}
		sp := m.GetSystemProperties()
		if sp.GetMessageId() != e.MsgID() || sp.GetBornHost() != "10.0.0.7" || sp.Tag != nil || len(sp.GetKeys()) != 0 {
			t.Fatalf("id %q born host %q tag %v keys %v", sp.GetMessageId(), sp.GetBornHost(), sp.Tag, sp.GetKeys())
		}
		if sp.GetMessageType() != v2.MessageType_NORMAL || sp.GetDeliveryAttempt() != 1 {
			t.Fatalf("type %v attempt %d", sp.GetMessageType(), sp.GetDeliveryAttempt())
		}
	})
	t.Run("delayed", func(t *testing.T) {
		e, _ := message.Decode(record(t, map[string]string{message.PropertyTimerDeliverMS: "1700000100000"}, []byte("x"), 0))
		m, err := storedMessage(&v2.Resource{Name: "orders"}, e)
		if err != nil {
			t.Fatal(err)
		}
		sp := m.GetSystemProperties()
		if sp.GetMessageType() != v2.MessageType_DELAY || sp.GetDeliveryTimestamp().AsTime().UnixMilli() != 1_700_000_100_000 {
			t.Fatalf("type %v delivery %v", sp.GetMessageType(), sp.GetDeliveryTimestamp())
		}
		if len(m.GetUserProperties()) != 0 {
			t.Fatalf("user properties %v", m.GetUserProperties())
		}
	})
	t.Run("transactional", func(t *testing.T) {
		e, _ := message.Decode(record(t, map[string]string{message.PropertyTransactionPrepared: "true"}, []byte("x"), 0))
		m, _ := storedMessage(&v2.Resource{Name: "orders"}, e)
		if got := m.GetSystemProperties().GetMessageType(); got != v2.MessageType_TRANSACTION {
			t.Fatalf("type %v", got)
		}
	})
	t.Run("dead letter", func(t *testing.T) {
		e, _ := message.Decode(record(t, map[string]string{
			message.PropertyDLQOriginTopic: "orders", message.PropertyDLQOriginMessageID: "ID1"}, []byte("x"), 0))
		m, _ := storedMessage(&v2.Resource{Name: "%DLQ%g"}, e)
		dlq := m.GetSystemProperties().GetDeadLetterQueue()
		if dlq.GetTopic() != "orders" || dlq.GetMessageId() != "ID1" || len(m.GetUserProperties()) != 0 {
			t.Fatalf("dlq %v user %v", dlq, m.GetUserProperties())
		}
		// With the producer's id kept, that is the id a v5 client knew.
		e, _ = message.Decode(record(t, map[string]string{message.PropertyUniqueKey: "UNIQ1",
			message.PropertyDLQOriginTopic: "orders", message.PropertyDLQOriginMessageID: "OFFSETID"}, []byte("x"), 0))
		m, _ = storedMessage(&v2.Resource{Name: "%DLQ%g"}, e)
		if dlq := m.GetSystemProperties().GetDeadLetterQueue(); dlq.GetMessageId() != "UNIQ1" || m.GetSystemProperties().GetMessageId() != "UNIQ1" {
			t.Fatalf("dlq %v id %s", dlq, m.GetSystemProperties().GetMessageId())
		}
	})
	t.Run("compressed body is inflated", func(t *testing.T) {
		var zb bytes.Buffer
		zw := zlib.NewWriter(&zb)
		plain := bytes.Repeat([]byte("abc"), 1000)
		_, _ = zw.Write(plain)
		_ = zw.Close()
		e, _ := message.Decode(record(t, nil, zb.Bytes(), message.SysFlagCompressed))
		m, err := storedMessage(&v2.Resource{Name: "orders"}, e)
		if err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum(plain)
		if !bytes.Equal(m.GetBody(), plain) || m.GetSystemProperties().GetBodyDigest().GetChecksum() != strings.ToUpper(hex.EncodeToString(sum[:])) {
			t.Fatalf("body of %d bytes, digest %s", len(m.GetBody()), m.GetSystemProperties().GetBodyDigest().GetChecksum())
		}
		e.Body = []byte("not zlib")
		if _, err := storedMessage(&v2.Resource{Name: "orders"}, e); err == nil {
			t.Fatal("a compressed flag over a non-zlib body converted")
		}
	})
	t.Run("unreadable record", func(t *testing.T) {
		if _, err := poppedMessage(&v2.Resource{Name: "orders"}, broker.PoppedMessage{Record: []byte("short")}); err == nil {
			t.Fatal("a garbage record converted")
		}
	})
}
