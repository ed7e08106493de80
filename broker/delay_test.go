package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// delayBroker is a broker on dir (reused across restarts) with clients.
type delayBroker struct {
	b     *server.Server
	c     pb.BrokerClient
	d     pb.DelayClient
	conn  *grpc.ClientConn
	close func()
}

func startDelayBroker(t *testing.T, dir string, mutate ...func(*broker.Options)) *delayBroker {
	t.Helper()
	opts := broker.DefaultOptions(dir)
	opts.ListenAddr = "127.0.0.1:0"
	opts.NameServers = nil
	opts.GossipAddr = "off"
	opts.Store.CommitLog.SegmentSize = 16 << 20
	opts.Store.ConsumeQueue.UnitsPerFile = 10_000
	opts.Store.Index.SlotCount = 10_000
	opts.Store.Index.MaxEntries = 40_000
	opts.MaxMessageSize = 1 << 20
	opts.Delay.OffsetPersistInterval = 50 * time.Millisecond
	opts.Delay.Timer.CheckpointInterval = 50 * time.Millisecond
	for _, f := range mutate {
		f(&opts)
	}
	b, err := newBroker(opts, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	db := &delayBroker{b: b, c: pb.NewBrokerClient(conn), d: pb.NewDelayClient(conn), conn: conn}
	var once sync.Once
	db.close = func() {
		once.Do(func() {
			conn.Close()
			if err := b.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(db.close)
	return db
}

// send sends one message and returns its result.
func (db *delayBroker) send(t *testing.T, m *pb.Message) *pb.SendResult {
	t.Helper()
	resp, err := db.c.Send(context.Background(), &pb.SendRequest{Messages: []*pb.Message{m}})
	if err == nil {
		err = wire.FromStatus(resp.Status)
	}
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return resp.Results[0]
}

// pullAll reads every message of a queue from offset from.
func (db *delayBroker) pullAll(t *testing.T, topic string, q int32, from int64) []*message.Ext {
	t.Helper()
	var out []*message.Ext
	for {
		r, err := db.c.Pull(context.Background(), &pb.PullRequest{Topic: topic, QueueId: q, Offset: from, MaxMessages: 1000, MaxBytes: 4 << 20, CommitOffset: -1})
		if err != nil {
			t.Fatal(err)
		}
		if r.PullStatus != pb.PullStatus_FOUND {
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

func delayedMsg(topic string, q int32, body string, props ...string) *pb.Message {
	m := &pb.Message{Topic: topic, QueueId: q, Body: []byte(body), Properties: map[string]string{
		message.PropertyTags: "tag", message.PropertyKeys: "key-" + body, message.PropertyUniqueKey: fmt.Sprintf("%032X", len(body)) + body}}
	m.Properties[message.PropertyUniqueKey] = "U" + body
	for i := 0; i+1 < len(props); i += 2 {
		m.Properties[props[i]] = props[i+1]
	}
	return m
}

// checkRestored asserts a delivered message looks as its producer sent it.
func checkRestored(t *testing.T, m *message.Ext) {
	t.Helper()
	for _, k := range []string{message.PropertyDelayLevel, message.PropertyRealTopic, message.PropertyRealQueueID,
		message.PropertyTimerDeliverMS, message.PropertyTimerDelayMS, message.PropertyTimerDelaySec} {
		if v, ok := m.Properties[k]; ok {
			t.Fatalf("delivered message %s still has %s=%s", m.Body, k, v)
		}
	}
	if m.Tags() != "tag" || m.Properties[message.PropertyKeys] != "key-"+string(m.Body) || m.UniqueID() != "U"+string(m.Body) {
		t.Fatalf("delivered message %s lost its tags, keys or unique id: %v", m.Body, m.Properties)
	}
}

// TestDelayLevelsDeliverInOrderNeverEarly: delay-level messages are stored
// in SCHEDULE_TOPIC_XXXX (queue level−1, capped), never visible in their
// topic before store time + delay, then delivered to their own queue with
// their properties restored, in the order they were stored.
func TestDelayLevelsDeliverInOrderNeverEarly(t *testing.T) {
	db := startDelayBroker(t, t.TempDir(), func(o *broker.Options) { o.Delay.Levels = "300ms 700ms 1s" })
	createTopic(t, db.c, "lv", 4)
	type sent struct {
		body string
		due  int64
		q    int32
	}
	var all []sent
	for i := 0; i < 60; i++ {
		level := i%3 + 1
		if i == 59 {
			level = 99 // capped to 3
		}
		body := fmt.Sprintf("m%02d", i)
		q := int32(i % 2)
		r := db.send(t, delayedMsg("lv", q, body, message.PropertyDelayLevel, strconv.Itoa(level)))
		stored, err := db.b.Store().ReadMessage(r.CommitLogOffset)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Topic != message.ScheduleTopic || stored.QueueID != int32(min(level, 3)-1) {
			t.Fatalf("level %d stored in %s/%d", level, stored.Topic, stored.QueueID)
		}
		delayMS := []int64{300, 700, 1000}[min(level, 3)-1]
		all = append(all, sent{body, stored.StoreTimestamp + delayMS, q})
	}
	due := map[string]sent{}
	for _, s := range all {
		due[s.body] = s
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < len(all) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d delivered", len(seen), len(all))
		}
		for q := int32(0); q < 2; q++ {
			ms := db.pullAll(t, "lv", q, 0)
			now := time.Now().UnixMilli() // everything pulled was visible by now
			for _, m := range ms {
				s := due[string(m.Body)]
				if m.StoreTimestamp < s.due || now < s.due {
					t.Fatalf("%s visible %d ms before it was due", m.Body, s.due-max(m.StoreTimestamp, now))
				}
				if m.QueueID != s.q {
					t.Fatalf("%s delivered to queue %d, sent to %d", m.Body, m.QueueID, s.q)
				}
				checkRestored(t, m)
				seen[string(m.Body)] = true
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Per level and queue, delivery follows store order (bodies were sent
	// in increasing order).
	for q := int32(0); q < 2; q++ {
		last := map[int64]string{}
		for _, m := range db.pullAll(t, "lv", q, 0) {
			s := due[string(m.Body)]
			n, _ := strconv.Atoi(strings.TrimPrefix(string(m.Body), "m"))
			level := int64(min(n%3+1, 3))
			if n == 59 {
				level = 3
			}
			if prev, ok := last[level]; ok && prev > string(m.Body) {
				t.Fatalf("level %d: %s delivered after %s", level, m.Body, prev)
			}
			last[level] = string(m.Body)
			_ = s
		}
	}
	if n := len(db.pullAll(t, "lv", 0, 0)) + len(db.pullAll(t, "lv", 1, 0)); n != len(all) {
		t.Fatalf("%d deliveries of %d messages", n, len(all))
	}
}

// TestDelayLevelsSurviveRestart: level offsets are persisted
// (config/delayOffset.json) and a restart delivers what was pending, once.
func TestDelayLevelsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	opts := func(o *broker.Options) { o.Delay.Levels = "200ms 1500ms" }
	db := startDelayBroker(t, dir, opts)
	createTopic(t, db.c, "rs", 1)
	for i := 0; i < 20; i++ {
		level := "1"
		if i >= 10 {
			level = "2"
		}
		db.send(t, delayedMsg("rs", 0, fmt.Sprintf("m%02d", i), message.PropertyDelayLevel, level))
	}
	testutil.WaitFor(t, 5*time.Second, "the level-1 messages", db.pulled(t, "rs", func(n int) bool { return n == 10 }))
	db.close()
	b, err := os.ReadFile(filepath.Join(dir, "config", "delayOffset.json"))
	if err != nil || !strings.Contains(string(b), `"1":10`) {
		t.Fatalf("delayOffset.json: %s %v", b, err)
	}
	db = startDelayBroker(t, dir, opts)
	testutil.WaitFor(t, 5*time.Second, "the level-2 messages", db.pulled(t, "rs", func(n int) bool { return n >= 20 }))
	time.Sleep(300 * time.Millisecond)
	got := db.pullAll(t, "rs", 0, 0)
	if len(got) != 20 {
		t.Fatalf("%d deliveries of 20 messages", len(got))
	}
	for i, m := range got {
		if string(m.Body) != fmt.Sprintf("m%02d", i) {
			t.Fatalf("delivery %d is %s", i, m.Body)
		}
	}
}

// pulled is a testutil.WaitFor condition: ok holds for the number of
// messages in queue 0 of topic.
func (db *delayBroker) pulled(t *testing.T, topic string, ok func(n int) bool) func() error {
	return func() error {
		if n := len(db.pullAll(t, topic, 0, 0)); !ok(n) {
			return fmt.Errorf("%d messages in %s", n, topic)
		}
		return nil
	}
}

// TestTimerMessages: TIMER_DELAY_MS, TIMER_DELAY_SEC and TIMER_DELIVER_MS
// are delivered at their time (never before), a time in the past at once,
// one beyond the maximum delay is refused.
func TestTimerMessages(t *testing.T) {
	db := startDelayBroker(t, t.TempDir(), func(o *broker.Options) { o.Delay.MaxDelay = time.Hour })
	createTopic(t, db.c, "tm", 2)
	now := time.Now().UnixMilli()
	due := map[string]int64{}
	for i := 0; i < 40; i++ {
		body := fmt.Sprintf("d%02d", i)
		d := int64(100 + i*37)
		r := db.send(t, delayedMsg("tm", int32(i%2), body, message.PropertyTimerDelayMS, strconv.FormatInt(d, 10)))
		stored, _ := db.b.Store().ReadMessage(r.CommitLogOffset)
		if stored.Topic != message.TimerTopic {
			t.Fatalf("timer message stored in %s", stored.Topic)
		}
		due[body], _ = strconv.ParseInt(stored.Properties[message.PropertyTimerOutMS], 10, 64)
	}
	db.send(t, delayedMsg("tm", 0, "sec", message.PropertyTimerDelaySec, "1"))
	due["sec"] = now + 1000
	db.send(t, delayedMsg("tm", 1, "abs", message.PropertyTimerDeliverMS, strconv.FormatInt(now+700, 10)))
	due["abs"] = now + 700
	db.send(t, delayedMsg("tm", 1, "past", message.PropertyTimerDeliverMS, strconv.FormatInt(now-5000, 10)))
	due["past"] = 0
	resp, err := db.c.Send(context.Background(), &pb.SendRequest{Messages: []*pb.Message{
		delayedMsg("tm", 0, "far", message.PropertyTimerDeliverMS, strconv.FormatInt(now+2*3600_000, 10))}})
	if err != nil || resp.Status.GetCode() != pb.Code_ILLEGAL_DELIVERY_TIME {
		t.Fatalf("beyond the maximum delay: %v %v", err, resp.GetStatus())
	}
	seen := map[string]int{}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < len(due) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d delivered", len(seen), len(due))
		}
		clear(seen)
		for q := int32(0); q < 2; q++ {
			ms := db.pullAll(t, "tm", q, 0)
			now := time.Now().UnixMilli() // everything pulled was visible by now
			for _, m := range ms {
				d, ok := due[string(m.Body)]
				if !ok {
					t.Fatalf("unexpected %s", m.Body)
				}
				if m.StoreTimestamp < d || now < d {
					t.Fatalf("%s visible %d ms early", m.Body, d-max(m.StoreTimestamp, now))
				}
				checkRestored(t, m)
				seen[string(m.Body)]++
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	for b, n := range seen {
		if n != 1 {
			t.Fatalf("%s delivered %d times", b, n)
		}
	}
}

// TestTimerCancel: a cancelled timer message is never delivered, also after
// a restart; cancelling a delivered one, or an unknown id, says so.
func TestTimerCancel(t *testing.T) {
	dir := t.TempDir()
	db := startDelayBroker(t, dir)
	createTopic(t, db.c, "cx", 1)
	ctx := context.Background()
	db.send(t, delayedMsg("cx", 0, "keep", message.PropertyTimerDelayMS, "1500"))
	db.send(t, delayedMsg("cx", 0, "drop", message.PropertyTimerDelayMS, "1500"))
	db.send(t, delayedMsg("cx", 0, "late", message.PropertyTimerDelayMS, "2500"))
	db.send(t, delayedMsg("cx", 0, "soon", message.PropertyTimerDelayMS, "100"))
	r, err := db.d.Cancel(ctx, &pb.CancelDelayedRequest{Topic: "cx", UniqueId: "Udrop"})
	if err != nil || wire.FromStatus(r.Status) != nil || r.Copies != 1 {
		t.Fatalf("cancel: %v %v", err, r.GetStatus())
	}
	r, _ = db.d.Cancel(ctx, &pb.CancelDelayedRequest{Topic: "cx", UniqueId: "Ulate"})
	if wire.FromStatus(r.Status) != nil {
		t.Fatalf("cancel: %v", r.GetStatus())
	}
	r, _ = db.d.Cancel(ctx, &pb.CancelDelayedRequest{Topic: "cx", UniqueId: "Unope"})
	if r.Status.GetCode() != pb.Code_QUERY_NOT_FOUND {
		t.Fatalf("cancel of an unknown id: %v", r.GetStatus())
	}
	r, _ = db.d.Cancel(ctx, &pb.CancelDelayedRequest{Topic: "other", UniqueId: "Ukeep"})
	if r.Status.GetCode() != pb.Code_QUERY_NOT_FOUND {
		t.Fatalf("cancel with the wrong topic: %v", r.GetStatus())
	}
	testutil.WaitFor(t, 5*time.Second, "soon", db.pulled(t, "cx", func(n int) bool { return n == 1 }))
	r, _ = db.d.Cancel(ctx, &pb.CancelDelayedRequest{Topic: "cx", UniqueId: "Usoon"})
	if r.Status.GetCode() != pb.Code_DELAY_ALREADY_DELIVERED {
		t.Fatalf("cancel of a delivered message: %v", r.GetStatus())
	}
	db.close()
	db = startDelayBroker(t, dir)
	testutil.WaitFor(t, 5*time.Second, "keep", db.pulled(t, "cx", func(n int) bool { return n == 2 }))
	time.Sleep(time.Until(time.Now().Add(1500 * time.Millisecond)))
	var bodies []string
	for _, m := range db.pullAll(t, "cx", 0, 0) {
		bodies = append(bodies, string(m.Body))
	}
	if strings.Join(bodies, ",") != "soon,keep" {
		t.Fatalf("delivered %v", bodies)
	}
	st, err := db.d.Status(ctx, &pb.DelayStatusRequest{})
	if err != nil || wire.FromStatus(st.Status) != nil || len(st.Levels) != 18 || !st.Timer.Enabled {
		t.Fatalf("status: %v %v", err, st)
	}
}

// TestTimerHorizonThroughStore: timer messages with delays log-uniform
// from 1 s to 400 days go through the real store while a virtual clock runs
// through the 400 days: each is delivered once, in due order, never early
// (its delivered store time, on the same virtual clock, is at or after its
// due time). BOLIDE_DELAY_BENCH=1 sends 1 000 000.
func TestTimerHorizonThroughStore(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 5_000
	}
	if os.Getenv("BOLIDE_DELAY_BENCH") != "" {
		n = 1_000_000
	}
	vc := delay.NewVirtualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	db := startDelayBroker(t, shmTempDir(t), func(o *broker.Options) {
		o.Delay.Clock = vc
		o.Store.Now = vc.Now
		o.Store.CommitLog.Now = vc.Now
		o.Store.Retention.MaxAge = 100 * 365 * 24 * time.Hour
		o.Store.CommitLog.SegmentSize = 256 << 20
		o.Store.ConsumeQueue.UnitsPerFile = 300_000
		o.Store.Index.SlotCount = 500_000
		o.Store.Index.MaxEntries = 2_000_000
	})
	createTopic(t, db.c, "hz", 1)
	ctx := context.Background()
	start := vc.Now()
	maxDelay := 400 * 24 * time.Hour
	rng := newRand(7)
	batch := make([]*message.Ext, 0, 256)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if _, err := db.b.Send(ctx, batch); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := 0; i < n; i++ {
		d := logUniform(rng, time.Second, maxDelay)
		batch = append(batch, &message.Ext{Message: message.Message{Topic: "hz", Body: []byte(strconv.Itoa(i)),
			Properties: map[string]string{message.PropertyTimerDeliverMS: strconv.FormatInt(start.Add(d).UnixMilli(), 10)}}})
		if len(batch) == cap(batch) {
			flush()
		}
	}
	flush()
	e := db.b.DelayEngine()
	settled := func() {
		if err := db.b.Store().WaitDispatched(ctx, db.b.Store().CommitLog().MaxOffset()); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for !e.Settled() {
			if time.Now().After(deadline) {
				t.Fatal("the timer engine did not settle")
			}
			time.Sleep(time.Millisecond)
		}
	}
	settled()
	wall := time.Now()
	for vc.Now().Before(start.Add(maxDelay + time.Minute)) {
		vc.Advance(max(time.Second, vc.Now().Sub(start)/64))
		settled()
	}
	got := db.pullAll(t, "hz", 0, 0)
	t.Logf("%d timer messages over 400 virtual days: %v wall time, status %+v", len(got), time.Since(wall).Round(time.Millisecond), e.Status())
	seen := make(map[string]bool, n)
	var last int64
	for _, m := range got {
		if seen[string(m.Body)] {
			t.Fatalf("%s delivered twice", m.Body)
		}
		seen[string(m.Body)] = true
		due, _ := strconv.ParseInt(m.Properties[message.PropertyTimerOutMS], 10, 64)
		if m.StoreTimestamp < due {
			t.Fatalf("%s delivered %d ms early", m.Body, due-m.StoreTimestamp)
		}
		if due < last {
			t.Fatalf("%s due %d delivered after one due %d", m.Body, due, last)
		}
		last = due
	}
	if len(seen) != n {
		t.Fatalf("%d of %d delivered", len(seen), n)
	}
}
