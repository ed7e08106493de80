package rocketmqv5

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/bolide-mq/bolide/internal/proccluster"
)

// The clusters are real processes (internal/proccluster): one per layout
// shared by the tests that leave the processes alone, private ones for the
// tests that kill or restart them.

type cluster = proccluster.Cluster

// Broker timers shortened for the tests: the first transaction check-back
// comes after txnTimeout, later ones every txnCheckInterval.
const (
	txnTimeout       = time.Second
	txnCheckInterval = 2 * time.Second
)

// Environment of the test binary.
const (
	// envKeep keeps the clusters' directories (logs, stores).
	envKeep = "RMQV5_KEEP"
	// envLog is the client's log level (default info).
	envLog = "RMQV5_LOG"
	// envChild makes the test binary a child that runs one test with the
	// environment it was given (TestPlaintext).
	envChild = "RMQV5_CHILD"
)

var (
	harness *proccluster.Harness
	binDir  string
	uniq    = proccluster.Uniq
	waitFor = proccluster.WaitFor
	// clientLog is the RocketMQ client's log file.
	clientLog string
)

func TestMain(m *testing.M) {
	dir, cleanup, err := proccluster.Binaries("bolide-nameserver", "bolide-broker", "bolide")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rocketmq-v5:", err)
		os.Exit(1)
	}
	binDir = dir
	// The client logs to a file (rocketmq.client.logRoot), shown when the
	// run fails; its logger reads the environment at init, so it is made
	// again here.
	logRoot, err := os.MkdirTemp("", "rmqv5-client-log-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rocketmq-v5:", err)
		os.Exit(1)
	}
	lvl := os.Getenv(envLog)
	if lvl == "" {
		lvl = "info"
	}
	_ = os.Setenv("rocketmq.client.logRoot", logRoot)
	_ = os.Setenv("rocketmq.client.logLevel", lvl)
	rmq.ResetLogger()
	clientLog = filepath.Join(logRoot, "rocketmq_client_go.log")

	keep := os.Getenv(envKeep) != ""
	harness = proccluster.New(proccluster.Options{Name: "rocketmq-v5", BinDir: dir,
		TxnTimeout: txnTimeout, TxnCheckInterval: txnCheckInterval, Keep: keep})
	code := m.Run()
	harness.Close(code != 0)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "rocketmq-v5: the RocketMQ client's log (%s, level %s), last lines:\n%s\n",
			clientLog, lvl, proccluster.FileTail(clientLog, 200))
	}
	if code == 0 && !keep {
		_ = os.RemoveAll(logRoot)
	}
	cleanup()
	os.Exit(code)
}

// forLayouts runs f on the shared cluster of one broker group and of two,
// in parallel subtests.
func forLayouts(t *testing.T, f func(t *testing.T, c *cluster)) {
	harness.ForLayouts(t, f)
}
