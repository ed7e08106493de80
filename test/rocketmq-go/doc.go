// Package rocketmqgo proves that Apache RocketMQ's Go client
// (github.com/apache/rocketmq-client-go/v2, pinned in go.mod) works against
// a Bolide cluster unchanged, over RocketMQ's remoting protocol.
//
// The tests start real processes: a NameServer and one or two broker groups
// (broker-a, broker-b) built from this repository (../..), on free loopback
// ports with temporary data directories, and drive them only through the
// RocketMQ client, except where the Bolide SDK is the subject (the mixed
// consumer group and the interoperability tests) or a convenient observer
// (topic creation, consumer offsets, dead letters). v5interop_test.go adds
// RocketMQ 5's official Go client (github.com/apache/rocketmq-clients/golang/v5,
// also pinned; its own suite is test/rocketmq-v5): messages it sends over
// gRPC are consumed by this client and the other way round. The clusters
// come from internal/proccluster, shared with test/rocketmq-v5.
//
// Run them with scripts/compat-go.sh from the repository root, or here:
//
//	go test ./... -count=1 -timeout 15m
//
// Environment:
//
//	BOLIDE_BIN       a directory holding bolide-nameserver and bolide-broker
//	                 (default: built from ../.. once per run)
//	RMQGO_KEEP=1     keep the clusters' directories (logs, stores) after the run
//	RMQGO_LOG=level  the RocketMQ client's log level (default "warn"); the log
//	                 goes to $TMPDIR/rmqgo-client-<pid>.log, shown if the run fails;
//	                 the v5 client's to $TMPDIR/rmqgo-v5client-<pid>.log
//
// Each test creates topics and groups of its own; the clusters of each layout
// are shared by the tests that do not restart or kill a process, and the
// tests that do (offsets across restarts, the mixed group) start their own.
// A crash test kills a consumer in a child process: the test binary started
// again with RMQGO_CHILD set (see child_test.go).
//
// cmd/rmqbench is a small load generator with the RocketMQ client, to
// compare the broker's cost per message over remoting with `bolide bench`.
package rocketmqgo
