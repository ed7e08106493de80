package remoting

import (
	"github.com/bolide-mq/bolide/broker"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// adminClient is a client connected over this front end, as the admin
// requests list it.
type adminClient struct {
	ID, Addr, Language string
	Version            int32
	Consumers          []broker.ConsumerData // as its last heartbeat said
	conn               *rmq.Conn
}

// remotingClients lists the clients that have a session on a connection
// of this front end (session.go), one entry per connection.
func (f *Frontend) remotingClients() []adminClient {
	var out []adminClient
	for _, c := range f.srv.Conns() {
		cs, _ := c.Value().(*connState)
		if cs == nil {
			continue
		}
		s := &cs.sessionState
		s.smu.Lock()
		if s.sess != nil && !s.closed {
			out = append(out, adminClient{ID: s.clientID, Addr: c.RemoteAddr().String(), Language: s.language, Version: s.version,
				Consumers: s.hb.Consumers, conn: c})
		}
		s.smu.Unlock()
	}
	return out
}
