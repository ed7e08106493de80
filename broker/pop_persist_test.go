package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// popScenario pops 6 of 10 messages, acknowledges 3 and moves one's
// invisibility; it returns the handles still valid and the ones acked.
func popScenario(t *testing.T, b *server.Server, topic string, snapshotMidway bool) (valid, acked []string) {
	t.Helper()
	ctx := context.Background()
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: topic, QueueID: -1, MaxMessages: 6, Invisible: time.Hour})
	if len(got) != 6 {
		t.Fatalf("popped %d", len(got))
	}
	if snapshotMidway {
		if err := b.PopService().Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range got[:3] {
		if err := b.PopAck(ctx, "g", topic, p.Handle); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, p.Handle)
	}
	ch, err := b.ChangeInvisible(ctx, "g", topic, got[3].Handle, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	acked = append(acked, got[3].Handle) // replaced: invalid
	return []string{ch.Handle, got[4].Handle, got[5].Handle}, acked
}

// checkAfter checks the state a restarted or promoted broker serves: the
// acknowledged messages are not handed out again, the handles in flight
// still work, and only the 4 messages never handed out come next.
func checkAfter(t *testing.T, b *server.Server, topic string, valid, acked []string) {
	t.Helper()
	ctx := context.Background()
	for _, h := range acked {
		wantErrCode(t, "an old handle", b.PopAck(ctx, "g", topic, h), errcode.InvalidReceiptHandle)
	}
	next := pop(t, b, broker.PopRequest{Group: "g", Topic: topic, QueueID: -1, MaxMessages: 32, Invisible: time.Hour})
	if len(next) != 4 {
		t.Fatalf("popped %d after, want the 4 never handed out", len(next))
	}
	for _, p := range next {
		if p.Attempt != 1 {
			t.Fatalf("popped %+v", p)
		}
	}
	for _, h := range valid {
		if err := b.PopAck(ctx, "g", topic, h); err != nil {
			t.Fatalf("ack of a handle in flight: %v", err)
		}
	}
	for _, p := range next {
		if err := b.PopAck(ctx, "g", topic, p.Handle); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range b.PopStats("g", topic) {
		if st.InFlight != 0 || st.AckedOffset != 5 {
			t.Fatalf("stats %+v", st)
		}
	}
}

func startAt(t *testing.T, dir string, mutate ...func(*broker.Options)) *server.Server {
	t.Helper()
	opts := testOptions(dir)
	for _, f := range mutate {
		f(&opts)
	}
	b, err := newBroker(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPopRestart: the POP state survives a restart, after a clean close
// (snapshot at close) and after a close without a snapshot (an older
// snapshot, or none, and the POP log after it).
func TestPopRestart(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		kill, midway, corrupt, crash bool
	}{{name: "clean"}, {name: "no-snapshot", kill: true}, {name: "snapshot-and-log", kill: true, midway: true},
		{name: "corrupt-snapshot", corrupt: true}, {name: "crash-copy", midway: true, crash: true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := startAt(t, dir)
			if err := b.CreateTopic(broker.TopicConfig{Name: "rs", ReadQueueNums: 2, WriteQueueNums: 2, Perm: broker.PermReadWrite}, false); err != nil {
				t.Fatal(err)
			}
			sendN(t, b, "rs", 2, "m", 10, "")
			valid, acked := popScenario(t, b, "rs", tc.midway)
			before := b.PopStats("g", "rs")
			if tc.crash {
				// The files as a process killed now would leave them.
				crashed := testutil.CrashCopy(t, dir)
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
				b = startAt(t, crashed)
				defer b.Close()
				if after := b.PopStats("g", "rs"); !reflect.DeepEqual(before, after) {
					t.Fatalf("stats before %+v, after %+v", before, after)
				}
				checkAfter(t, b, "rs", valid, acked)
				return
			}
			if tc.kill {
				b.PopService().SkipSnapshotOnClose()
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.corrupt {
				// Unreadable: the whole POP log is applied instead.
				if err := os.WriteFile(filepath.Join(dir, "config", "popState.json"), []byte(`{"version":1,`), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b = startAt(t, dir)
			defer b.Close()
			if after := b.PopStats("g", "rs"); !reflect.DeepEqual(before, after) {
				t.Fatalf("stats before %+v, after %+v", before, after)
			}
			checkAfter(t, b, "rs", valid, acked)
		})
	}
}

// TestPopSlavePromotion: a slave follows the POP log; promoted after its
// master stopped, it serves POP at once, neither re-sending acknowledged
// messages nor losing the ones in flight.
func TestPopSlavePromotion(t *testing.T) {
	ctx := context.Background()
	master, mc := testBroker(t, haOpts(broker.ReplicationAsync))
	createTopic(t, mc, "pp", 2)
	slaveDir := t.TempDir()
	slaveOpts := func(o *broker.Options) {
		o.StoreDir = slaveDir
		o.Store.Dir = filepath.Join(slaveDir, "store")
		o.Store.CommitLog.Dir = ""
	}
	slave, _ := testBroker(t, haOpts(broker.ReplicationAsync), slaveOf(master, 1), slaveOpts)
	sendN(t, master, "pp", 2, "m", 10, "")
	valid, acked := popScenario(t, master, "pp", false)
	_, err := slave.Pop(ctx, broker.PopRequest{Group: "g", Topic: "pp", QueueID: -1, Invisible: time.Minute})
	if err == nil {
		t.Fatal("a slave popped")
	}
	waitCaughtUp(t, master, slave)
	// Topics reach the slave by metadata sync, every 100 ms here: a slave
	// promoted before its first sync would not know the topic.
	testutil.WaitFor(t, 5*time.Second, "the topic on the slave", func() error {
		if _, ok := slave.TopicFor("pp"); !ok {
			return fmt.Errorf("no topic pp on the slave")
		}
		return nil
	})
	want := master.PopStats("g", "pp")
	testutil.WaitFor(t, 10*time.Second, "the slave's POP state", func() error {
		if got := slave.PopStats("g", "pp"); !reflect.DeepEqual(got, want) {
			return fmt.Errorf("slave %+v, master %+v", got, want)
		}
		return nil
	})
	if err := master.Close(); err != nil {
		t.Fatal(err)
	}
	hc := pb.NewBrokerHAClient(dialTest(t, slave.Addr()))
	resp, err := hc.Promote(ctx, &pb.PromoteRequest{BrokerName: slave.Options().BrokerName})
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("promote: %v %v", err, resp.GetStatus())
	}
	checkAfter(t, slave, "pp", valid, acked)
}

// TestPopSnapshotAheadOfLog: a snapshot covering more of the POP log than
// the log holds (the log lost its tail in a machine crash) is dropped and
// the log alone rebuilds the state.
func TestPopSnapshotAheadOfLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startAt(t, dir)
	if err := b.CreateTopic(broker.TopicConfig{Name: "sa", ReadQueueNums: 1, WriteQueueNums: 1, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	sendN(t, b, "sa", 1, "m", 6, "")
	got := pop(t, b, broker.PopRequest{Group: "g", Topic: "sa", QueueID: 0, Invisible: time.Hour})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	short := testutil.CrashCopy(t, dir) // its POP log: the pop only
	b = startAt(t, dir)
	for _, p := range got[:3] {
		if err := b.PopAck(ctx, "g", "sa", p.Handle); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	later, err := os.ReadFile(filepath.Join(dir, "config", "popState.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(short, "config", "popState.json"), later, 0o644); err != nil {
		t.Fatal(err)
	}
	b = startAt(t, short)
	defer b.Close()
	if st := b.PopStats("g", "sa"); len(st) != 1 || st[0].InFlight != 6 || st[0].AckedOffset != 0 {
		t.Fatalf("stats %+v, want the log's state: 6 in flight", st)
	}
	for _, p := range got {
		if err := b.PopAck(ctx, "g", "sa", p.Handle); err != nil {
			t.Fatal(err)
		}
	}
}
