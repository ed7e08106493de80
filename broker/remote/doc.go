// Package remote holds the broker's calls to other daemons over bolide.v1
// gRPC: registration with the NameServers (NameServers) and, on a slave,
// the metadata fetched from its master. The broker core declares what it
// needs as interfaces (broker.NameServers and the replication package's
// master client) and never sees the protocol; the daemon, through package
// broker/server, plugs these implementations in.
package remote
