// Package controller is Bolide's failover controller: a Raft group of one
// or three members, embedded in NameServers (bolide-nameserver
// --controller), that decides for every broker group which replica is the
// master, under which master epoch, and which replicas form the sync state
// set (SSS: the replicas holding every acknowledged message). Brokers in
// controller mode heartbeat to every controller and follow the leader's
// decisions. The design follows RocketMQ 5's controller mode (RIP-44) and
// adds write leases; docs/failover.md is the operator's view.
//
// # State (the Raft log)
//
// The FSM (fsm.go) holds, per broker name:
//
//	Group{ cluster; replicas{id → addr, ha_addr}; master_id (0 = none);
//	       master_epoch (0 before the first election); sss (sorted ids); sss_epoch }
//
// It is pure and deterministic: Apply reads no clock, no randomness and does
// no I/O, so every controller replaying the log reaches the same state.
// Snapshots are the state as JSON. Liveness is not in the log (below).
//
// # Commands
//
// Log entries are JSON Commands; the leader decides, the FSM re-validates
// the decision against the committed state and refuses a stale one:
//
//	register   {name, cluster, id, addr, ha_addr}  add a replica or change its addresses
//	elect      {name, new_master (0 = none), expect_master, expect_epoch, min_epoch, reason, unclean}
//	           refused unless (master_id, master_epoch) == (expect_master, expect_epoch);
//	           new_master must exist and, unless unclean or the group's first
//	           election, be in the SSS. Effect: master_epoch =
//	           max(master_epoch+1, min_epoch) (min_epoch: first elections), sss={new},
//	           sss_epoch+1. new_master 0 only clears master_id (epoch and SSS
//	           stay: the next election bumps the epoch, and the old SSS members
//	           remain the only clean candidates).
//	alter_sss  {name, master_id, master_epoch, sss_epoch, new_sss}
//	           RocketMQ's fence: the requester is the master, both epochs match,
//	           every member exists (the leader checked they are alive before
//	           proposing), the master stays in. Effect: sss=new, sss_epoch+1.
//	remove_rep {name, id}  forget a replica that is not the master
//
// # Liveness (outside the log)
//
// Every controller, leader or not, records each beat it receives: last
// seen (monotonic clock), open streams, reported epoch, role, max offset,
// priority. A replica is alive while its last beat is younger than
// BrokerTimeout (3 s) and, when none of its streams is open, its last
// stream closed less than StreamGrace (1 s) ago: kill -9 is seen in about
// a second, a stream blip is not a failover. A new leader therefore starts
// with a filled table.
//
// # Timing and elections (leader only)
//
// The leader scans every ScanInterval (250 ms). A master is dead when it is
// not alive, or when its beat reports a role other than MASTER at the
// current master epoch (it restarted; it stays a candidate and may be
// elected again, at epoch+1). For a dead master the leader stops granting
// leases in the group, waits until the last lease it granted has run out
// (grant receive time + Lease), then commits an election: the best of
// SSS ∩ alive by (reported epoch desc, max offset desc, priority asc, id
// asc), all compared as int64; when nobody qualifies and UncleanElection is
// set, the best alive replica (logged at error level, counted in
// bolide_controller_unclean_elections_total); else master_id 0 (the group
// is read-only until an SSS member is alive again, and is then elected).
// A group's very first election happens on its first replica's first beat
// to the leader (SSS = {it}, epoch 1; or the epoch the replica reports + 1
// when that is higher: a controller that lost its state must not elect at
// an epoch the brokers have already seen, they would ignore it).
//
// After winning Raft leadership a controller commits a barrier (its FSM is
// then current) and elects nobody for BrokerTimeout + Lease: any master
// the previous leader granted a lease has either kept beating (alive) or
// has been silent for BrokerTimeout and its lease has ended.
//
// ElectMaster (operators) elects a designated replica (alive, and in the
// SSS unless unclean; the current master is a no-op) or the best candidate
// when the master is not alive. It also waits for the master's last lease
// and, shortly after a leadership change, for Lease + the Raft election
// timeout from the leadership's start.
//
// # Wire (proto/bolide/v1/controller.proto)
//
// Heartbeat is a bidi stream per broker and controller. Each BrokerBeat
// {cluster, broker_name, replica_id ≥ 1, addr, ha_addr, epoch, role,
// max_offset, confirm_offset, priority, seq} is answered by a
// ControllerBeat{status, seq, leader, leader_id, group, lease_ms}:
//
//   - On the leader, the beat first commits what it changes (a new replica
//     or new addresses; the group's first election). status OK.
//   - On a follower, status CONTROLLER_NOT_LEADER with leader_id; group is
//     still the committed state this follower holds, and the beat still
//     counts for its liveness table.
//   - lease_ms (= Lease) only on the leader's answer to the current master's
//     beat whose role is MASTER and epoch == master_epoch, and not while an
//     election is pending in the group. The broker holds it from the time it
//     sent beat seq.
//
// Whenever a committed command changes a group, and whenever this
// controller's leadership changes, every open stream of the group (every
// stream) gets a pushed ControllerBeat with seq 0 and no lease.
//
// AlterSyncStateSet and ElectMaster answer CONTROLLER_NOT_LEADER on
// followers, CONTROLLER_FENCED for a requester that is not the master or
// carries a stale master or set epoch, INVALID_PARAMETER for an unknown
// group, an unknown or dead member or a set without the master,
// CONTROLLER_MASTER_NOT_AVAILABLE when nobody (or not the designated
// replica) can be elected, TIMEOUT when the call's deadline passes before
// the master's lease ran out; they carry the group as committed. An
// unchanged set is OK. DescribeController answers on every member.
//
// Not done: RemoveReplica has no RPC yet (the command exists); a master
// is judged by the leader's view alone (an asymmetric partition between
// master and leader fails it over even if the followers still hear it).
//
// # Raft transport (transport.go)
//
// The controllers talk Raft over hashicorp/raft's NetworkTransport on a
// stream layer of their own that follows the hosting NameServer's security
// (Options.Raft, Options.Guard). The listener applies the TLS mode
// (tlsconf.Listen): off serves plain text, permissive both, enforcing TLS
// only (plain text is closed unanswered), with client certificates as
// --tls-client-auth asks. The dialer uses TLS when --tls-dial is set,
// always with enforcing (tlsconf.ClientConfig: --tls-ca verifies the peer;
// the NameServer's certificate is presented when asked).
//
// Before Raft sees a connection, inside the TLS (or plain) stream, the
// dialer sends a hello and the acceptor answers (big-endian, n ≤ 1024):
//
//	hello  = "BRF" version(1) | n uint16 | creds(n)
//	answer = status uint8 | n uint16 | body(n)
//	creds  = alen uint16 | authorization(alen) | date (the rest)
//
// authorization and date are the signed-date header (auth.NewHeader with
// the NameServer's --access-key and --secret-key, signed for each
// connection), both empty when the NameServer has no credentials. Status 0
// accepts, its body is the acceptor's own creds; status 1 refuses, its body
// is the reason (the guard's message), and the connection is closed. A
// first byte other than "B" (a Raft RPC from an older transport) is closed
// unanswered; the hello must arrive within 10 s.
//
// With ACL on, the acceptor checks the hello with the guard (Guard.Header,
// then Guard.Internal "controller raft": an admin user) and the dialer
// checks the answer's creds the same way: the authentication is mutual, so
// a controller with a wrong secret can neither send Raft RPCs nor receive
// the leader's log. Refusals are logged as rate-limited WARNs on the
// refusing side and surface as Raft's RPC errors on the other.
//
// With ACL off the handshake still happens (one format whatever the
// settings) but nothing is checked: credentials, empty or not, right or
// wrong, are accepted, and the answer's are ignored. A group may therefore
// mix controllers with and without credentials while ACL is off, and turn
// ACL on one NameServer at a time once every controller has an admin
// user's keys. Controllers from before this transport (no hello) cannot
// join a group of newer ones: upgrade them together.
//
// # Safety argument
//
// At most one master can accept writes at a time: a broker writes only
// while it holds a lease, granted only by the Raft leader to the master of
// the committed epoch, and running from the broker's own send time (so the
// broker's lease ends no later than grant receive time + Lease on the
// controller's clock, assuming clocks that run at the same rate). A new
// master is committed only after (a) this leader's last grant to the old
// master plus Lease has passed, with grants stopped meanwhile, and (b) at
// least BrokerTimeout + Lease since this controller became leader, which
// covers grants by a previous leader: that leader stopped being leader
// (hashicorp/raft steps down after LeaderLeaseTimeout without a quorum)
// before this one won. A broker becomes master only when the committed
// group names it with an epoch above every epoch it knows, so two brokers
// can never both be master of one epoch. Elections pick from the SSS, whose
// members hold every acknowledged message; the SSS can only change through
// alter_sss fenced by the current master epoch and sss_epoch, so a deposed
// master cannot shrink it.
package controller
