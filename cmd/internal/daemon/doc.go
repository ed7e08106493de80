// Package daemon is what every Bolide daemon's main shares: the root
// command and its exit statuses (Command, Execute), the logger,
// configuration from flags, environment variables (BOLIDE_BROKER_*,
// BOLIDE_NAMESRV_*) and an optional YAML file, the version string, the
// address file, the admin listener, the run-until-signal lifecycle, and
// the release of the executable's start-up pages once serving
// (startpages.go); Serve puts them together around a server. Only cmd/
// imports it; libraries take plain Options structs.
package daemon

// Version is the build's version, set at link time:
//
//	go build -ldflags "-X github.com/bolide-mq/bolide/cmd/internal/daemon.Version=v1.2.3" ./cmd/...
var Version = "dev"
