// Package pop is POP consumption in the broker core: the broker hands out
// messages with a receipt handle and keeps each invisible to its consumer
// group until it is acknowledged or its invisibility runs out (RocketMQ 5's
// model, reference grpc_v5.md §6). docs/pop.md describes it for users; this
// comment is the reference for its formats.
//
// (Work in progress: the full description of the state machine, the
// receipt handle, the POP log record and the snapshot follows.)
package pop
