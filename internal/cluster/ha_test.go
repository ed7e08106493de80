package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// fastHA shortens the replication timings for in-process tests.
func fastHA(mode string) func(*broker.Options) {
	return func(o *broker.Options) {
		o.Replication.Mode = mode
		o.Replication.HeartbeatInterval = 100 * time.Millisecond
		o.Replication.Timeout = time.Second
		o.Replication.SlaveTimeout = 500 * time.Millisecond
		o.Replication.MetadataSyncInterval = 100 * time.Millisecond
	}
}

func brokerClient(t *testing.T, addr string) pb.BrokerClient {
	t.Helper()
	conn, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewBrokerClient(conn)
}

func sendOne(bc pb.BrokerClient, topic string, q int32, body string) (*pb.SendResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := body[:min(len(body), 16)]
	resp, err := bc.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{{Topic: topic, QueueId: q, Body: []byte(body),
		Properties: map[string]string{message.PropertyKeys: key}}}})
	if err != nil {
		return nil, err
	}
	if err := wire.FromStatus(resp.Status); err != nil {
		return nil, err
	}
	return resp.Results[0], nil
}

// caughtUp waits until every slave's CommitLog ends where the master's does
// and everything is dispatched.
func caughtUp(t *testing.T, master *server.Server, slaves ...*server.Server) {
	t.Helper()
	if err := Poll(20*time.Second, func() error {
		m := master.Store().CommitLog().MaxOffset()
		for _, s := range slaves {
			if got := s.Store().CommitLog().MaxOffset(); got != m || s.Store().DispatchedOffset() != got {
				return fmt.Errorf("slave %s at %d (dispatched %d), master at %d", s.Addr(), got, s.Store().DispatchedOffset(), m)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// sameCommitLog checks the slave's CommitLog is byte-identical to the
// master's.
func sameCommitLog(t *testing.T, master, slave *server.Server) int64 {
	t.Helper()
	ml := master.Store().CommitLog()
	n, err := CompareCommitLogs(ml.Options().Dir, slave.Store().CommitLog().Options().Dir, ml.Options().SegmentSize, ml.MaxOffset())
	if err != nil {
		t.Fatalf("commit logs differ: %v", err)
	}
	return n
}

// loadGen sends to a master from several goroutines until stopped,
// recording every outcome by the time its send started.
type loadGen struct {
	bc      pb.BrokerClient
	topic   string
	stop    atomic.Bool
	wg      sync.WaitGroup
	next    atomic.Int64
	mu      sync.Mutex
	results []loadResult
}

// loadPad makes load messages about 2 KiB, so that a few thousand of them
// fill several 1 MiB segments.
var loadPad = strings.Repeat("p", 2000)

type loadResult struct {
	started, done time.Time
	err           error
}

func startLoad(bc pb.BrokerClient, topic string, senders int) *loadGen {
	g := &loadGen{bc: bc, topic: topic}
	for w := 0; w < senders; w++ {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for !g.stop.Load() {
				i := g.next.Add(1)
				start := time.Now()
				_, err := sendOne(g.bc, g.topic, int32(i%4), fmt.Sprintf("load-%d-%s", i, loadPad))
				g.mu.Lock()
				g.results = append(g.results, loadResult{started: start, done: time.Now(), err: err})
				g.mu.Unlock()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	return g
}

func (g *loadGen) end() {
	g.stop.Store(true)
	g.wg.Wait()
}

// since counts the outcomes of sends started after t.
func (g *loadGen) since(t time.Time) (ok int, byCode map[pb.Code]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	byCode = make(map[pb.Code]int)
	for _, r := range g.results {
		if r.started.Before(t) {
			continue
		}
		if r.err == nil {
			ok++
		} else {
			byCode[wire.CodeOf(r.err)]++
		}
	}
	return ok, byCode
}

// TestSlaveCutOffBySyncLoad: the replication link of the only slave goes
// through a fault proxy that blackholes it during sync-mode load. Sends then
// fail with a replication code, at first FLUSH_SLAVE_TIMEOUT while the
// silent slave is still counted in sync, then IN_SYNC_REPLICAS_NOT_ENOUGH at
// once; none succeeds. When the link heals the slave reconnects, catches up
// and rejoins, sends succeed again, and both CommitLogs are byte-identical.
func TestSlaveCutOffBySyncLoad(t *testing.T) {
	c := Start(t, Options{Broker: func(o *broker.Options) {
		fastHA(broker.ReplicationSync)(o)
		o.Store.CommitLog.SegmentSize = 1 << 20 // several segment ends
		o.MaxMessageSize = 64 << 10
	}})
	master := c.Broker(0)
	c.CreateTopic("cut", 4)
	proxy := startProxy(t, master.HAServerAddr())
	slave := c.StartSlave(0, 1, func(o *broker.Options) { o.Replication.MasterHAAddr = proxy.Addr() }).Broker()
	mc := brokerClient(t, master.Addr())
	waitInSync(t, master, 1)
	load := startLoad(mc, "cut", 8)
	defer load.end()
	if err := Poll(10*time.Second, func() error {
		if ok, _ := load.since(time.Time{}); ok < 2000 {
			return fmt.Errorf("%d acknowledged", ok)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole(true)
	cutAt := time.Now()
	if err := Poll(10*time.Second, func() error {
		if _, codes := load.since(cutAt); codes[pb.Code_IN_SYNC_REPLICAS_NOT_ENOUGH] < 50 {
			return fmt.Errorf("outcomes since the cut: %v", codes)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ok, codes := load.since(cutAt)
	t.Logf("while the slave was cut off: %d acknowledged, failures by code %v", ok, codes)
	if ok > 0 {
		t.Fatalf("%d sends started after the cut were acknowledged without the slave", ok)
	}
	for code := range codes {
		if code != pb.Code_IN_SYNC_REPLICAS_NOT_ENOUGH && code != pb.Code_FLUSH_SLAVE_TIMEOUT {
			t.Fatalf("unexpected failure codes %v", codes)
		}
	}
	info := masterSlaveInfo(t, master)
	if info.InSync || info.Connected {
		t.Fatalf("master still counts the cut-off slave: %+v", info)
	}
	// Heal: the proxy passes traffic again; connections that lived
	// through the blackhole are reset (they timed out anyway).
	proxy.Blackhole(false)
	proxy.Cut()
	healedAt := time.Now()
	if err := Poll(20*time.Second, func() error {
		if ok, _ := load.since(healedAt); ok < 2000 {
			return fmt.Errorf("%d acknowledged since the link healed", ok)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	load.end()
	caughtUp(t, master, slave)
	n := sameCommitLog(t, master, slave)
	t.Logf("after healing: %d bytes byte-identical over %d segments", n, len(master.Store().CommitLog().Segments()))
}

// TestOneSlaveCutOtherSatisfiesSync: with two slaves and InSyncReplicas 1,
// cutting one off does not fail any send; it catches up afterwards.
func TestOneSlaveCutOtherSatisfiesSync(t *testing.T) {
	c := Start(t, Options{Broker: func(o *broker.Options) {
		fastHA(broker.ReplicationSync)(o)
		o.Store.CommitLog.SegmentSize = 1 << 20
		o.MaxMessageSize = 64 << 10
	}})
	master := c.Broker(0)
	c.CreateTopic("cut2", 4)
	proxy := startProxy(t, master.HAServerAddr())
	cut := c.StartSlave(0, 1, func(o *broker.Options) { o.Replication.MasterHAAddr = proxy.Addr() }).Broker()
	other := c.StartSlave(0, 2).Broker()
	waitInSync(t, master, 2)
	load := startLoad(brokerClient(t, master.Addr()), "cut2", 8)
	defer load.end()
	time.Sleep(300 * time.Millisecond) // some load before the cut; nothing depends on it
	proxy.Blackhole(true)
	cutAt := time.Now()
	if err := Poll(10*time.Second, func() error {
		if info := masterSlaveInfoOf(t, master, 1); info.Connected {
			return errors.New("cut-off slave still connected")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // load with one slave out; nothing depends on it
	ok, codes := load.since(cutAt)
	t.Logf("with one of two slaves cut off: %d acknowledged, failures %v", ok, codes)
	if len(codes) > 0 || ok == 0 {
		t.Fatalf("sends failed although another slave was in sync: %d ok, %v", ok, codes)
	}
	proxy.Blackhole(false)
	proxy.Cut()
	waitInSync(t, master, 2)
	load.end()
	caughtUp(t, master, cut, other)
	sameCommitLog(t, master, cut)
	sameCommitLog(t, master, other)
}

func waitInSync(t *testing.T, master *server.Server, n int) {
	t.Helper()
	if err := Poll(20*time.Second, func() error {
		info, err := BrokerInfo(master.Addr())
		if err != nil {
			return err
		}
		if got := int(info.Replication.InSyncSlaves); got != n {
			return fmt.Errorf("%d in-sync slaves: %+v", got, info.Replication.Slaves)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func masterSlaveInfo(t *testing.T, master *server.Server) *pb.SlaveInfo {
	t.Helper()
	return masterSlaveInfoOf(t, master, 1)
}

func masterSlaveInfoOf(t *testing.T, master *server.Server, id int64) *pb.SlaveInfo {
	t.Helper()
	info, err := BrokerInfo(master.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Replication.Slaves {
		if s.BrokerId == id {
			return s
		}
	}
	t.Fatalf("master does not know slave %d: %+v", id, info.Replication.Slaves)
	return nil
}

// TestNewSlaveCopiesRetainedLog: a new, empty slave of a master whose log
// spans several segments, the oldest already deleted by retention, copies
// the whole retained log: its first segment starts at the master's minimum
// offset and the logs end byte-identical; its queues serve the same
// messages.
func TestNewSlaveCopiesRetainedLog(t *testing.T) {
	c := Start(t, Options{Broker: func(o *broker.Options) {
		fastHA(broker.ReplicationAsync)(o)
		o.Store.CommitLog.SegmentSize = 256 << 10
		o.MaxMessageSize = 64 << 10
		o.Store.Retention.MaxAge = time.Nanosecond
		o.Store.Retention.DeleteHours = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}
		o.Store.Retention.MaxPerRun = 2
		o.Store.RetentionInterval = time.Hour
	}})
	master := c.Broker(0)
	c.CreateTopic("join", 4)
	mc := brokerClient(t, master.Addr())
	body := make([]byte, 3000)
	for i := 0; master.Store().CommitLog().MaxOffset() < 8*(256<<10); i++ {
		copy(body, fmt.Sprintf("join-%06d-", i))
		if _, err := sendOne(mc, "join", int32(i%4), string(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := master.Store().Flush(); err != nil {
		t.Fatal(err)
	}
	if n, err := master.Store().RunRetention(time.Now()); err != nil || n != 2 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	minOff := master.Store().CommitLog().MinOffset()
	slave := c.StartSlave(0, 1).Broker()
	caughtUp(t, master, slave)
	if got := slave.Store().CommitLog().MinOffset(); got != minOff || minOff == 0 {
		t.Fatalf("slave's log starts at %d, the master's at %d", got, minOff)
	}
	n := sameCommitLog(t, master, slave)
	t.Logf("new slave copied %d bytes in %d segments starting at %d", n, len(slave.Store().CommitLog().Segments()), minOff)
	sc := brokerClient(t, slave.Addr())
	waitTopic(t, sc, "join")
	for q := int32(0); q < 4; q++ {
		mMin, mMax := master.Store().QueueOffsets("join", q)
		sMin, sMax := slave.Store().QueueOffsets("join", q)
		if sMax != mMax || sMin <= 0 {
			t.Fatalf("queue %d: slave [%d, %d), master [%d, %d)", q, sMin, sMax, mMin, mMax)
		}
		resp, err := sc.Pull(context.Background(), &pb.PullRequest{Topic: "join", QueueId: q, Offset: sMin, MaxMessages: 8, CommitOffset: -1})
		if err != nil || resp.PullStatus != pb.PullStatus_FOUND {
			t.Fatalf("pull queue %d of the slave at %d: %v %v", q, sMin, err, resp.GetPullStatus())
		}
	}
}

func waitTopic(t *testing.T, bc pb.BrokerClient, topic string) {
	t.Helper()
	if err := Poll(10*time.Second, func() error {
		tc, err := bc.GetTopicConfigs(context.Background(), &pb.GetTopicConfigsRequest{})
		if err != nil {
			return err
		}
		for _, c := range tc.Topics {
			if c.Name == topic {
				return nil
			}
		}
		return fmt.Errorf("no topic %s", topic)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestSlaveServesReadsWhileMasterDown is the broker side of consumers
// failing over to a slave: while the master is down the NameServer still
// routes the topic with the slave's address (id 1), the slave serves pulls
// of every queue and takes committed offsets; when the master is back, the
// routes name it again and it has the offsets committed on the slave.
func TestSlaveServesReadsWhileMasterDown(t *testing.T) {
	c := Start(t, Options{Broker: fastHA(broker.ReplicationSync)})
	master := c.Broker(0)
	c.CreateTopic("fo", 4)
	slave := c.StartSlave(0, 1).Broker()
	mc, sc := brokerClient(t, master.Addr()), brokerClient(t, slave.Addr())
	waitInSync(t, master, 1)
	for i := 0; i < 400; i++ {
		if _, err := sendOne(mc, "fo", int32(i%4), fmt.Sprint("fo-", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A consumer group read half of every queue from the master.
	ctx := context.Background()
	for q := int32(0); q < 4; q++ {
		if _, err := mc.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: "readers", Offsets: []*pb.QueueOffset{{Topic: "fo", QueueId: q, Offset: 50}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitTopic(t, sc, "fo")
	if err := Poll(10*time.Second, func() error {
		q, err := sc.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "readers", Topic: "fo", QueueId: 3})
		if err != nil || q.Offset != 50 {
			return fmt.Errorf("slave's offset %d %v", q.GetOffset(), err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.StopBroker(0) // the master goes away
	ns := c.NameServerAddrs()[0]
	if err := Poll(10*time.Second, func() error {
		r, err := route(t, ns, "fo")
		if err != nil {
			return err
		}
		if len(r.QueueDatas) != 1 || len(r.BrokerDatas) != 1 {
			return fmt.Errorf("route %+v", r)
		}
		addrs := r.BrokerDatas[0].BrokerAddrs
		if _, ok := addrs[0]; ok || addrs[1] != slave.Addr() {
			return fmt.Errorf("broker addresses %v", addrs)
		}
		return nil
	}); err != nil {
		t.Fatalf("route while the master is down: %v", err)
	}
	// The consumers read the rest from the slave, committing as they go.
	for q := int32(0); q < 4; q++ {
		off := int64(50)
		n := 0
		for {
			resp, err := sc.Pull(ctx, &pb.PullRequest{Group: "readers", Topic: "fo", QueueId: q, Offset: off, MaxMessages: 16, CommitOffset: off})
			if err != nil || wire.FromStatus(resp.Status) != nil {
				t.Fatalf("pull from the slave: %v %v", err, resp.GetStatus())
			}
			if resp.PullStatus != pb.PullStatus_FOUND {
				break
			}
			n += len(resp.Records)
			off = resp.NextOffset
		}
		if n != 50 {
			t.Fatalf("queue %d: read %d messages from the slave, want 50", q, n)
		}
		if _, err := sc.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: "readers", Offsets: []*pb.QueueOffset{{Topic: "fo", QueueId: q, Offset: off}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Writes are refused by the slave meanwhile.
	if _, err := sendOne(sc, "fo", 0, "x"); !errors.Is(err, wire.ErrNotMaster) {
		t.Fatalf("send to the slave: %v", err)
	}
	c.StartBroker(0) // the master is back
	master = c.Broker(0)
	mc = brokerClient(t, master.Addr())
	if err := Poll(10*time.Second, func() error {
		r, err := route(t, ns, "fo")
		if err != nil {
			return err
		}
		if addrs := r.BrokerDatas[0].BrokerAddrs; addrs[0] != master.Addr() || addrs[1] != slave.Addr() {
			return fmt.Errorf("broker addresses %v", addrs)
		}
		for q := int32(0); q < 4; q++ {
			r, err := mc.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "readers", Topic: "fo", QueueId: q})
			if err != nil || r.Offset != 100 {
				return fmt.Errorf("master's offset of queue %d: %d %v", q, r.GetOffset(), err)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("after the master came back: %v", err)
	}
	// Consumers continue on the master from there.
	waitInSync(t, master, 1)
	if _, err := sendOne(mc, "fo", 0, "after"); err != nil {
		t.Fatal(err)
	}
	resp, err := mc.Pull(ctx, &pb.PullRequest{Group: "readers", Topic: "fo", QueueId: 0, Offset: 100, MaxMessages: 16, CommitOffset: -1})
	if err != nil || resp.PullStatus != pb.PullStatus_FOUND || len(resp.Records) != 1 {
		t.Fatalf("pull from the master after it came back: %v %+v", err, resp)
	}
}

// TestPromoteFencesOldMaster: a slave promoted while its master still runs
// registers with a higher epoch; the NameServer routes the group to it and
// refuses the old master, which fences itself (read-only) and stays fenced
// after a restart.
func TestPromoteFencesOldMaster(t *testing.T) {
	c := Start(t, Options{Broker: fastHA(broker.ReplicationAsync)})
	old := c.Broker(0)
	c.CreateTopic("pf", 2)
	slave := c.StartSlave(0, 1).Broker()
	oc, sc := brokerClient(t, old.Addr()), brokerClient(t, slave.Addr())
	for i := 0; i < 100; i++ {
		if _, err := sendOne(oc, "pf", int32(i%2), fmt.Sprint("pf-", i)); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp(t, old, slave)
	waitTopic(t, sc, "pf")
	conn, err := dial(slave.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := pb.NewBrokerHAClient(conn).Promote(context.Background(), &pb.PromoteRequest{BrokerName: "broker-a"})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("promote: %v %v", err, resp.GetStatus())
	}
	if resp.Epoch != 1 || !resp.Registered {
		t.Fatalf("promote answered %+v", resp)
	}
	ns := c.NameServerAddrs()[0]
	r, err := route(t, ns, "pf")
	if err != nil {
		t.Fatal(err)
	}
	if addrs := r.BrokerDatas[0].BrokerAddrs; len(addrs) != 1 || addrs[0] != slave.Addr() {
		t.Fatalf("routes after the promotion: %v", addrs)
	}
	// The old master's next registration is refused: it fences itself.
	if err := Poll(10*time.Second, func() error {
		if old.Role() != broker.RoleFenced {
			return fmt.Errorf("old master is %s", old.Role())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := sendOne(oc, "pf", 0, "stale"); !errors.Is(err, wire.ErrNotMaster) {
		t.Fatalf("send to the fenced master: %v", err)
	}
	if info, err := BrokerInfo(old.Addr()); err != nil || info.Role != "FENCED" {
		t.Fatalf("fenced master's info: %v %v", info.GetRole(), err)
	}
	res, err := sendOne(sc, "pf", 1, "fresh")
	if err != nil || res.QueueOffset != 50 {
		t.Fatalf("send to the new master: %v %+v", err, res)
	}
	ci, err := pb.NewNameServerClient(dialT(t, ns)).GetClusterInfo(context.Background(), &pb.GetClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lb := range ci.Live {
		if lb.BrokerAddr == old.Addr() {
			t.Fatalf("fenced master is live on the NameServer: %+v", lb)
		}
		if lb.BrokerAddr == slave.Addr() && (lb.Epoch != 1 || lb.BrokerId != 0) {
			t.Fatalf("new master's live info %+v", lb)
		}
	}
	// Restarted with the same configuration it stays fenced.
	c.StopBroker(0)
	old = c.StartBroker(0)
	if old.Role() != broker.RoleFenced {
		t.Fatalf("restarted old master is %s", old.Role())
	}
	if _, err := sendOne(brokerClient(t, old.Addr()), "pf", 0, "stale"); !errors.Is(err, wire.ErrNotMaster) {
		t.Fatalf("send to the restarted fenced master: %v", err)
	}
}

func dialT(t *testing.T, addr string) *grpcConn {
	t.Helper()
	conn, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

type grpcConn = grpc.ClientConn
