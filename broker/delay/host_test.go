package delay

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/notify"
	"github.com/bolide-mq/bolide/message"
)

// fakeHost is an in-memory timer topic and real topic: units are appended
// by send, deliveries are recorded with the clock reading at delivery.
type fakeHost struct {
	clock Clock

	mu        sync.Mutex
	units     []Unit
	msgs      map[int64]fakeMsg
	nextLoc   int64
	arrival   notify.Signal
	delivered []delivery
	failNext  int // fail that many Deliver calls
	// storedThenFail: Deliver stores the messages, then fails (as if the
	// broker died before the engine learned of it).
	storedThenFail bool
	early          int
}

// fakeMsg is a stored timer message (small: tests hold a million).
type fakeMsg struct {
	id  int
	due int64
}

type delivery struct {
	id  int
	due int64
	at  int64
}

func newFakeHost(c Clock) *fakeHost {
	return &fakeHost{clock: c, msgs: make(map[int64]fakeMsg), nextLoc: 1000}
}

// send stores a timer message with id due at due and returns its location.
func (h *fakeHost) send(id int, due int64) int64 {
	h.mu.Lock()
	loc := h.nextLoc
	h.nextLoc += 200
	h.msgs[loc] = fakeMsg{id: id, due: due}
	h.units = append(h.units, Unit{QueueOffset: int64(len(h.units)), Location: loc, Size: 200, DeliverMS: due})
	h.mu.Unlock()
	h.arrival.Notify()
	return loc
}

func (h *fakeHost) ReadTimerQueue(from int64, max int) ([]Unit, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if from >= int64(len(h.units)) {
		return nil, from, nil
	}
	end := min(int64(len(h.units)), from+int64(max))
	return append([]Unit(nil), h.units[from:end]...), end, nil
}

func (h *fakeHost) TimerQueueMaxOffset() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return int64(len(h.units))
}

func (h *fakeHost) TimerArrival() <-chan struct{} { return h.arrival.C() }

var fakeStoreHost = netip.MustParseAddrPort("127.0.0.1:10911")

func (h *fakeHost) StoreHost() netip.AddrPort { return fakeStoreHost }

// ReadRecords encodes the stored messages as the CommitLog holds them.
func (h *fakeHost) ReadRecords(locs []int64, fn func(i int, rec []byte, err error)) {
	var buf []byte
	for i, loc := range locs {
		m, err := h.readMessage(loc)
		if err == nil {
			buf, err = message.Encode(buf[:0], m)
		}
		if err != nil {
			fn(i, nil, err)
			continue
		}
		fn(i, buf, nil)
	}
}

func (h *fakeHost) readMessage(loc int64) (*message.Ext, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.msgs[loc]
	if !ok {
		return nil, fmt.Errorf("no message at %d", loc)
	}
	return &message.Ext{
		Message: message.Message{Topic: message.TimerTopic, Body: []byte("x"), Properties: map[string]string{
			message.PropertyRealTopic: "real", message.PropertyRealQueueID: "0",
			message.PropertyTimerOutMS: strconv.FormatInt(m.due, 10), "id": strconv.Itoa(m.id)}},
		PhysicalOffset: loc,
	}, nil
}

func (h *fakeHost) Deliver(_ context.Context, recs []store.Prepared) error {
	msgs := make([]*message.Ext, len(recs))
	for i, p := range recs {
		m, err := message.Decode(p.Record)
		if err != nil || m.Topic != p.Topic || m.QueueID != p.QueueID || m.StoreHost != fakeStoreHost {
			panic(fmt.Sprintf("bad prepared record %+v: %v", p, err))
		}
		msgs[i] = m
	}
	now := h.clock.Now().UnixMilli()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failNext > 0 {
		h.failNext--
		return errors.New("injected delivery failure")
	}
	for _, m := range msgs {
		if m.Topic != "real" || m.Properties[message.PropertyRealTopic] != "" {
			panic("not restored: " + m.Topic)
		}
		id, _ := strconv.Atoi(m.Properties["id"])
		due, _ := strconv.ParseInt(m.Properties[message.PropertyTimerOutMS], 10, 64)
		if now < due {
			h.early++
		}
		h.delivered = append(h.delivered, delivery{id: id, due: due, at: now})
	}
	if h.storedThenFail {
		return errors.New("injected failure after storing")
	}
	return nil
}

func (h *fakeHost) deliveries() []delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]delivery(nil), h.delivered...)
}

func (h *fakeHost) deliveredCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.delivered)
}

// testEngine opens and starts an engine over h in dir.
func testEngine(t testing.TB, dir string, h *fakeHost, mutate ...func(*Options)) *Engine {
	t.Helper()
	o := DefaultOptions(dir)
	o.Clock = h.clock
	o.CheckpointInterval = 50 * time.Millisecond
	for _, f := range mutate {
		f(&o)
	}
	e, err := Open(o, h, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	return e
}

// crash stops an engine the way kill -9 would leave its files: no final
// sync, checkpoint or fired-log flush beyond what is already written.
func (e *Engine) crash() {
	e.closeOnce.Do(func() {
		e.cancel()
		e.wg.Wait()
		e.mu.Lock()
		for el := e.files.lru.Front(); el != nil; el = el.Next() {
			_ = el.Value.(*bfile).f.Close()
		}
		for _, lb := range e.loaded {
			if lb.fired != nil {
				_ = lb.fired.Close()
			}
		}
		_ = e.clog.f.Close()
		e.mu.Unlock()
	})
}

// fastTempDir is a temporary directory on tmpfs when /dev/shm exists: the
// virtual-clock tests create and delete a file per bucket they pass, which
// the disk's journal makes slow, and durability is not what they test.
func fastTempDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "bolide-delay-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// settle waits until the engine has caught up with the virtual clock.
func settle(t testing.TB, e *Engine) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !e.Settled() {
		if time.Now().After(deadline) {
			t.Fatalf("engine did not settle: %s", e.debugState())
		}
		time.Sleep(time.Millisecond)
	}
}
