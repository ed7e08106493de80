// Package nameserver is Bolide's NameServer as a library: a route table of
// topics, broker groups and clusters that brokers keep fresh by registering
// every 30 s, served over gRPC (proto/bolide/v1/nameserver.proto).
//
// NameServers are stateless and never talk to each other; a broker registers
// with every one of them. The table follows RocketMQ's RouteInfoManager:
//
//	topic       -> broker name -> queue data    (taken from masters only)
//	broker name -> cluster, addresses by broker id (0 = master)
//	cluster     -> broker names
//	broker addr -> liveness (last registration, timeout, data version, ...)
//
// A broker leaves the table in three ways: it unregisters on a clean stop;
// its gossip node leaves or is declared dead (membership, seconds); or it
// stays silent longer than its heartbeat timeout (the sweep, 120 s by
// default, the slow and authoritative path).
//
// Membership is an accelerator, never the authority: a broker removed
// because its gossip node was declared dead comes back with its next
// registration, and a registered broker whose gossip node is missing from
// the pool (never joined, wrongly declared dead, partitioned) is joined by
// the NameServer so that it is watched again.
package nameserver
