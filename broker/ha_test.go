package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/remote"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/ha"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// haOpts configures fast replication for tests.
func haOpts(mode string) func(*broker.Options) {
	return func(o *broker.Options) {
		o.Replication.Mode = mode
		o.Replication.HAListenAddr = "127.0.0.1:0"
		o.Replication.HeartbeatInterval = 100 * time.Millisecond
		o.Replication.Timeout = time.Second
		o.Replication.SlaveTimeout = 2 * time.Second
		o.Replication.MetadataSyncInterval = 100 * time.Millisecond
	}
}

// slaveOf makes a broker a slave of master, connecting to its HA address.
func slaveOf(master *server.Server, id int64) func(*broker.Options) {
	return func(o *broker.Options) {
		o.BrokerID = id
		o.Replication.MasterHAAddr = master.HAServerAddr()
	}
}

func brokerInfo(t *testing.T, c pb.BrokerClient) *pb.GetBrokerInfoResponse {
	t.Helper()
	info, err := c.GetBrokerInfo(context.Background(), &pb.GetBrokerInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitCaughtUp polls until the slave's CommitLog reaches the master's.
func waitCaughtUp(t *testing.T, master, slave *server.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, s := master.Store().CommitLog().MaxOffset(), slave.Store().CommitLog().MaxOffset()
		if m == s && slave.Store().DispatchedOffset() == s {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slave at %d (dispatched %d), master at %d", s, slave.Store().DispatchedOffset(), m)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sameLog checks that two CommitLogs hold the same bytes up to their (equal)
// maximum offset.
func sameLog(t *testing.T, a, b *commitlog.Log) {
	t.Helper()
	if a.MaxOffset() != b.MaxOffset() {
		t.Fatalf("max offsets %d and %d", a.MaxOffset(), b.MaxOffset())
	}
	end := a.MaxOffset()
	paths := map[int64]string{}
	for _, s := range b.Segments() {
		paths[s.Start] = s.Path
	}
	for _, s := range a.Segments() {
		if s.Start >= end || s.Start < b.MinOffset() {
			continue
		}
		fa, err := os.ReadFile(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := os.ReadFile(paths[s.Start])
		if err != nil {
			t.Fatal(err)
		}
		n := min(end, s.End) - s.Start
		if !bytes.Equal(fa[:n], fb[:n]) {
			t.Fatalf("segment %d differs", s.Start)
		}
	}
}

func send(ctx context.Context, c pb.BrokerClient, topic string, q int32, body string) error {
	resp, err := c.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg(topic, q, body, "", body)}})
	if err != nil {
		return err
	}
	return wire.FromStatus(resp.Status)
}

// pullAll reads a queue from offset 0 and returns the bodies.
func pullAll(t *testing.T, c pb.BrokerClient, topic string, q int32) []string {
	t.Helper()
	var out []string
	off := int64(0)
	for {
		resp, err := c.Pull(context.Background(), &pb.PullRequest{Topic: topic, QueueId: q, Offset: off, MaxMessages: 32, CommitOffset: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.FromStatus(resp.Status); err != nil {
			t.Fatalf("pull %s/%d at %d: %v", topic, q, off, err)
		}
		if resp.PullStatus != pb.PullStatus_FOUND {
			return out
		}
		for _, r := range resp.Records {
			m, err := message.Decode(r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(m.Body))
		}
		off = resp.NextOffset
	}
}

func TestReplicationPair(t *testing.T) {
	for _, mode := range []string{broker.ReplicationAsync, broker.ReplicationSync} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			master, mc := testBroker(t, haOpts(mode))
			createTopic(t, mc, "rep", 4)
			if mode == broker.ReplicationAsync {
				// Some messages before the slave exists: it copies them.
				for i := 0; i < 50; i++ {
					if err := send(ctx, mc, "rep", int32(i%4), fmt.Sprint("early-", i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			slave, sc := testBroker(t, haOpts(mode), slaveOf(master, 1))
			if mode == broker.ReplicationSync {
				testutil.WaitFor(t, 5*time.Second, "the slave in sync", func() error {
					if n := master.Replication().Server().InSync(); n != 1 {
						return fmt.Errorf("%d in sync", n)
					}
					return nil
				})
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 50; i++ {
						if err := send(ctx, mc, "rep", int32(i%4), fmt.Sprintf("w%d-%d", w, i)); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if mode == broker.ReplicationSync {
				// Acknowledged means the slave has it already.
				if s, m := slave.Store().CommitLog().MaxOffset(), master.Store().CommitLog().MaxOffset(); s != m {
					t.Fatalf("sync mode: slave at %d after the last ack, master at %d", s, m)
				}
			}
			waitCaughtUp(t, master, slave)
			sameLog(t, master.Store().CommitLog(), slave.Store().CommitLog())
			// Topics reach the slave by metadata sync; its queues match.
			testutil.WaitFor(t, 5*time.Second, "the slave's topics and queues", func() error {
				if _, ok := slave.TopicFor("rep"); !ok {
					return errors.New("no topic on the slave")
				}
				return nil
			})
			for q := int32(0); q < 4; q++ {
				if got, want := pullAll(t, sc, "rep", q), pullAll(t, mc, "rep", q); strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("queue %d: slave has %d messages, master %d", q, len(got), len(want))
				}
			}
			// A slave refuses writes.
			if err := send(ctx, sc, "rep", 0, "x"); !errors.Is(err, wire.ErrNotMaster) {
				t.Fatalf("send to the slave: %v", err)
			}
			resp, _ := sc.CreateTopic(ctx, &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: "other", ReadQueueNums: 1, WriteQueueNums: 1}})
			if err := wire.FromStatus(resp.GetStatus()); !errors.Is(err, wire.ErrNotMaster) {
				t.Fatalf("create topic on the slave: %v", err)
			}
			// Both sides report the replication.
			mi := brokerInfo(t, mc).Replication
			if mi.Role != "MASTER" || len(mi.Slaves) != 1 || !mi.Slaves[0].InSync || mi.Slaves[0].LagBytes != 0 ||
				mi.Slaves[0].AckOffset != master.Store().CommitLog().MaxOffset() || mi.Mode != mode || mi.InSyncSlaves != 1 {
				t.Fatalf("master's replication info: %+v", mi)
			}
			si := brokerInfo(t, sc)
			if si.Role != "SLAVE" || si.BrokerId != 1 || si.MasterAddr != master.Addr() || si.Replication.State != ha.StateReplicating ||
				si.Replication.AppliedOffset != master.Store().CommitLog().MaxOffset() || si.Replication.LagBytes != 0 ||
				si.Replication.MasterHaAddr != master.HAServerAddr() {
				t.Fatalf("slave's info: %+v", si)
			}
		})
	}
}

// TestSyncReplicationRefusesWithoutSlaves: sync mode never acknowledges a
// message no slave holds.
func TestSyncReplicationRefusesWithoutSlaves(t *testing.T) {
	ctx := context.Background()
	master, mc := testBroker(t, haOpts(broker.ReplicationSync), func(o *broker.Options) { o.Replication.SlaveTimeout = 300 * time.Millisecond })
	createTopic(t, mc, "s", 1)
	err := send(ctx, mc, "s", 0, "lonely")
	if !errors.Is(err, wire.ErrInSyncReplicasLacking) {
		t.Fatalf("no slave: %v", err)
	}
	if n := master.Store().CommitLog().MaxOffset(); n != 0 {
		t.Fatalf("refused message was stored: log at %d", n)
	}
	slave, _ := testBroker(t, haOpts(broker.ReplicationSync), slaveOf(master, 1))
	testutil.WaitFor(t, 5*time.Second, "a send with the slave in sync", func() error { return send(ctx, mc, "s", 0, "paired") })
	// A second in-sync slave is required: refused again.
	master.Replication().SetInSyncReplicas(2)
	if err := send(ctx, mc, "s", 0, "two"); !errors.Is(err, wire.ErrInSyncReplicasLacking) {
		t.Fatalf("two needed: %v", err)
	}
	master.Replication().SetInSyncReplicas(1)
	// The slave goes away: sends fail with a replication code, never succeed.
	if err := slave.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "a send after the slave returned", func() error {
		err := send(ctx, mc, "s", 0, "after")
		if errors.Is(err, wire.ErrInSyncReplicasLacking) {
			return nil
		}
		if err == nil {
			t.Fatal("a send was acknowledged with no slave")
		}
		if !errors.Is(err, wire.ErrFlushSlaveTimeout) {
			t.Fatalf("unexpected error: %v", err)
		}
		return err
	})
}

// TestPromoteSlave: a slave promoted after its master stopped takes sends
// that continue every queue, keeps its new role across a restart, and has
// the consumer offsets committed on either side.
func TestPromoteSlave(t *testing.T) {
	ctx := context.Background()
	master, mc := testBroker(t, haOpts(broker.ReplicationAsync))
	createTopic(t, mc, "p", 2)
	slaveDir := t.TempDir()
	slaveOpts := func(o *broker.Options) {
		o.StoreDir = slaveDir
		o.Store.Dir = filepath.Join(slaveDir, "store")
		o.Store.CommitLog.Dir = ""
	}
	slave, sc := testBroker(t, haOpts(broker.ReplicationAsync), slaveOf(master, 1), slaveOpts)
	for i := 0; i < 40; i++ {
		if err := send(ctx, mc, "p", int32(i%2), fmt.Sprint("m", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mc.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: "g", Offsets: []*pb.QueueOffset{{Topic: "p", QueueId: 0, Offset: 5}, {Topic: "p", QueueId: 1, Offset: 9}}}); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, master, slave)
	// The master's offsets reach the slave; one committed on the slave that
	// is larger reaches the master.
	testutil.WaitFor(t, 5*time.Second, "the master's offsets on the slave", func() error {
		if q, _ := sc.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "g", Topic: "p", QueueId: 1}); q.GetOffset() != 9 {
			return fmt.Errorf("slave's offset %d", q.GetOffset())
		}
		return nil
	})
	if r, err := sc.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: "g", Offsets: []*pb.QueueOffset{{Topic: "p", QueueId: 0, Offset: 12}}}); err != nil || wire.FromStatus(r.Status) != nil {
		t.Fatalf("commit on the slave: %v %v", err, r.GetStatus())
	}
	testutil.WaitFor(t, 5*time.Second, "the slave's offset on the master", func() error {
		if q, _ := mc.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "g", Topic: "p", QueueId: 0}); q.GetOffset() != 12 {
			return fmt.Errorf("master's offset %d", q.GetOffset())
		}
		return nil
	})
	if q, _ := sc.QueryOffset(ctx, &pb.QueryOffsetRequest{Group: "g", Topic: "p", QueueId: 1}); q.GetOffset() != 9 {
		t.Fatalf("slave's offset for queue 1 after the merge: %d", q.GetOffset())
	}
	if err := master.Close(); err != nil {
		t.Fatal(err)
	}
	hc := pb.NewBrokerHAClient(dialTest(t, slave.Addr()))
	resp, err := hc.Promote(ctx, &pb.PromoteRequest{BrokerName: "other"})
	if err != nil || !errors.Is(wire.FromStatus(resp.Status), wire.ErrInvalidParameter) {
		t.Fatalf("promote with the wrong name: %v %v", err, resp.GetStatus())
	}
	resp, err = hc.Promote(ctx, &pb.PromoteRequest{BrokerName: slave.Options().BrokerName})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("promote: %v %v", err, resp.GetStatus())
	}
	if resp.Epoch != 1 || resp.PreviousBrokerId != 1 || resp.CommitLogMaxOffset != master.Store().CommitLog().MaxOffset() {
		t.Fatalf("promote answered %+v", resp)
	}
	for q := int32(0); q < 2; q++ {
		r, err := sc.Send(ctx, &pb.SendRequest{Messages: []*pb.Message{msg("p", q, "after", "", "")}})
		if err != nil || wire.FromStatus(r.Status) != nil {
			t.Fatalf("send to the promoted slave: %v %v", err, r.GetStatus())
		}
		if r.Results[0].QueueOffset != 20 {
			t.Fatalf("queue %d continues at %d, want 20", q, r.Results[0].QueueOffset)
		}
	}
	info := brokerInfo(t, sc)
	if info.Role != "MASTER" || info.BrokerId != 0 || info.Epoch != 1 {
		t.Fatalf("promoted broker's info: role %s id %d epoch %d", info.Role, info.BrokerId, info.Epoch)
	}
	resp, _ = hc.Promote(ctx, &pb.PromoteRequest{})
	if !errors.Is(wire.FromStatus(resp.GetStatus()), wire.ErrInvalidParameter) {
		t.Fatalf("promote a master: %v", resp.GetStatus())
	}
	// The role survives a restart with the same configuration.
	b, err := os.ReadFile(filepath.Join(slaveDir, "config", "ha.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct { // replication's role file
		ConfiguredBrokerID int64  `json:"configuredBrokerId"`
		BrokerID           int64  `json:"brokerId"`
		Role               string `json:"role"`
		Epoch              int64  `json:"epoch"`
	}
	if err := json.Unmarshal(b, &f); err != nil || f.Role != "MASTER" || f.BrokerID != 0 || f.Epoch != 1 || f.ConfiguredBrokerID != 1 {
		t.Fatalf("ha.json: %s (%v)", b, err)
	}
	opts := slave.Options()
	if err := slave.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := newBroker(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Role() != broker.RoleMaster || again.Info().BrokerID != 0 || again.Epoch() != 1 {
		t.Fatalf("after a restart: %s id %d epoch %d", again.Role(), again.Info().BrokerID, again.Epoch())
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	// Started with another id, the configuration wins (the epoch stays).
	opts.BrokerID = 2
	again, err = newBroker(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Role() != broker.RoleSlave || again.Info().BrokerID != 2 || again.Epoch() != 1 {
		t.Fatalf("reconfigured: %s id %d epoch %d", again.Role(), again.Info().BrokerID, again.Epoch())
	}
}

// TestDivergedSlaveStops: a slave whose log holds records its (new) master
// does not have stops replicating, reports it, and keeps its log.
func TestDivergedSlaveStops(t *testing.T) {
	ctx := context.Background()
	m1, c1 := testBroker(t, haOpts(broker.ReplicationAsync))
	createTopic(t, c1, "d", 1)
	for i := 0; i < 10; i++ {
		if err := send(ctx, c1, "d", 0, fmt.Sprint("one-", i)); err != nil {
			t.Fatal(err)
		}
	}
	slaveDir := t.TempDir()
	slaveOpts := func(o *broker.Options) {
		o.StoreDir = slaveDir
		o.Store.Dir = filepath.Join(slaveDir, "store")
		o.Store.CommitLog.Dir = ""
	}
	slave, _ := testBroker(t, haOpts(broker.ReplicationAsync), slaveOf(m1, 1), slaveOpts)
	waitCaughtUp(t, m1, slave)
	opts := slave.Options()
	if err := slave.Close(); err != nil {
		t.Fatal(err)
	}
	// Another master of the same group with other records.
	m2, c2 := testBroker(t, haOpts(broker.ReplicationAsync))
	createTopic(t, c2, "d", 1)
	for i := 0; i < 20; i++ {
		if err := send(ctx, c2, "d", 0, fmt.Sprint("two-", i)); err != nil {
			t.Fatal(err)
		}
	}
	opts.Replication.MasterHAAddr = m2.HAServerAddr()
	s2, err := newBroker(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	before := s2.Store().CommitLog().MaxOffset()
	if err := s2.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "the diverged state", func() error {
		if st := s2.Replication().Info(); st.State != ha.StateDiverged {
			return fmt.Errorf("state %s", st.State)
		}
		return nil
	})
	info := s2.Replication().Info()
	if !strings.Contains(info.LastError, "DIVERGED") {
		t.Fatalf("last error %q", info.LastError)
	}
	if after := s2.Store().CommitLog().MaxOffset(); after != before {
		t.Fatalf("diverged slave's log moved from %d to %d", before, after)
	}
}

func dialTest(t *testing.T, addr string) *grpcClientConn {
	t.Helper()
	conn, err := remote.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

type grpcClientConn = grpc.ClientConn
