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
// of this front end.
func (f *Frontend) remotingClients() []adminClient {
	return nil
}
