// Package porttls turns a daemon's TLS settings (tlsconf) into its
// multiplexed port's (internal/portmux, which imports nothing of the
// project).
package porttls

import (
	"github.com/bolide-mq/bolide/internal/portmux"
	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// For is the port's TLS for mode with the certificates of src; refusals
// are counted in tlsconf's refused-connection metric.
func For(mode tlsconf.Mode, src *tlsconf.Source) portmux.TLS {
	t := portmux.TLS{Config: src.ServerConfig, Refused: tlsconf.CountRefused}
	switch mode {
	case tlsconf.Off:
		t.Mode = portmux.Off
	case tlsconf.Enforcing:
		t.Mode = portmux.Enforcing
	default:
		t.Mode = portmux.Permissive
	}
	return t
}
