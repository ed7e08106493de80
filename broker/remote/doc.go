// Package remote holds the broker's calls to other daemons over bolide.v1
// gRPC: registration with the NameServers (NameServers), the controllers
// (Controllers) and, on a slave, the metadata fetched from its master and,
// on a master, pushed to its slaves (MasterClient). The broker core
// declares what it needs as interfaces (broker.NameServers and the
// replication package's clients) and never sees the protocol; the daemon,
// through package broker/server, plugs these implementations in.
//
// DialOptions secure every connection they open alike: TLS transport
// credentials when the broker dials with TLS (--tls-dial, on with
// --tls-mode enforcing; the servers verified against --tls-ca, else not
// verified), and per-call credentials when the broker has an access key:
// each call carries the signed-date header (authorization and
// x-mq-date-time, package auth) signed at the call, which the other
// daemon checks as a call between daemons (an admin user when its ACL is
// on).
package remote
