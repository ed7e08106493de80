package broker

import "github.com/bolide-mq/bolide/broker/rolegate"

// roleSource is the role gate's view of replication's role state: the
// broker's master-only services lead while it says master.
type roleSource struct{ s *roleState }

var _ rolegate.Source = roleSource{}

func (r roleSource) IsMaster() bool           { return r.s.role() == RoleMaster }
func (r roleSource) Changes() <-chan struct{} { return r.s.changes() }
