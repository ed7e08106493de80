package txn

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/broker/rolegate"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/notify"
	"github.com/bolide-mq/bolide/message"
)

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{0, time.Second, 1}, {time.Second, 0, 1}, {time.Second, time.Second, -1}} {
		if o.Validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	d := DefaultOptions()
	if err := d.Validate(); err != nil || d.Timeout != 6*time.Second || d.CheckInterval != 30*time.Second || d.CheckMax != 15 {
		t.Fatalf("defaults %+v: %v", d, err)
	}
}

func TestOpBody(t *testing.T) {
	for _, offs := range [][]int64{{0}, {3, 17, 12345678901}} {
		if got := parseOpBody(opBody(offs)); fmt.Sprint(got) != fmt.Sprint(offs) {
			t.Errorf("%v → %q → %v", offs, opBody(offs), got)
		}
	}
	if got := parseOpBody([]byte("5,x,,6")); fmt.Sprint(got) != "[5 6]" {
		t.Errorf("lenient parse: %v", got)
	}
}

// TestRewriteAndRealMessage: a half message is parked in the half queue
// and its committed form goes back to its real topic and queue.
func TestRewriteAndRealMessage(t *testing.T) {
	m := &message.Ext{Message: message.Message{Topic: "orders", Body: []byte("x"), Properties: map[string]string{
		message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: "pg",
		message.PropertyUniqueKey: "U1", message.PropertyTransactionCheckTimes: "3",
	}}, QueueID: 2, SysFlag: message.SysFlagTransPrepared}
	if err := Rewrite([]*message.Ext{m}); err != nil {
		t.Fatal(err)
	}
	if m.Topic != message.TransHalfTopic || m.QueueID != 0 || message.TransactionType(m.SysFlag) != 0 ||
		ID(m) != "U1" || m.Properties[message.PropertyTransactionCheckTimes] != "" {
		t.Fatalf("stored form %+v", m)
	}
	m.QueueOffset, m.PhysicalOffset = 7, 4096
	r, err := RealMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	if r.Topic != "orders" || r.QueueID != 2 || message.TransactionType(r.SysFlag) != message.SysFlagTransCommit ||
		r.PreparedTransactionOffset != 4096 || r.Properties[message.PropertyTransactionPreparedQOff] != "7" ||
		r.Properties[message.PropertyTransactionPrepared] != "" {
		t.Fatalf("real message %+v", r)
	}
	plain := &message.Ext{Message: message.Message{Topic: "orders", Body: []byte("y")}}
	if err := Rewrite([]*message.Ext{plain}); err != nil || plain.Topic != "orders" {
		t.Fatalf("plain message: %v %+v", err, plain)
	}
}

// fakeSource is a role the test sets.
type fakeSource struct {
	master  atomic.Bool
	changed notify.Signal
}

func (s *fakeSource) IsMaster() bool           { return s.master.Load() }
func (s *fakeSource) Changes() <-chan struct{} { return s.changed.C() }
func (s *fakeSource) set(m bool)               { s.master.Store(m); s.changed.Notify() }

// emptyHost is a broker whose half, op and discard queues are empty.
type emptyHost struct {
	gate    *rolegate.Gate
	arrival notify.Signal
}

func (h *emptyHost) ReadMessage(int64) (*message.Ext, error) { return nil, errors.New("no message") }
func (h *emptyHost) ReadRecord(int64) ([]byte, error)        { return nil, errors.New("no record") }
func (h *emptyHost) GetMessages(string, int64, int) (store.GetResult, error) {
	return store.GetResult{Status: store.NoMessageInQueue}, nil
}
func (h *emptyHost) QueueOffsets(string) (int64, int64) { return 0, 0 }
func (h *emptyHost) QueryByKey(string, string, int64, int64, int) ([]*message.Ext, error) {
	return nil, nil
}
func (h *emptyHost) WaitDispatched(context.Context) error { return nil }
func (h *emptyHost) ConsumeOffset(string) int64           { return -1 }
func (h *emptyHost) CommitOffset(string, int64)           {}
func (h *emptyHost) HalfArrival() <-chan struct{}         { return h.arrival.C() }
func (h *emptyHost) Writable() error                      { return nil }
func (h *emptyHost) InSync() error                        { return nil }
func (h *emptyHost) Append(context.Context, []*message.Ext) ([]store.PutResult, error) {
	return nil, errors.New("read-only")
}
func (h *emptyHost) WaitReplicated(context.Context, []store.PutResult) error { return nil }
func (h *emptyHost) SyncRole() bool                                          { return h.gate.Sync() }
func (h *emptyHost) PushCheck(context.Context, string, Check) bool           { return false }

// TestServiceFollowsGate: requests are refused with NOT_MASTER until the
// gate leads, served once the state is loaded, refused again after a
// demotion and with SHUTTING_DOWN once closed.
func TestServiceFollowsGate(t *testing.T) {
	src, h := &fakeSource{}, &emptyHost{}
	h.gate = rolegate.New(src, zaptest.NewLogger(t))
	s := New(h, "b1", DefaultOptions(), zaptest.NewLogger(t))
	h.gate.Subscribe("transactions", s)
	h.gate.Start()
	defer h.gate.Close()
	ctx := context.Background()
	code := func(err error) errcode.Code { return errcode.Of(err) }

	if _, _, err := s.Pending(ctx, "", "", 10); code(err) != errcode.NotMaster {
		t.Fatalf("pending on a slave: %v", err)
	}
	src.set(true) // not seen by the gate's watcher yet: the request syncs it
	if l, total, err := s.Pending(ctx, "", "", 10); err != nil || total != 0 || len(l) != 0 {
		t.Fatalf("pending on the master: %v %d %v", l, total, err)
	}
	if _, err := s.End(ctx, EndRequest{ProducerGroup: "pg", State: StateUnknown, FromCheck: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.End(ctx, EndRequest{ProducerGroup: "pg", State: 7}); code(err) != errcode.InvalidParameter {
		t.Fatalf("state 7: %v", err)
	}
	if _, err := s.End(ctx, EndRequest{ProducerGroup: "pg", State: StateCommit}); code(err) != errcode.TransactionNotFound {
		t.Fatalf("commit of nothing: %v", err)
	}
	if _, err := s.End(ctx, EndRequest{ProducerGroup: "bad group!", State: StateCommit}); code(err) != errcode.IllegalGroup {
		t.Fatalf("illegal group: %v", err)
	}
	if st := s.Stats(); st.UnknownAnswers != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
	src.set(false)
	if _, _, err := s.Pending(ctx, "", "", 10); code(err) != errcode.NotMaster {
		t.Fatalf("pending after a demotion: %v", err)
	}
	h.gate.Close()
	s.Close()
	if _, err := s.End(ctx, EndRequest{ProducerGroup: "pg", State: StateCommit}); code(err) != errcode.ShuttingDown {
		t.Fatalf("end after close: %v", err)
	}
}
