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
//   - Promote (promote.go) makes a slave the master with a new epoch (and
//     appends it to the epoch entries); a
//     NameServer refuses a master registration whose epoch is below the
//     highest it saw for the group, and a master so refused fences itself:
//     read-only, NOT_MASTER for sends (role.go). Role, id and epoch are
//     saved in <store dir>/config/ha.json.
//
// # Security of the HA link
//
// Config.Link, which the broker builds from its TLS and access control
// options, secures the HA connections: the broker's TLS mode applies to
// the HA listener as to its client port (tlsconf.Listen: off, permissive,
// enforcing; client certificates; certificate renewal), a slave dials its
// master with TLS when the broker dials other daemons with TLS
// (--tls-dial, on with --tls-mode enforcing), and a slave with an access
// key sends it, signed for each connection, in an AUTH frame before its
// HELLO. A master with ACL on checks it as a call between daemons (an
// admin user) and refuses a slave without it, or with a refused one
// (RefuseUnauthenticated: the slave logs why and retries with backoff).
// The metadata a slave fetches and a master pushes travels over gRPC
// (broker/remote), secured alike.
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
// In controller mode the periodic pull alone would lose a topic or group
// change made up to MetadataSyncInterval before the master dies (the new
// master never fetched it). So the master also pushes (metapush.go): after
// an admin change of its topic or subscription group table
// (Replicator.PushMetadata), it gives both tables, with their versions and
// its epoch and replica id, to every other member of its sync state set and
// every member being added (addresses from the controller's replica list)
// over BrokerHA.PushMetadata, and the admin call returns once each applied
// them. The set is read again at every attempt (a member removed meanwhile
// is not waited for); past MetadataPushTimeout (3 s) the call fails with
// FLUSH_SLAVE_TIMEOUT naming the members that lack the change: it stays on
// the master (no rollback) and reaches them by their next pull, but a
// failover before that would lose it, and an operator must know — as a
// sync send that timed out says so. Topics the broker creates itself
// (auto-created, retry, reply) are pushed in the background
// (TriggerMetadataPush). A replica joins the sync state set only once a
// push gave it the master's current tables (metadataCaughtUp), so a member
// that joined after a change holds it too. Consumer offsets and delay
// progress are not pushed: they change constantly and the pull carries
// them.
//
// A slave applies a push (Replicator.ApplyPush) only when it is a slave
// following that master in that epoch (an older epoch: CONTROLLER_FENCED;
// another master or an epoch it has not followed yet: NOT_MASTER, which the
// master retries), through the very path a pull takes (applyMetadata). In
// controller mode that path skips a table older than the one last applied
// — older epoch, or same epoch and lower version — so a pull answered
// before a push that overtook it does not undo the push; a higher epoch (a
// new master) always wins. Outside controller mode nothing is pushed and
// pulls apply as they always did.
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
// # Controller mode (automatic failover)
//
// With Options.ControllerAddrs set (bolide-broker --controller-addr), a
// Raft controller (package controller, embedded in NameServers) decides
// which replica is the master; the broker follows it (controller.go).
// The configured broker id is the broker's permanent replica id (>= 1). It
// registers with the NameServers as id 0 while it is master, else as its
// replica id, and registers at once after every role change.
//
//   - Heartbeats: one goroutine per controller keeps a Heartbeat stream open
//     (reopened after 100 ms doubling to 1 s) and sends a beat every
//     ControllerHeartbeat (500 ms) and at once after a role change: seq,
//     role, highest known epoch, CommitLog end, confirm offset, replica id,
//     addresses, election priority. Only the Raft leader's answers and
//     pushes count; the last one that answered as leader is the leader
//     shown in status and asked for AlterSyncStateSet and ElectMaster.
//   - Lease: the leader answers the master's beat seq with lease_ms; the
//     broker holds the lease until sendTime(seq) + lease_ms on its
//     monotonic clock, for that epoch only, and never shortens it. A master
//     accepts a send (and topic or group changes) only while it holds it,
//     and checks it again before acknowledging (after replication):
//     expired ⇒ NOT_MASTER "write lease expired before the
//     acknowledgement" (the message is stored and may reappear on a retry).
//   - Transitions (serialised under the Replicator's mu; a group state
//     whose master epoch is below the broker's epoch is ignored).
//     Becoming master, when the leader names this replica with an epoch E
//     above the broker's: stop the HA client, lift the dispatch limit,
//     AdoptQueueOffsets, add the topics its queues hold but its topic table
//     lacks (created on the old master after the last metadata sync; a Host
//     that is a TopicRecoverer), append (E, CommitLog end) to the epoch file, take
//     role MASTER (id 0) and epoch E (config/ha.json), adopt the sync state
//     set, beat at once (the lease comes with the answer to a MASTER beat),
//     wait for the lease (at most 4 beats, 1 s at least), register.
//     Becoming slave of M at E >= the broker's epoch: drop its own
//     slaves if it was master, forget the lease, take role SLAVE (id =
//     replica id) and epoch E, point the HA client at M's HA address and
//     reconnect at once, register. A group without a master (nobody to
//     elect) makes a master step down to a slave that follows nobody.
//     A broker always starts as a slave: it never resumes as master at an
//     old epoch; the controller sees a master that reports another role and
//     elects again, with a new epoch.
//   - Epoch entries (config/epochs, epochfile.go), kept in both modes: a
//     new master appends one; a slave takes its master's at every HA
//     handshake (protocol v2). In controller mode the HA client refuses a
//     master below the broker's epoch (MinEpoch) and, told TRUNCATE(fork,
//     E) by a master whose epoch E is at least the broker's and above its
//     last epoch entry, truncates its store to fork crash-safely
//     (store.TruncateTo) and its epoch entries, then reconnects.
//   - Sync state set (SSS): the master reviews it every 50 ms. A member
//     whose HA connection dropped or that is not in sync (ha.Server's
//     notion) is proposed for removal and still counted until the removal
//     is committed; a connected in-sync slave outside it is counted from
//     the moment its addition starts (the master's CommitLog end then) and
//     proposed once it acknowledged that end. Proposals go to the leader
//     (AlterSyncStateSet, fenced by master epoch and SSS epoch); the
//     answer's group is adopted; a refused proposal is retried after
//     250 ms with the group as then known.
//   - Sync mode: a send is refused before it is stored unless the committed
//     SSS holds at least InSyncReplicas replicas besides the master
//     (IN_SYNC_REPLICAS_NOT_ENOUGH), and acknowledged once every SSS member
//     and every member being added acknowledged its end
//     (ha.Server.WaitReplicatedBy), within SlaveTimeout. Async mode does
//     not wait; what the new master lacked at a failover is lost.
//   - Confirm offset: the smallest acknowledgement of the SSS members (the
//     master's end when alone), raised also by every acknowledged sync
//     send. In sync mode the master dispatches to its ConsumeQueues only up
//     to it (store.SetDispatchLimit), so consumers never see what a
//     failover could truncate.
//   - Promote asks the leader to elect this replica (ElectMaster,
//     designated; force = unclean) and waits until it took over.
//
// Outside controller mode a manual Promote refuses, unless forced, a slave
// that never replicated or whose log ends below its master's committed
// offset as last heard.
//
// The package knows its broker through Host, its master through
// MasterClient and the controllers through ControllerClient; it speaks no
// protocol itself.
package replication
