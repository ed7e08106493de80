package rocketmqgo_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	rmq5 "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/bolide-mq/bolide/internal/proccluster"
)

// The clusters are real processes (internal/proccluster): one per layout
// shared by the tests that leave the processes alone, private ones for the
// tests that kill or restart them.

type (
	cluster = proccluster.Cluster
	layout  = proccluster.Layout
)

const clusterName = proccluster.ClusterName

// delayLevels are the brokers' 18 delay levels (--delay-levels), shortened
// so that the delay and retry tests are quick: level 2 is the one the delay
// test checks; the retry levels (3 + reconsume times) are 1 s.
var delayLevels = func() []time.Duration {
	d := make([]time.Duration, 18)
	for i := range d {
		d[i] = time.Second
	}
	d[1] = 2 * time.Second
	return d
}()

// Broker timers shortened for the tests: the first transaction check-back
// comes after txnTimeout, later ones every txnCheckInterval.
const (
	txnTimeout       = time.Second
	txnCheckInterval = 2 * time.Second
)

var (
	harness   *proccluster.Harness
	oneGroup  = proccluster.OneGroup
	twoGroups = proccluster.TwoGroups
	layouts   = proccluster.Layouts()
	uniq      = proccluster.Uniq
	waitFor   = proccluster.WaitFor
)

func TestMain(m *testing.M) {
	lvl := os.Getenv("RMQGO_LOG")
	if lvl == "" {
		lvl = "warn"
	}
	rlog.SetLogLevel(lvl)
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role)) // the child's log is its standard output
	}
	// The RocketMQ client's log goes to a file, shown when the run fails.
	clientLog := filepath.Join(os.TempDir(), fmt.Sprintf("rmqgo-client-%d.log", os.Getpid()))
	_ = rlog.SetOutputPath(clientLog)
	// The RocketMQ 5 client's (v5interop_test.go) next to it; its logger
	// reads the environment at init, so it is made again.
	_ = os.Setenv("rocketmq.client.logRoot", os.TempDir())
	_ = os.Setenv("rocketmq.client.logFileName", fmt.Sprintf("rmqgo-v5client-%d.log", os.Getpid()))
	rmq5.ResetLogger()
	dir, cleanup, err := proccluster.Binaries()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rocketmq-go:", err)
		os.Exit(1)
	}
	keep := os.Getenv("RMQGO_KEEP") != ""
	harness = proccluster.New(proccluster.Options{Name: "rocketmq-go", BinDir: dir, DelayLevels: delayLevels,
		TxnTimeout: txnTimeout, TxnCheckInterval: txnCheckInterval, Keep: keep})
	code := m.Run()
	harness.Close(code != 0)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "rocketmq-go: the RocketMQ client's log (%s, level %s), last lines:\n%s\n", clientLog, lvl, proccluster.FileTail(clientLog, 300))
	}
	if code == 0 && !keep {
		_ = os.Remove(clientLog)
		_ = os.Remove(filepath.Join(os.TempDir(), fmt.Sprintf("rmqgo-v5client-%d.log", os.Getpid())))
	}
	cleanup()
	os.Exit(code)
}

func sharedCluster(t testing.TB, l layout) *cluster  { t.Helper(); return harness.Shared(t, l) }
func privateCluster(t testing.TB, l layout) *cluster { t.Helper(); return harness.Private(t, l) }
func forLayouts(t *testing.T, f func(t *testing.T, c *cluster)) {
	harness.ForLayouts(t, f)
}
