package tlsconf

import (
	"fmt"

	"github.com/bolide-mq/bolide/internal/portmux"
)

// Mode is how a listener treats TLS: the port multiplexer's modes, which
// every other listener (tlsconf.Listen) applies the same way.
type Mode = portmux.Mode

// The modes. The zero value is Permissive, the default: TLS and plain text
// on the same port, told apart by the first byte (0x16 opens a TLS
// handshake). Off serves plain text only; Enforcing serves TLS only, and a
// plain-text connection gets a clear error in its own protocol where one
// can be given, then is closed.
const (
	Permissive = portmux.Permissive
	Off        = portmux.Off
	Enforcing  = portmux.Enforcing
)

// ParseMode reads "off", "permissive" or "enforcing".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "permissive", "":
		return Permissive, nil
	case "off", "disabled":
		return Off, nil
	case "enforcing":
		return Enforcing, nil
	}
	return 0, fmt.Errorf("tls mode %q: want off, permissive or enforcing", s)
}

// ClientAuth is what a listener asks of a client's certificate.
type ClientAuth int

// The client certificate policies.
const (
	// ClientCertNone asks for none.
	ClientCertNone ClientAuth = iota
	// ClientCertOptional verifies one when the client presents it.
	ClientCertOptional
	// ClientCertRequire refuses a client without a valid one.
	ClientCertRequire
)

// ParseClientAuth reads "none", "optional" or "require".
func ParseClientAuth(s string) (ClientAuth, error) {
	switch s {
	case "none", "":
		return ClientCertNone, nil
	case "optional", "request":
		return ClientCertOptional, nil
	case "require", "required":
		return ClientCertRequire, nil
	}
	return 0, fmt.Errorf("tls client auth %q: want none, optional or require", s)
}

func (c ClientAuth) String() string {
	switch c {
	case ClientCertOptional:
		return "optional"
	case ClientCertRequire:
		return "require"
	}
	return "none"
}

// Config is a daemon's TLS: its listeners (server side) and its
// connections to other daemons (client side).
type Config struct {
	// Mode applies to every listener: the client port, the HA port, the
	// admin HTTP port.
	Mode Mode
	// CertFile and KeyFile are the PEM pair the listeners present,
	// reloaded when they change; both empty: a self-signed certificate.
	CertFile, KeyFile string
	// ClientCAFile holds the CAs that sign client certificates;
	// ClientAuth says whether to ask for one.
	ClientCAFile string
	ClientAuth   ClientAuth

	// Dial makes the daemon's own connections (to NameServers,
	// controllers, its master) use TLS. On by default in Enforcing mode.
	Dial bool
	// CAFile verifies the servers dialled; empty: they are not verified
	// (as RocketMQ's clients do), and the daemon says so at start.
	CAFile string
	// ServerName overrides the name verified in their certificates.
	ServerName string
}
