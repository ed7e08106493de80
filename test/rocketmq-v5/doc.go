// Package rocketmqv5 tests Bolide with Apache RocketMQ's official
// RocketMQ 5 Go client (github.com/apache/rocketmq-clients/golang/v5,
// pinned in this module's go.mod), which speaks the gRPC protocol
// apache.rocketmq.v2.MessagingService: producers (sync, async, FIFO,
// delay, transactions with check-back), simple consumers (receive, ack,
// invisibility running out, change of invisible duration, tag filter) and
// push consumers (success, redelivery, dead letter), on clusters of real
// processes (internal/proccluster) with one and two broker groups; the
// interop of v5 messages with Bolide's SDK; POP consumption under kill -9
// (TestPopUnderFaults); access control with credentials (acl_test.go: a
// broker with ACL on, and an in-process NameServer and broker both with
// ACL on); and cmd/v5bench, the load of scripts/bench-v5.sh.
//
// The access point is the NameServer's address. The client dials TLS
// unless the environment sets rocketmq.client.enableSsl=false, and the
// broker serves TLS and plaintext on one port: TestPlaintext runs in a
// child process with TLS off.
//
// Run it with scripts/compat-v5.sh (make compat-v5); make pop-faults runs
// the fault test at full size.
package rocketmqv5
