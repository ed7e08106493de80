// Package offsets is the broker's consumer offset table: "topic@group" →
// queue → next offset to consume, persisted to
// <store dir>/config/consumerOffset.json in RocketMQ's layout:
//
//	{"offsetTable":{"orders@billing":{"0":42,"1":17}}}
//
// It also holds what metadata replication needs of the table (package
// broker/replication): a copy for the slaves, the master's merge of the
// offsets a slave took, and a slave's adoption of its master's table.
//
// Consumer offsets committed to a slave (consumers reading from it while
// the master is down) are kept in its table and remembered as local
// commits (Local). Each metadata sync sends the local commits; the master
// keeps, per queue, the larger of its own offset and the slave's
// (Table.MergeLarger), and answers with its whole table, which then
// replaces the slave's — except for queues with a local commit larger than
// the master's value, which keep the local one until the master has taken
// it (Local.Adopt). So when the master is back its table wins, except where
// a consumer got further on the slave. Offsets moved backwards on the
// master (a reset) reach the slave as they are; only fresh local commits
// can override them.
package offsets
