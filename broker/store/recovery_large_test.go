package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/message"
)

// TestRecoveryTimeLargeLog measures recovery after an unclean stop of a
// multi-GiB log with production segment and index sizes. It is a
// measurement, not a timed assertion: it reports the figures and fails only
// if recovery loses data. Run it with `make bench-store`
// (BOLIDE_RECOVERY_BENCH=1; BOLIDE_RECOVERY_GIB sets the size, default 4).
func TestRecoveryTimeLargeLog(t *testing.T) {
	if os.Getenv("BOLIDE_RECOVERY_BENCH") == "" {
		t.Skip("set BOLIDE_RECOVERY_BENCH=1 (make bench-store)")
	}
	gib := 4
	if v, err := strconv.Atoi(os.Getenv("BOLIDE_RECOVERY_GIB")); err == nil && v > 0 {
		gib = v
	}
	dir := os.Getenv("BOLIDE_RECOVERY_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLargeLogChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BOLIDE_LARGE_CHILD=1", envDir+"="+dir, "BOLIDE_LARGE_BYTES="+strconv.Itoa(gib<<30))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("writer should die of SIGKILL: %v", err)
	}
	var written, count int64
	var took float64
	if _, err := fmt.Sscanf(string(out), "wrote %d %d %f", &written, &count, &took); err != nil {
		t.Fatalf("writer output %q: %v", out, err)
	}
	t.Logf("writer: %d records, %.2f GiB in %.1fs (%.0f records/s through Store.Put, dispatch included)",
		count, float64(written)/(1<<30), took, float64(count)/took)
	opts := DefaultOptions(dir)
	start := time.Now()
	s, err := Open(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	openTook := time.Since(start)
	defer s.Close()
	r := s.Recovery()
	t.Logf("recovery after SIGKILL: %v (clean=%v, verified %d records / %.1f MiB from %d, redispatched %d records, log end %d)",
		openTook, r.CleanShutdown, r.Log.Records, float64(r.Log.End-r.Log.From)/(1<<20), r.Log.From, r.Redispatched, r.Log.End)
	if r.Log.End < written {
		t.Fatalf("recovered log ends at %d, the writer had written %d", r.Log.End, written)
	}
	if _, maxOff := s.QueueOffsets("large", 0); maxOff < count/4 {
		t.Fatalf("queue 0 holds %d messages of %d", maxOff, count)
	}
	fmt.Printf("RECOVERY gib=%d records=%d open=%v verified_mib=%.1f redispatched=%d\n",
		gib, count, openTook, float64(r.Log.End-r.Log.From)/(1<<20), r.Redispatched)
}

// TestLargeLogChild writes the large log and kills itself.
func TestLargeLogChild(t *testing.T) {
	if os.Getenv("BOLIDE_LARGE_CHILD") != "1" {
		t.Skip("child process of TestRecoveryTimeLargeLog")
	}
	limit, _ := strconv.ParseInt(os.Getenv("BOLIDE_LARGE_BYTES"), 10, 64)
	s, err := Open(DefaultOptions(os.Getenv(envDir)), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	body := make([]byte, 1024)
	batch := make([]*message.Ext, 32)
	res := make([]PutResult, 0, 32)
	var count int64
	start := time.Now()
	ctx := context.Background()
	for s.CommitLog().MaxOffset() < limit {
		for k := range batch {
			m := &message.Ext{Message: message.Message{Topic: "large", Body: body}, QueueID: int32(count+int64(k)) % 4}
			m.SetProperty(message.PropertyKeys, "k"+strconv.FormatInt(count+int64(k), 10))
			batch[k] = m
		}
		if _, err := s.PutBatch(ctx, batch, res[:0]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		count += int64(len(batch))
	}
	// Let the dispatcher finish so the measurement is of recovery, not of a
	// dispatch backlog; the checkpoint still lags by up to one interval.
	_ = s.WaitDispatched(ctx, s.CommitLog().MaxOffset())
	fmt.Printf("wrote %d %d %f\n", s.CommitLog().MaxOffset(), count, time.Since(start).Seconds())
	_ = os.Stdout.Sync()
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}
