package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/commitlog"
	"github.com/bolide-mq/bolide/message"
)

// ship copies everything committed in the master's log to the slave's, as
// replication does.
func ship(t *testing.T, master, slave *Store) {
	t.Helper()
	for {
		off := slave.CommitLog().MaxOffset()
		chunk, next, err := master.CommitLog().ReadChunk(off, 32<<10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if next == off {
			return
		}
		if _, err := slave.CommitLog().AppendRaw(context.Background(), off, chunk); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplicaStoreBuildsQueuesAndPromotes: a slave store fed the master's
// bytes builds the same queues and index; after AdoptQueueOffsets it takes
// messages that continue every queue where the master left it.
func TestReplicaStoreBuildsQueuesAndPromotes(t *testing.T) {
	for _, flush := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		t.Run(flush.String(), func(t *testing.T) {
			ctx := context.Background()
			mo := testOptions(t.TempDir(), flush)
			mo.Retention.MaxAge = time.Nanosecond
			mo.Retention.DeleteHours = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}
			mo.Retention.MaxPerRun = 2
			mo.RetentionInterval = time.Hour
			master, err := Open(mo, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer master.Close()
			for i := 0; i < 3000; i++ {
				if _, err := master.Put(ctx, newMsg("R", int32(i%3), i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := master.Flush(); err != nil {
				t.Fatal(err)
			}
			// Retention deletes only what dispatch has indexed.
			if err := master.WaitDispatched(ctx, master.CommitLog().MaxOffset()); err != nil {
				t.Fatal(err)
			}
			if n, err := master.RunRetention(time.Now()); err != nil || n < 1 {
				t.Fatalf("retention deleted %d segments: %v", n, err)
			}
			minOff := master.CommitLog().MinOffset()
			slaveDir := t.TempDir()
			so := testOptions(slaveDir, flush)
			slave, err := Open(so, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { slave.Close() }()
			if err := slave.StartAt(minOff); err != nil {
				t.Fatal(err)
			}
			ship(t, master, slave)
			if err := slave.CommitLog().Flush(); err != nil {
				t.Fatal(err)
			}
			if err := slave.WaitDispatched(ctx, master.CommitLog().MaxOffset()); err != nil {
				t.Fatal(err)
			}
			if err := master.WaitDispatched(ctx, master.CommitLog().MaxOffset()); err != nil {
				t.Fatal(err)
			}
			for q := int32(0); q < 3; q++ {
				mMin, mMax := master.QueueOffsets("R", q)
				sMin, sMax := slave.QueueOffsets("R", q)
				if sMax != mMax || sMin < mMin {
					t.Fatalf("queue %d: slave [%d, %d), master [%d, %d)", q, sMin, sMax, mMin, mMax)
				}
				res, err := slave.GetMessages("R", q, sMin, 5, 1<<20, nil)
				if err != nil || res.Status != Found {
					t.Fatalf("slave read of queue %d at %d: %v %v", q, sMin, res.Status, err)
				}
				m, _ := message.Decode(res.Records[0])
				if m.QueueOffset != sMin || m.QueueID != q {
					t.Fatalf("queue %d first message: queue offset %d", q, m.QueueOffset)
				}
			}
			if got, err := slave.QueryByKey("R", "key-2999", 0, time.Now().UnixMilli()+1000, 2); err != nil || len(got) != 1 {
				t.Fatalf("slave index: %v %v", got, err)
			}
			// Restart the slave, then promote it.
			if err := slave.Close(); err != nil {
				t.Fatal(err)
			}
			if slave, err = Open(so, nil); err != nil {
				t.Fatal(err)
			}
			if slave.CommitLog().MinOffset() != minOff {
				t.Fatalf("reopened slave starts at %d, want %d", slave.CommitLog().MinOffset(), minOff)
			}
			ship(t, master, slave) // nothing new, but the stream resumes
			if _, err := master.Put(ctx, newMsg("R", 0, 3000)); err != nil {
				t.Fatal(err)
			}
			ship(t, master, slave)
			if err := slave.AdoptQueueOffsets(ctx); err != nil {
				t.Fatal(err)
			}
			if err := master.WaitDispatched(ctx, master.CommitLog().MaxOffset()); err != nil {
				t.Fatal(err)
			}
			for q := int32(0); q < 3; q++ {
				res, err := slave.Put(ctx, newMsg("R", q, 4000+int(q)))
				if err != nil {
					t.Fatal(err)
				}
				_, mMax := master.QueueOffsets("R", q)
				if res.QueueOffset != mMax {
					t.Fatalf("promoted slave put queue %d at queue offset %d, master's queue ends at %d", q, res.QueueOffset, mMax)
				}
			}
		})
	}
}

// TestStartAtRefusesNonEmpty: only an empty store can move its start.
func TestStartAtRefusesNonEmpty(t *testing.T) {
	s, err := Open(testOptions(t.TempDir(), commitlog.FlushAsync), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Put(context.Background(), newMsg("X", 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAt(256 << 10); err == nil {
		t.Fatal(fmt.Sprintf("StartAt accepted a store holding %d bytes", s.CommitLog().MaxOffset()))
	}
}
