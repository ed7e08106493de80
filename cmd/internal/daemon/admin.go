package daemon

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/admin"
	"github.com/bolide-mq/bolide/internal/membership"
)

// AdminAuto is the default of --admin-listen: loopback, on the daemon's
// listen port + 2 (port 0 when the daemon listens on port 0), so several
// daemons on one host need no extra flags.
const AdminAuto = "auto"

// AdminFlagHelp is the help text of --admin-listen.
const AdminFlagHelp = `admin HTTP address (metrics, /healthz, /readyz, pprof): "auto" is 127.0.0.1 on the listen port + 2, "" or "off" disables`

// ResolveAdminAddr turns an --admin-listen value into an address: "" when
// the listener is off; derived reports an address made from listen (auto).
func ResolveAdminAddr(value, listen string) (addr string, derived bool, err error) {
	switch value {
	case "", "off":
		return "", false, nil
	case AdminAuto:
		_, port, err := net.SplitHostPort(listen)
		if err != nil {
			return "", false, fmt.Errorf("admin-listen: derive from listen %q: %w", listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535-2 {
			return "", false, fmt.Errorf("admin-listen: derive from listen %q: bad port", listen)
		}
		if p != 0 {
			p += 2
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), true, nil
	}
	if _, _, err := net.SplitHostPort(value); err != nil {
		return "", false, fmt.Errorf("admin-listen: %q is not host:port, auto or off: %w", value, err)
	}
	return value, false, nil
}

// Admin is a daemon's running admin listener; a nil *Admin is a listener
// that is off, and its methods do nothing.
type Admin struct {
	srv      *admin.Server
	addrFile string
}

// StartAdmin binds and serves the admin listener at addr (from
// ResolveAdminAddr; "" does nothing) with the build info, the Go and
// process metrics, the gossip port's bad packets and c, answering /readyz with ready, and writes the
// bound address to addrFile if set. A derived address that cannot be bound
// is logged and skipped (the port may belong to a neighbour); an explicit
// one is an error.
func StartAdmin(addr string, derived bool, addrFile string, c prometheus.Collector, ready func() error, lg *zap.Logger) (*Admin, error) {
	if addrFile != "" {
		if err := RemoveAddrFile(addrFile); err != nil {
			return nil, err
		}
	}
	if addr == "" {
		return nil, nil
	}
	// A daemon has one gossip node; its bad packets are counted process-wide.
	reg, err := admin.NewRegistry(Version, c, membership.BadPacketsCollector())
	if err != nil {
		return nil, err
	}
	srv, err := admin.New(admin.Options{Addr: addr, Gatherer: reg, Ready: ready}, lg.Named("admin"))
	if err != nil {
		if derived {
			lg.Warn("admin listener off: its derived address is taken; set --admin-listen", zap.Error(err))
			return nil, nil
		}
		return nil, err
	}
	srv.Start()
	a := &Admin{srv: srv, addrFile: addrFile}
	if addrFile != "" {
		if err := WriteAddrFile(addrFile, srv.Addr()); err != nil {
			_ = srv.Close(context.Background())
			return nil, err
		}
	}
	return a, nil
}

// Addr is the bound address ("" when off).
func (a *Admin) Addr() string {
	if a == nil {
		return ""
	}
	return a.srv.Addr()
}

// Close stops the listener (bounded by ctx) and removes the address file.
func (a *Admin) Close(ctx context.Context) error {
	if a == nil {
		return nil
	}
	err := a.srv.Close(ctx)
	if a.addrFile != "" {
		if rerr := RemoveAddrFile(a.addrFile); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
