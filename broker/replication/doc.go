// Package replication is a broker's part in its group. A broker group is
// one master (broker id 0) and slaves (id > 0) holding byte-identical
// copies of its CommitLog (package ha).
//
//   - Every broker binds an HA listener (Options.HAListenAddr, default
//     listen port + 1) and registers it (ha_addr) with the NameServers; it
//     serves slaves while it is master. A slave learns its master's HA
//     address from the registration answers (master_ha_addr) unless
//     Options.MasterHAAddr is set, and replicates from it.
//   - Mode async acknowledges a send after the master's own flush. Mode sync
//     acknowledges it only once InSyncReplicas in-sync slaves acknowledged
//     its end, within SlaveTimeout: too few in-sync slaves fails the send
//     with IN_SYNC_REPLICAS_NOT_ENOUGH before it is stored, or while
//     waiting; a wait past SlaveTimeout fails with FLUSH_SLAVE_TIMEOUT (the
//     message is stored and may still reach the slaves: a retry can
//     duplicate it). Never a silent downgrade.
//   - A slave refuses sends and topic changes (NOT_MASTER), serves pulls,
//     offsets and lookups, and fetches topics, subscription groups,
//     consumer offsets and delayed delivery progress from its master every
//     MetadataSyncInterval (metadata.go).
//   - Promote (promote.go) makes a slave the master with a new epoch; a
//     NameServer refuses a master registration whose epoch is below the
//     highest it saw for the group, and a master so refused fences itself:
//     read-only, NOT_MASTER for sends (role.go). Role, id and epoch are
//     saved in <store dir>/config/ha.json.
//
// # Metadata replication
//
// A slave fetches its master's topics, subscription groups and consumer
// offsets every MetadataSyncInterval (and right after each HA handshake)
// through a MasterClient (broker/remote implements it over bolide.v1's
// BrokerHA.GetMetadata), and persists them, so that a slave promoted to
// master serves the same topics, treats each group as declared (FIFO,
// maximum delivery attempts, retry backoff) and resumes consumers where
// they were. The group table travels whole with its data version and
// replaces the slave's (a Host that is also a GroupHost takes it); a master
// that sends no version (an older one) leaves the slave's table alone.
//
// Consumer offsets committed to a slave (consumers reading from it while
// the master is down) are kept in its table and remembered as local
// commits. Each sync sends the local commits; the master keeps, per queue,
// the larger of its own offset and the slave's, and answers with its whole
// table, which then replaces the slave's — except for queues with a local
// commit larger than the master's value, which keep the local one until the
// master has taken it (package broker/offsets).
//
// The answer also carries the master's delayed delivery progress: its delay
// level offsets (delayOffset.json, as RocketMQ's slave copies it) and its
// timer engine's Progress, with the master's CommitLog end when they were
// read. The slave's delay service applies them once its own log is
// dispatched that far, and persists them, so a promoted slave resumes
// delivery where the master was.
//
// The package knows its broker through Host and its master through
// MasterClient; it speaks no protocol itself.
package replication
