package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func TestExtFromRecord(t *testing.T) {
	store := netip.MustParseAddrPort("10.1.2.3:10911")
	born := netip.MustParseAddrPort("10.9.9.9:0")
	tests := []struct {
		name  string
		props map[string]string
		want  func(*MessageExt) string
	}{
		{"plain", nil, func(m *MessageExt) string {
			if m.Tag != "" || m.Keys != nil || m.Properties != nil {
				return "unexpected fields"
			}
			// Without UNIQ_KEY the msg id is the offset id, as in
			// RocketMQ's clients.
			if m.MsgID != m.OffsetMsgID || m.uniqKey() != "" {
				return "msg id " + m.MsgID + ", want the offset id " + m.OffsetMsgID
			}
			return ""
		}},
		{"fields from properties", map[string]string{
			message.PropertyTags: "paid", message.PropertyKeys: "k1 k2", message.PropertyUniqueKey: "U1",
			message.PropertyShardingKey: "order-7", "color": "red", message.PropertyReconsumeTime: "2",
		}, func(m *MessageExt) string {
			switch {
			case m.Tag != "paid":
				return "tag " + m.Tag
			case !reflect.DeepEqual(m.Keys, []string{"k1", "k2"}):
				return "keys"
			case m.MsgID != "U1" || m.uniqKey() != "U1" || m.ShardingKey != "order-7":
				return "msg id (UNIQ_KEY) or sharding key"
			case !reflect.DeepEqual(m.Properties, map[string]string{"color": "red", message.PropertyReconsumeTime: "2"}):
				return "properties"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &message.Ext{
				Message:        message.Message{Topic: "orders", Body: []byte("hello"), Properties: tt.props},
				QueueID:        3,
				QueueOffset:    42,
				PhysicalOffset: 123456,
				BornTimestamp:  1_700_000_000_123,
				BornHost:       born,
				StoreTimestamp: 1_700_000_000_456,
				StoreHost:      store,
				ReconsumeTimes: 1,
			}
			rec := mustEncode(t, e)
			m, err := extFromRecord(rec, "broker-a")
			if err != nil {
				t.Fatal(err)
			}
			if m.Topic != "orders" || string(m.Body) != "hello" || m.BrokerName != "broker-a" || m.QueueID != 3 ||
				m.QueueOffset != 42 || m.CommitLogOffset != 123456 || m.ReconsumeTimes != 1 {
				t.Fatalf("basic fields wrong: %+v", m)
			}
			if !m.BornTimestamp.Equal(time.UnixMilli(1_700_000_000_123)) || !m.StoreTimestamp.Equal(time.UnixMilli(1_700_000_000_456)) {
				t.Fatalf("timestamps wrong: %v %v", m.BornTimestamp, m.StoreTimestamp)
			}
			if m.StoreHost != "10.1.2.3:10911" || m.BornHost != "10.9.9.9:0" {
				t.Fatalf("hosts wrong: %s %s", m.StoreHost, m.BornHost)
			}
			if m.OffsetMsgID != message.OffsetMsgID(store, 123456) {
				t.Fatalf("offset msg id %s", m.OffsetMsgID)
			}
			if m.StoreSize != int32(len(rec)) {
				t.Fatalf("store size %d, want %d", m.StoreSize, len(rec))
			}
			if q := m.Queue(); q != (MessageQueue{Topic: "orders", BrokerName: "broker-a", QueueID: 3}) {
				t.Fatalf("queue %v", q)
			}
			if msg := tt.want(m); msg != "" {
				t.Fatal(msg)
			}
		})
	}
	if _, err := extFromRecord([]byte{1, 2, 3}, "b"); err == nil {
		t.Fatal("garbage decoded")
	}
}

func TestWireProperties(t *testing.T) {
	m := &Message{Topic: "t", Tag: "a", Keys: []string{"k1", "k2"},
		Properties: map[string]string{"x": "1", message.PropertyTags: "stale", message.PropertyShardingKey: "old"}}
	got := wireProperties(m, "sk", "UID")
	want := map[string]string{"x": "1", message.PropertyTags: "a", message.PropertyKeys: "k1 k2",
		message.PropertyShardingKey: "sk", message.PropertyUniqueKey: "UID"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if m.Properties[message.PropertyTags] != "stale" {
		t.Fatal("the caller's map was modified")
	}
	got = wireProperties(&Message{Properties: map[string]string{message.PropertyTags: "stale"}}, "", "U")
	if _, ok := got[message.PropertyTags]; ok {
		t.Fatal("an empty Tag must clear TAGS")
	}
}

func TestProducerValidatesWithoutRoundTrip(t *testing.T) {
	// Nothing listens on the NameServer address: any round trip would fail
	// with a transport error instead of the coded error.
	p, err := NewProducer("pg", WithNameServers("127.0.0.1:1"), WithMaxBodySize(16))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if _, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("x")}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("send before start: %v", err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		msg  *Message
		want error
	}{
		{"nil", nil, ErrMessageIllegal},
		{"empty topic", &Message{Body: []byte("x")}, ErrIllegalTopic},
		{"bad topic", &Message{Topic: "a b", Body: []byte("x")}, ErrIllegalTopic},
		{"long topic", &Message{Topic: strings.Repeat("t", 128), Body: []byte("x")}, ErrIllegalTopic},
		{"empty body", &Message{Topic: "t"}, ErrMessageIllegal},
		{"large body", &Message{Topic: "t", Body: make([]byte, 17)}, ErrMessageTooLarge},
		{"key with space", &Message{Topic: "t", Body: []byte("x"), Keys: []string{"a b"}}, ErrMessageIllegal},
		{"separator in property", &Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{"a": "\x01"}}, ErrMessageIllegal},
		{"huge properties", &Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{"a": strings.Repeat("v", 40000)}}, ErrPropertiesTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := p.Send(ctx, tt.msg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Send = %v, want %v", err, tt.want)
			}
			if time.Since(start) > time.Second {
				t.Fatal("validation took a round trip")
			}
			if err := p.SendOneway(ctx, tt.msg); !errors.Is(err, tt.want) {
				t.Fatalf("SendOneway = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := p.SendBatch(ctx, nil); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("empty batch: %v", err)
	}
	if _, err := p.SendBatch(ctx, []*Message{{Topic: "a", Body: []byte("x")}, {Topic: "b", Body: []byte("x")}}); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("mixed batch: %v", err)
	}
	if _, err := p.SendBatch(ctx, []*Message{{Topic: "a", Body: make([]byte, 10)}, {Topic: "a", Body: make([]byte, 10)}}); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("batch over the size limit: %v", err)
	}
	// A valid message needs a route: no NameServer answers.
	_, err = p.Send(ctx, &Message{Topic: "t", Body: []byte("x")})
	if !errors.Is(err, ErrNoRoute) || !errors.Is(err, ErrNoNameServer) {
		t.Fatalf("send without NameServer: %v", err)
	}
	done := make(chan error, 1)
	p.SendAsync(ctx, &Message{Topic: "t"}, func(_ *SendResult, err error) { done <- err })
	if err := <-done; !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("async: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	p.SendAsync(ctx, &Message{Topic: "t", Body: []byte("x")}, func(_ *SendResult, err error) { done <- err })
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("async after close: %v", err)
	}
}

func TestOptionsAndNames(t *testing.T) {
	if _, err := NewProducer("bad group!"); !errors.Is(err, ErrIllegalGroup) {
		t.Fatalf("bad producer group: %v", err)
	}
	if _, err := NewPushConsumer(""); !errors.Is(err, ErrIllegalGroup) {
		t.Fatalf("empty consumer group: %v", err)
	}
	for i, o := range []Option{WithNameServers(), WithNameServers(""), WithRPCTimeout(-time.Second),
		WithOptions(WithNameServers("a:1"), WithNameServers())} {
		if _, err := NewProducer("g", o); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("bad shared option %d accepted by a producer: %v", i, err)
		}
		if _, err := NewPullConsumer("g", o); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("bad shared option %d accepted by a consumer: %v", i, err)
		}
		if _, err := NewAdmin(o); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("bad shared option %d accepted by an admin: %v", i, err)
		}
	}
	if _, err := NewProducer("g", WithSendRetries(-1)); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("bad producer option accepted: %v", err)
	}
	for i, o := range []ConsumerOption{WithConsumeGoroutines(0), WithPullThreshold(0, 1), WithLongPollTimeout(0),
		WithAllocateStrategy(nil)} {
		if _, err := NewPushConsumer("g", o); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("bad consumer option %d accepted: %v", i, err)
		}
	}
	c, err := NewPushConsumer("g", WithNameServers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe("t", "a | b", ConcurrentListener(func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })); !errors.Is(err, ErrSubscriptionParse) {
		t.Fatalf("bad expression: %v", err)
	}
	if err := c.Subscribe("bad topic", "*", ConcurrentListener(func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })); !errors.Is(err, ErrIllegalTopic) {
		t.Fatalf("bad topic: %v", err)
	}
	if err := c.Subscribe("t", "*", nil); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("nil listener: %v", err)
	}
	if err := c.Subscribe("t", "*", ConcurrentListener(nil)); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("nil ConcurrentListener: %v", err)
	}
	if err := c.Start(context.Background()); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("start without subscription: %v", err)
	}
	if err := c.Subscribe("t", "*", ErrorListener(func(context.Context, []*MessageExt) error { return nil })); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("u", "*", OrderlyListener(func(context.Context, []*MessageExt) OrderlyResult { return OrderlySuccess })); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("mixed listener kinds: %v", err)
	}
}

func TestClientIDsAreUniqueInProcess(t *testing.T) {
	a := reserveClientID("inst")
	b := reserveClientID("inst")
	c := reserveClientID("inst")
	if a == b || b == c || !strings.HasSuffix(a, "@inst") || !strings.HasSuffix(b, "@inst#2") {
		t.Fatalf("ids %q %q %q", a, b, c)
	}
	releaseClientID(b)
	if d := reserveClientID("inst"); d != b {
		t.Fatalf("released id not reused: %q", d)
	}
	for _, id := range []string{a, b, c} {
		releaseClientID(id)
	}
}

func TestRetryableSend(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{codeErr(pb.Code_SYSTEM_BUSY, "busy"), true},
		{codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "x"), true},
		{codeErr(pb.Code_SYSTEM_ERROR, "x"), true},
		{codeErr(pb.Code_NOT_MASTER, "x"), true},
		{codeErr(pb.Code_DISK_FULL, "x"), true},
		{codeErr(pb.Code_TOPIC_NOT_EXIST, "x"), true},
		{codeErr(pb.Code_MESSAGE_ILLEGAL, "x"), false},
		{codeErr(pb.Code_MESSAGE_TOO_LARGE, "x"), false},
		{codeErr(pb.Code_FLUSH_DISK_TIMEOUT, "x"), false},
		{status.Error(codes.Unavailable, "down"), true},
		{status.Error(codes.InvalidArgument, "bad"), false},
		{status.Error(codes.ResourceExhausted, "too big"), false},
		{&streamError{addr: "a", err: errors.New("EOF")}, true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{errors.New("other"), false},
	}
	for _, tt := range tests {
		if got := retryableSend(tt.err); got != tt.want {
			t.Errorf("retryableSend(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestRecordDecoderAnswer: the records of one answer decoded through one
// recordDecoder (one scratch Ext, one slab, shared strings) are the
// messages each record gives alone, topics changing within the answer
// included, and none is changed by the decoding of the next.
func TestRecordDecoderAnswer(t *testing.T) {
	store := netip.MustParseAddrPort("10.1.2.3:10911")
	var recs [][]byte
	for i, topic := range []string{"orders", "orders", "audit", "orders", "orders"} {
		e := &message.Ext{
			Message:        message.Message{Topic: topic, Body: []byte(fmt.Sprintf("body-%d", i)), Properties: map[string]string{"n": strconv.Itoa(i)}},
			QueueID:        int32(i),
			QueueOffset:    int64(10 + i),
			PhysicalOffset: int64(1000 * i),
			StoreHost:      store,
			BornHost:       store,
		}
		if i%2 == 0 {
			e.Properties[message.PropertyUniqueKey] = fmt.Sprintf("ID-%d", i)
		}
		recs = append(recs, mustEncode(t, e))
	}
	d := recordDecoder{brokerName: "broker-a"}
	d.expect(len(recs) - 1) // the last comes from outside the slab
	var got []*MessageExt
	for _, rec := range recs {
		m, err := d.decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	for i, rec := range recs {
		want, err := extFromRecord(rec, "broker-a")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("record %d: decoded with the others %+v, alone %+v", i, got[i], want)
		}
	}
}

// BenchmarkDecodeAnswer decodes the records of a pull answer: 32 messages
// of 1 KiB with a unique key and a user property.
func BenchmarkDecodeAnswer(b *testing.B) {
	store := netip.MustParseAddrPort("10.1.2.3:10911")
	recs := make([][]byte, 32)
	for i := range recs {
		e := &message.Ext{
			Message: message.Message{Topic: "bench", Body: make([]byte, 1024),
				Properties: map[string]string{message.PropertyUniqueKey: fmt.Sprintf("%032X", i), "BENCH_SENT_NS": "1764800000000000000"}},
			QueueOffset: int64(i), PhysicalOffset: int64(1100 * i), StoreHost: store, BornHost: store,
		}
		recs[i] = mustEncode(b, e)
	}
	b.ReportAllocs()
	for b.Loop() {
		d := recordDecoder{brokerName: "broker-a"}
		d.expect(len(recs))
		for _, rec := range recs {
			if _, err := d.decode(rec); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/msg")
}

// mustEncode encodes e as a stored record.
func mustEncode(tb testing.TB, e *message.Ext) []byte {
	tb.Helper()
	rec, err := message.Encode(nil, e)
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}
