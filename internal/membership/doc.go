// Package membership is Bolide's gossip pool: a thin layer over
// hashicorp/memberlist shared by NameServers and brokers.
//
// Every daemon runs one Node. A node announces its role ("namesrv" or
// "broker") and a few string attributes (its service address, cluster,
// broker name and id) in memberlist's node meta, and reports other nodes
// joining and leaving through two callbacks. A NameServer uses the leave
// events to drop a crashed broker from its routes within seconds, instead of
// waiting for the 120 s heartbeat expiry, which stays the authoritative,
// slow path.
//
// Failure detection is memberlist's SWIM protocol: a node that stops
// answering probes is suspected, then declared dead; a node that calls Close
// announces its leave at once. The "lan" profile is memberlist's
// DefaultLANConfig: a dead node is declared about 5 s after it stops in a
// pool of three or fewer, and within 5-25 s in a larger pool (the suspicion
// timeout starts long and shrinks as other members confirm it). The "fast"
// profile is for tests and declares a dead node within one to two seconds
// on loopback.
//
// Gossip is in the clear unless Options.SecretKey is set (the daemons'
// --gossip-key): memberlist then encrypts and authenticates every message
// with AES-GCM under that key and, verifying both ways, drops anything
// else (counted as bad packets). Nodes with another key, or none, never
// join the pool, so an outsider can neither read the members' addresses
// nor announce a broker as dead.
package membership
