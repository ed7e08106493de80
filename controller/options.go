package controller

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/auth"
)

// Peer is one voter of the Raft group.
type Peer struct {
	ID       string
	RaftAddr string
}

// Options configure a Controller.
type Options struct {
	// ID is this controller's Raft server id.
	ID string
	// Peers is the fixed voter set, this controller included. Empty: a
	// single-node group of ID at the transport's address.
	Peers []Peer
	// RaftListen is the address the Raft transport binds (port 0 picks
	// one; the bound address is then advertised).
	RaftListen string
	// Dir holds the Raft log, stable store and snapshots. Empty with
	// InMemory: nothing is kept.
	Dir string
	// InMemory keeps the log and stable store in memory (tests).
	InMemory bool

	// BrokerTimeout: a broker silent this long is dead.
	BrokerTimeout time.Duration
	// Lease is the write lease granted to a master with each answered
	// beat; it runs from the broker's send time.
	Lease time.Duration
	// StreamGrace: a broker whose last heartbeat stream closed is dead
	// when it has not reconnected within it.
	StreamGrace time.Duration
	// ScanInterval is how often the leader looks for dead masters.
	ScanInterval time.Duration
	// UncleanElection lets the scan elect a replica outside the sync
	// state set when none inside it is alive (acknowledged messages may
	// be lost).
	UncleanElection bool

	// Guard is the access control of the controller's gRPC service
	// (auth.go): the hosting NameServer's. Nil allows every call.
	Guard *auth.Guard
	// Raft is the Raft transport's TLS and credentials (transport.go);
	// with Guard enabled, its connections are authenticated too.
	Raft RaftSecurity

	// RaftHeartbeat and RaftElectionTimeout are hashicorp/raft's
	// HeartbeatTimeout and ElectionTimeout.
	RaftHeartbeat       time.Duration
	RaftElectionTimeout time.Duration
}

// DefaultOptions are the LAN defaults of a single-node controller.
func DefaultOptions() Options {
	return Options{
		ID:                  "n0",
		RaftListen:          "127.0.0.1:9879",
		BrokerTimeout:       3 * time.Second,
		Lease:               2 * time.Second,
		StreamGrace:         time.Second,
		ScanInterval:        250 * time.Millisecond,
		RaftHeartbeat:       time.Second,
		RaftElectionTimeout: time.Second,
	}
}

// LoopbackOptions are a single in-memory controller on a free loopback port
// with timings cut for in-process clusters (tests, demos): a master silent
// for 1 s is replaced after its 600 ms lease.
func LoopbackOptions() Options {
	o := DefaultOptions()
	o.RaftListen = "127.0.0.1:0"
	o.InMemory = true
	o.BrokerTimeout = time.Second
	o.Lease = 600 * time.Millisecond
	o.StreamGrace = 300 * time.Millisecond
	o.ScanInterval = 50 * time.Millisecond
	o.RaftHeartbeat = 300 * time.Millisecond
	o.RaftElectionTimeout = 300 * time.Millisecond
	return o
}

// Validate checks every field and reports all problems at once.
func (o *Options) Validate() error {
	var errs []error
	if o.ID == "" {
		errs = append(errs, errors.New("controller: id must be set"))
	}
	if _, _, err := net.SplitHostPort(o.RaftListen); err != nil {
		errs = append(errs, fmt.Errorf("controller: raft_listen %q: %w", o.RaftListen, err))
	}
	if o.Dir == "" && !o.InMemory {
		errs = append(errs, errors.New("controller: dir must be set"))
	}
	seen := map[string]bool{}
	self := false
	for _, p := range o.Peers {
		if p.ID == "" || seen[p.ID] {
			errs = append(errs, fmt.Errorf("controller: peers: empty or repeated id %q", p.ID))
		}
		seen[p.ID] = true
		self = self || p.ID == o.ID
		if _, _, err := net.SplitHostPort(p.RaftAddr); err != nil {
			errs = append(errs, fmt.Errorf("controller: peers: %s=%q: %w", p.ID, p.RaftAddr, err))
		}
	}
	if len(o.Peers) > 0 && !self {
		errs = append(errs, fmt.Errorf("controller: peers do not include this controller's id %q", o.ID))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"broker_timeout", o.BrokerTimeout}, {"lease", o.Lease}, {"stream_grace", o.StreamGrace},
		{"scan_interval", o.ScanInterval}, {"raft_heartbeat", o.RaftHeartbeat},
		{"raft_election_timeout", o.RaftElectionTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("controller: %s must be > 0, not %v", d.name, d.v))
		}
	}
	if o.Lease >= o.BrokerTimeout && o.Lease > 0 {
		errs = append(errs, fmt.Errorf("controller: lease (%v) must be shorter than broker_timeout (%v)", o.Lease, o.BrokerTimeout))
	}
	return errors.Join(errs...)
}

// grace is how long a new leader elects nobody: a master granted a lease
// by the previous leader is either still beating (alive) or has been
// silent for the broker timeout, and its lease has run out.
func (o *Options) grace() time.Duration { return o.BrokerTimeout + o.Lease }

// ParsePeers parses "n0=host:port,n1=host:port" (empty: none).
func ParsePeers(s string) ([]Peer, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var peers []Peer
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("controller: peer %q is not id=host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controller: peer %q: %w", part, err)
		}
		peers = append(peers, Peer{ID: id, RaftAddr: addr})
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
	return peers, nil
}

// FormatPeers is ParsePeers' inverse.
func FormatPeers(peers []Peer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.ID + "=" + p.RaftAddr
	}
	return strings.Join(parts, ",")
}
