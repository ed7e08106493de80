// Package proccluster runs Bolide clusters of real processes for the
// compatibility suites of other clients (test/rocketmq-go, test/rocketmq-v5,
// modules of their own that import it): bolide-nameserver and bolide-broker
// started as child processes on free loopback ports, each with a temporary
// store, in layouts of one or more broker groups with or without a slave
// each; kill -9, SIGTERM and restart on the same port and store; the tail
// of every daemon's log for a failing test.
//
// A Harness holds the settings shared by one test binary (binaries, delay
// levels, transaction timers, extra flags) and its shared clusters: one per
// layout, started on first use and stopped by Close at the end of TestMain.
// Tests that kill or restart processes start a private cluster.
//
// The package is not a test file so that the test modules can import it
// (their module paths are under github.com/bolide-mq/bolide); only tests
// and test tools use it.
package proccluster
