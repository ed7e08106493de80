// Package frontend is where protocols meet the broker's one port. Each
// protocol the broker speaks — Bolide's gRPC API, the framed data path,
// RocketMQ's remoting, and any added later — is a Frontend: a package of its
// own that adapts its wire to the broker core (package broker) and is
// registered with the Mux by whoever assembles the broker (package
// broker/server).
//
// The Mux is internal/portmux's, shared with the NameServer: it reads each
// connection's first HeadLen bytes and hands the connection, those bytes
// replayed, to the first front end that claims them; one that no front end
// claims is closed. Adding a protocol is a new Frontend and one more
// argument to NewMux: nothing in the core changes.
package frontend

import (
	"net"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/portmux"
)

// HeadLen is how many bytes of a new connection the Mux reads to sort it.
const HeadLen = portmux.HeadLen

// SniffTimeout bounds the wait for a new connection's first bytes.
const SniffTimeout = portmux.SniffTimeout

// Frontend is one protocol served on the broker's port (portmux.Protocol).
type Frontend = portmux.Protocol

// Mux accepts the broker's connections and hands each to the front end that
// claims it.
type Mux = portmux.Mux

// NewMux returns a mux over lis; Serve starts it.
func NewMux(lis net.Listener, log *zap.Logger, fes ...Frontend) *Mux {
	return portmux.NewMux(lis, log, fes...)
}
