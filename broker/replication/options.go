package replication

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/bolide-mq/bolide/ha"
	"github.com/bolide-mq/bolide/internal/membership"
)

// Replication modes.
const (
	// ModeAsync acknowledges a send after the master's own flush; slaves
	// follow as fast as they can.
	ModeAsync = "async"
	// ModeSync acknowledges a send only once InSyncReplicas in-sync slaves
	// hold it; otherwise the send fails (never a silent downgrade).
	ModeSync = "sync"
)

// HAPortOffset derives the HA address from the listen port (10911 → 10912,
// RocketMQ's haListenPort).
const HAPortOffset = 1

// Options configure master–slave replication (package ha).
type Options struct {
	// Mode is ModeAsync (default) or ModeSync.
	Mode string
	// InSyncReplicas is how many in-sync slaves must hold a message before
	// a sync-mode send is acknowledged (1).
	InSyncReplicas int
	// SlaveTimeout bounds a sync-mode send's wait for its slaves (3 s):
	// past it the send fails with FLUSH_SLAVE_TIMEOUT.
	SlaveTimeout time.Duration
	// MaxLagBytes: a slave further behind leaves the in-sync set (256 MiB).
	MaxLagBytes int64
	// HAListenAddr is where a master serves its slaves ("" = the listen
	// address's port + 1; port 0 picks a free port). Every broker binds it,
	// so a promoted slave serves slaves at once.
	HAListenAddr string
	// HAAdvertiseAddr is the HA address registered with the NameServers
	// ("" = the bound HA address, with the client address's host when it
	// binds all interfaces).
	HAAdvertiseAddr string
	// MasterHAAddr is a slave's master HA address; "" = learn it from the
	// NameServers' registration answers.
	MasterHAAddr string
	// HeartbeatInterval (1 s) and Timeout (5 s) of the HA connection:
	// either side drops a connection silent for Timeout.
	HeartbeatInterval time.Duration
	Timeout           time.Duration
	// MaxFrameBytes bounds one replication frame (256 KiB).
	MaxFrameBytes int
	// MetadataSyncInterval is how often a slave fetches topics and consumer
	// offsets from its master (3 s).
	MetadataSyncInterval time.Duration
	// ControllerAddrs are the controllers' addresses (NameServers running
	// a controller). Set, they enable controller mode: the broker's
	// configured id is its permanent replica id (>= 1), and the
	// controller leader decides which replica is the master (controller.go).
	ControllerAddrs []string
	// ControllerHeartbeat is how often the broker beats to every
	// controller (500 ms).
	ControllerHeartbeat time.Duration
	// ElectionPriority: among equally up-to-date candidates, a lower value
	// is preferred at election (0).
	ElectionPriority int32
}

// ControllerMode reports whether controllers decide the broker's role.
func (o *Options) ControllerMode() bool { return len(o.ControllerAddrs) > 0 }

// DefaultOptions are the replication defaults.
func DefaultOptions() Options {
	return Options{
		Mode:                 ModeAsync,
		InSyncReplicas:       1,
		SlaveTimeout:         3 * time.Second,
		MaxLagBytes:          256 << 20,
		HeartbeatInterval:    time.Second,
		Timeout:              5 * time.Second,
		MaxFrameBytes:        256 << 10,
		MetadataSyncInterval: 3 * time.Second,
		ControllerHeartbeat:  500 * time.Millisecond,
	}
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if o.Mode != ModeAsync && o.Mode != ModeSync {
		errs = append(errs, fmt.Errorf("broker: replication mode %q must be %q or %q", o.Mode, ModeAsync, ModeSync))
	}
	if o.InSyncReplicas < 1 || o.InSyncReplicas > 16 {
		errs = append(errs, fmt.Errorf("broker: in-sync replicas %d not in 1..16", o.InSyncReplicas))
	}
	if o.SlaveTimeout <= 0 || o.MaxLagBytes <= 0 || o.MetadataSyncInterval <= 0 {
		errs = append(errs, errors.New("broker: slave timeout, max lag bytes and metadata sync interval must be positive"))
	}
	if o.HeartbeatInterval <= 0 || o.Timeout <= o.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("broker: HA heartbeat interval %v must be positive and below the HA timeout %v", o.HeartbeatInterval, o.Timeout))
	}
	if o.MaxFrameBytes < 4096 || o.MaxFrameBytes > ha.MaxDataLen {
		errs = append(errs, fmt.Errorf("broker: HA max frame bytes %d not in 4096..%d", o.MaxFrameBytes, ha.MaxDataLen))
	}
	if o.ControllerMode() {
		if o.ControllerHeartbeat <= 0 || o.ControllerHeartbeat >= time.Minute {
			errs = append(errs, fmt.Errorf("broker: controller heartbeat %v must be positive and below a minute", o.ControllerHeartbeat))
		}
		if o.MasterHAAddr != "" {
			errs = append(errs, errors.New("broker: a master HA address cannot be configured in controller mode: the controller names the master"))
		}
		for _, a := range o.ControllerAddrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				errs = append(errs, fmt.Errorf("broker: controller address %q: %w", a, err))
			}
		}
	}
	return errors.Join(errs...)
}

// listenAddr is the address the HA server binds, given the broker's client
// listen address.
func (o *Options) listenAddr(clientListen string) (string, error) {
	if a := o.HAListenAddr; a != "" {
		return a, nil
	}
	a := membership.DeriveGossipAddr(clientListen, HAPortOffset)
	if a == "" {
		return "", fmt.Errorf("broker: cannot derive the HA address from %q; set the HA listen address", clientListen)
	}
	return a, nil
}

// advertised replaces an unspecified bound host with the client address's.
func advertised(bound, client string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ch, _, err := net.SplitHostPort(client); err == nil {
			return net.JoinHostPort(ch, port)
		}
	}
	return bound
}
