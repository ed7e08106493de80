package delay

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/internal/notify"
	"github.com/bolide-mq/bolide/message"
)

// storeHost is a BrokerHost over a real store and no broker: always the
// master, nothing to replicate, no topic table (no queue is remapped).
type storeHost struct {
	st       *store.Store
	arrivals sync.Map // storeQueue → *notify.Signal
	// puts counts Put calls; replFails makes that many WaitReplicated
	// calls fail, waits counts them.
	puts, replFails, waits atomic.Int32
	// queueNums, when set, is every topic's number of write queues.
	queueNums atomic.Int32
}

type storeQueue struct {
	topic string
	qid   int32
}

func (h *storeHost) signal(topic string, qid int32) *notify.Signal {
	v, _ := h.arrivals.LoadOrStore(storeQueue{topic, qid}, &notify.Signal{})
	return v.(*notify.Signal)
}

func (h *storeHost) GetMessages(topic string, qid int32, from int64, max, maxBytes int, filter func(int64) bool) (store.GetResult, error) {
	return h.st.GetMessages(topic, qid, from, max, maxBytes, filter)
}

func (h *storeHost) GetMatching(topic string, qid int32, from int64, max, maxBytes int, filter func(int64) bool,
	match func([]byte) bool) (store.GetResult, error) {
	return h.st.GetMatching(topic, qid, from, max, maxBytes, filter, match)
}

func (h *storeHost) ReadMessages(locs []int64, fn func(i int, m *message.Ext, err error)) {
	h.st.ReadMessages(locs, fn)
}

func (h *storeHost) ReadRecords(locs []int64, fn func(i int, rec []byte, err error)) {
	h.st.ReadRecords(locs, fn)
}

func (h *storeHost) StoreHost() netip.AddrPort { return h.st.StoreHost() }

func (h *storeHost) PutPrepared(ctx context.Context, recs []store.Prepared) ([]store.PutResult, error) {
	h.puts.Add(1)
	if n := h.queueNums.Load(); n > 0 {
		for _, p := range recs {
			if p.QueueID >= n {
				return nil, fmt.Errorf("queue %d of %s: the topic has %d", p.QueueID, p.Topic, n)
			}
		}
	}
	return h.st.PutPrepared(ctx, recs, nil)
}

func (h *storeHost) QueryByKey(topic, key string, begin, end int64, max int) ([]*message.Ext, error) {
	return h.st.QueryByKey(topic, key, begin, end, max)
}

func (h *storeHost) QueueOffsets(topic string, qid int32) (int64, int64) {
	return h.st.QueueOffsets(topic, qid)
}

func (h *storeHost) StoreTimeAt(topic string, qid int32, off int64) (int64, error) {
	return h.st.StoreTimeAt(topic, qid, off)
}

func (h *storeHost) Arrival(topic string, qid int32) <-chan struct{} { return h.signal(topic, qid).C() }
func (h *storeHost) CommitLogMaxOffset() int64                       { return h.st.CommitLog().MaxOffset() }
func (h *storeHost) DispatchedOffset() int64                         { return h.st.DispatchedOffset() }
func (h *storeHost) Segments() []commitlog.SegmentInfo               { return h.st.CommitLog().Segments() }

func (h *storeHost) WaitDispatched(ctx context.Context, off int64) error {
	return h.st.WaitDispatched(ctx, off)
}

func (h *storeHost) Put(ctx context.Context, msgs []*message.Ext) ([]store.PutResult, error) {
	h.puts.Add(1)
	return h.st.PutBatch(ctx, msgs, nil)
}

func (h *storeHost) WaitReplicated(context.Context, []store.PutResult) error {
	h.waits.Add(1)
	if h.replFails.Add(-1) >= 0 {
		return errors.New("not replicated")
	}
	return nil
}

func (h *storeHost) WriteQueueNums(string) (int32, bool) {
	n := h.queueNums.Load()
	return n, n > 0
}

func (h *storeHost) IsMaster() bool  { return true }
func (h *storeHost) SyncRole() bool  { return true }
func (h *storeHost) BrokerID() int64 { return 0 }
func (h *storeHost) Epoch() int64    { return 0 }
func (h *storeHost) Role() string    { return "MASTER" }

// testService is a delay service over a store in dir, leading (as on a
// master) until the test ends.
type testService struct {
	host *storeHost
	svc  *Service
	opts BrokerOptions
}

func startTestService(t *testing.T, dir string, mutate func(*store.Options, *BrokerOptions)) *testService {
	t.Helper()
	so := store.DefaultOptions(dir + "/store")
	so.CommitLog.SegmentSize = 16 << 20
	so.ConsumeQueue.UnitsPerFile = 10_000
	so.Index.SlotCount = 10_000
	so.Index.MaxEntries = 40_000
	so.MaxMessageSize = 1 << 20
	o := DefaultBrokerOptions()
	o.OffsetPersistInterval = 50 * time.Millisecond
	o.Timer.CheckpointInterval = 50 * time.Millisecond
	if mutate != nil {
		mutate(&so, &o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	so.TagCode = o.TagCode(so.TagCode)
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o755); err != nil { // a broker's config directory
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	st, err := store.Open(so, log.Named("store"))
	if err != nil {
		t.Fatal(err)
	}
	h := &storeHost{st: st}
	st.SetArrivalListener(func(topic string, qid int32, _ int64) { h.signal(topic, qid).Notify() })
	svc, err := NewService(Config{Options: o, StoreDir: dir, BrokerName: "test", RetentionMaxAge: so.Retention.MaxAge}, h, log.Named("delay"))
	if err != nil {
		_ = st.Close()
		t.Fatal(err)
	}
	svc.Start()
	ctx, cancel := context.WithCancel(context.Background())
	wait := svc.Lead(ctx)
	t.Cleanup(func() {
		cancel()
		wait()
		if err := svc.Close(); err != nil {
			t.Error(err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return &testService{host: h, svc: svc, opts: o}
}

// send stores one message as the broker's send path does (delayed
// messages rewritten first).
func (ts *testService) send(t *testing.T, m *message.Ext) store.PutResult {
	t.Helper()
	if err := ts.opts.Schedule(m, "test"); err != nil {
		t.Fatal(err)
	}
	res, err := ts.host.st.PutBatch(context.Background(), []*message.Ext{m}, nil)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return res[0]
}

// pullAll reads every message of a queue from offset from, as a pull
// does: past units whose CommitLog segment retention deleted.
func (ts *testService) pullAll(t *testing.T, topic string, q int32, from int64) []*message.Ext {
	t.Helper()
	var out []*message.Ext
	for {
		r, err := ts.host.st.GetMessages(topic, q, from, 1000, 4<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == store.NoMatchedMessage && r.NextOffset < r.MaxOffset {
			from = r.NextOffset
			continue
		}
		if r.Status != store.Found {
			return out
		}
		for _, rec := range r.Records {
			m, err := message.Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		from = r.NextOffset
	}
}
