package retry

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// fakeHost holds messages by CommitLog offset and a topic set; Store keeps
// what it is given.
type fakeHost struct {
	writable error
	msgs     map[int64]*message.Ext
	topics   map[string]bool
	stored   []*message.Ext
}

func newFakeHost() *fakeHost {
	return &fakeHost{msgs: make(map[int64]*message.Ext), topics: make(map[string]bool)}
}

func (h *fakeHost) Writable() error { return h.writable }

func (h *fakeHost) ReadMessage(offset int64) (*message.Ext, error) {
	if m, ok := h.msgs[offset]; ok {
		return m, nil
	}
	return nil, errors.New("no such record")
}

func (h *fakeHost) Store(_ context.Context, m *message.Ext) (string, error) {
	h.stored = append(h.stored, m)
	return "MSG" + m.Topic, nil
}

func (h *fakeHost) HasTopic(topic string) bool { return h.topics[topic] }

func (h *fakeHost) CreateTopic(topic string) error {
	if h.topics[topic] {
		return errcode.Errorf(errcode.TopicExistAlready, "topic %s already exists", topic)
	}
	h.topics[topic] = true
	return nil
}

func (h *fakeHost) GetMessages(string, int32, int64, int, int) (store.GetResult, error) {
	return store.GetResult{Status: store.NoMessageInQueue}, nil
}

func (h *fakeHost) QueueOffsets(string, int32) (int64, int64) { return 0, 0 }

func failed(topic string, reconsume int32, props map[string]string) *message.Ext {
	return &message.Ext{Message: message.Message{Topic: topic, Flag: 7, Body: []byte("body"), Properties: props},
		ReconsumeTimes: reconsume, BornTimestamp: 42, PhysicalOffset: 1000}
}

func TestRetryCopy(t *testing.T) {
	s := New(newFakeHost(), Options{MaxReconsumeTimes: 16, GroupMaxReconsumeTimes: map[string]int{"few": 2}}, "b1", nil)

	// A first failure: delay 3 + count, first and last failure set, the
	// delay and timer properties of the stored message dropped.
	m := failed("orders", 0, map[string]string{message.PropertyUniqueKey: "U1", message.PropertyDelayLevel: "5",
		message.PropertyRealTopic: "x", message.PropertyTimerOutMS: "9", message.PropertyTags: "paid"})
	c, dead := s.retryCopy(m, SendBackRequest{Group: "billing", Reason: " db\ndown "})
	p := c.Properties
	if dead || c.ReconsumeTimes != 1 || p[message.PropertyDelayLevel] != "3" || p[message.PropertyRetryTopic] != "orders" ||
		p[message.PropertyOriginMessageID] != m.MsgID() || p[PropertyFailureReason] != "db down" ||
		p[PropertyFirstFailureMS] == "" || p[PropertyFirstFailureMS] != p[PropertyLastFailureMS] ||
		p[message.PropertyMaxReconsumeTimes] != "16" || p[message.PropertyRealTopic] != "" || p[message.PropertyTimerOutMS] != "" ||
		p[message.PropertyTags] != "paid" || c.Flag != 7 || string(c.Body) != "body" || c.BornTimestamp != 42 || c.Topic != "" {
		t.Fatalf("first copy: dead %v reconsume %d props %v", dead, c.ReconsumeTimes, p)
	}
	if m.Properties[message.PropertyDelayLevel] != "5" {
		t.Fatal("the stored message's properties changed")
	}

	// From the retry topic: the original topic and first failure are kept.
	p[PropertyFirstFailureMS] = "1"
	again := failed("%RETRY%billing", 1, p)
	c, dead = s.retryCopy(again, SendBackRequest{Group: "billing", ReconsumeTimes: 3, OriginMsgID: "ignored"})
	p = c.Properties
	if dead || c.ReconsumeTimes != 4 || p[message.PropertyDelayLevel] != "6" || p[message.PropertyRetryTopic] != "orders" ||
		p[message.PropertyOriginMessageID] != m.MsgID() || p[PropertyFirstFailureMS] != "1" || p[PropertyFailureReason] != "db down" {
		t.Fatalf("second copy: dead %v reconsume %d props %v", dead, c.ReconsumeTimes, p)
	}

	// The group's limit, the consumer's limit, a negative level: the DLQ.
	for _, c := range []struct {
		name      string
		reconsume int32
		req       SendBackRequest
	}{
		{"group limit", 2, SendBackRequest{Group: "few"}},
		{"consumer limit", 0, SendBackRequest{Group: "billing", MaxReconsumeTimes: 1, ReconsumeTimes: 1}},
		{"asked", 0, SendBackRequest{Group: "billing", DelayLevel: -1, OriginMsgID: "ORIG"}},
	} {
		cp, dead := s.retryCopy(failed("orders", c.reconsume, nil), c.req)
		p := cp.Properties
		if !dead || p[message.PropertyDelayLevel] != "" || p[message.PropertyDLQOriginTopic] != "orders" ||
			p[message.PropertyDLQOriginMessageID] != p[message.PropertyOriginMessageID] {
			t.Errorf("%s: dead %v props %v", c.name, dead, p)
		}
	}
	if cp, _ := s.retryCopy(failed("orders", 0, nil), SendBackRequest{Group: "billing", DelayLevel: 9}); cp.Properties[message.PropertyDelayLevel] != "9" {
		t.Errorf("asked level: %v", cp.Properties)
	}
}

func TestSendBackWithFakeHost(t *testing.T) {
	h := newFakeHost()
	h.msgs[1000] = failed("orders", 0, map[string]string{message.PropertyUniqueKey: "U1"})
	h.msgs[2000] = failed(message.ScheduleTopic, 0, nil)
	s := New(h, DefaultOptions(), "b1", nil)
	ctx := context.Background()

	res, err := s.SendBack(ctx, SendBackRequest{Group: "billing", CommitLogOffset: 1000, UniqueID: "U1"})
	if err != nil || res.DeadLettered || res.Topic != "%RETRY%billing" || res.MsgID != "MSG%RETRY%billing" || res.ReconsumeTimes != 1 ||
		!h.topics["%RETRY%billing"] || len(h.stored) != 1 || h.stored[0].Topic != "%RETRY%billing" {
		t.Fatalf("send-back: %+v %v, topics %v", res, err, h.topics)
	}
	res, err = s.SendBack(ctx, SendBackRequest{Group: "billing", CommitLogOffset: 1000, DelayLevel: -1})
	if err != nil || !res.DeadLettered || res.Topic != "%DLQ%billing" || !h.topics["%DLQ%billing"] {
		t.Fatalf("dead-letter: %+v %v", res, err)
	}
	if got := s.GroupTopics("billing"); len(got) != 2 {
		t.Fatalf("group topics %v", got)
	}

	for _, c := range []struct {
		name string
		req  SendBackRequest
		want errcode.Code
	}{
		{"bad group", SendBackRequest{Group: "bad group", CommitLogOffset: 1000}, errcode.IllegalGroup},
		{"no message", SendBackRequest{Group: "billing", CommitLogOffset: 5}, errcode.QueryNotFound},
		{"wrong unique id", SendBackRequest{Group: "billing", CommitLogOffset: 1000, UniqueID: "U2"}, errcode.QueryNotFound},
		{"system topic", SendBackRequest{Group: "billing", CommitLogOffset: 2000}, errcode.NoPermission},
	} {
		if _, err := s.SendBack(ctx, c.req); errcode.Of(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	h.writable = errcode.Errorf(errcode.NotMaster, "slave")
	if _, err := s.SendBack(ctx, SendBackRequest{Group: "billing", CommitLogOffset: 1000}); !errors.Is(err, errcode.ErrNotMaster) {
		t.Errorf("on a slave: %v", err)
	}
	if len(h.stored) != 2 {
		t.Errorf("%d messages stored, want 2", len(h.stored))
	}
}

func TestEnsureRetryTopics(t *testing.T) {
	h := newFakeHost()
	s := New(h, DefaultOptions(), "b1", nil)
	h.writable = errcode.Errorf(errcode.NotMaster, "slave")
	s.EnsureRetryTopics([]string{"a"})
	if len(h.topics) != 0 {
		t.Fatalf("a slave created %v", h.topics)
	}
	h.writable = nil
	h.topics["%RETRY%b"] = true
	s.EnsureRetryTopics([]string{"a", "b"})
	if len(h.topics) != 2 || !h.topics["%RETRY%a"] {
		t.Fatalf("topics %v", h.topics)
	}
}

func TestCleanReason(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"  timeout  ", "timeout"},
		{"a\nb\rc\x01d\x02e", "a b c d e"},
		{long, strings.Repeat("é", 256)},
	} {
		if got := cleanReason(c.in); got != c.want {
			t.Errorf("cleanReason(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRetryOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	o.GroupMaxReconsumeTimes = map[string]int{"billing": 3}
	if err := o.Validate(); err != nil || o.maxReconsumeTimes("billing") != 3 || o.maxReconsumeTimes("other") != 16 {
		t.Fatalf("valid options: %v", err)
	}
	o.MaxReconsumeTimes = -1
	o.GroupMaxReconsumeTimes["bad group"] = -2
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "max reconsume times -1") || !strings.Contains(err.Error(), "bad group") {
		t.Fatalf("invalid options: %v", err)
	}
}
