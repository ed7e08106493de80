package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// ClientConnection is one client connected to a broker as a producer or a
// consumer of a group.
type ClientConnection struct {
	// BrokerName and BrokerAddr are the broker the client is connected to
	// (a client connects to the master and, to read from them, to slaves).
	BrokerName, BrokerAddr string
	ClientID               string
	RemoteAddr             string
	// Language and Version as the client announced them: "GO" and the
	// gRPC user agent for Bolide's SDK, RocketMQ's language and version
	// number for remoting clients, the x-mq-language and
	// x-mq-client-version headers for RocketMQ 5 clients.
	Language, Version string
	// Protocol is "bolide", "remoting" or "grpc-v5".
	Protocol string
	// Consumers only: PUSH, PULL, POP or SIMPLE; the model; topic → the
	// subscription's expression.
	ConsumeType    string
	MessageModel   MessageModel
	Subscriptions  map[string]string
	ConnectedSince time.Time
	LastHeartbeat  time.Time
}

// GroupConnections are the clients connected as producers and as
// consumers of a group, on every broker that answered.
type GroupConnections struct {
	Group     string
	Producers []ClientConnection
	Consumers []ClientConnection
	// Unanswered are the brokers (by address) that could not be asked,
	// with why; their clients are missing from the lists.
	Unanswered map[string]error
}

// GroupConnections asks every broker, masters and slaves (clients connect
// to both), about the clients connected as producers and as consumers of
// group (mqadmin's producerConnection and consumerConnection). The lists
// are sorted by client id, then broker. A broker that does not answer is
// reported in Unanswered; when none answers, the result is an error.
func (a *Admin) GroupConnections(ctx context.Context, group string) (*GroupConnections, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := message.ValidateGroup(group); err != nil {
		return nil, codeErr(pb.Code_ILLEGAL_GROUP, "%v", err)
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	type target struct{ name, addr string }
	var targets []target
	for _, bd := range ci.allBrokers() {
		for _, id := range slices.Sorted(maps.Keys(bd.Addrs)) {
			if addr := bd.Addrs[id]; addr != "" {
				targets = append(targets, target{bd.BrokerName, addr})
			}
		}
	}
	if len(targets) == 0 {
		return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "no broker registered")
	}
	resps := make([]*pb.GetGroupConnectionsResponse, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.brokerCall(ctx, t.addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
				var err error
				resps[i], err = c.GetGroupConnections(ctx, &pb.GetGroupConnectionsRequest{Group: group})
				return resps[i].GetStatus(), err
			})
		}()
	}
	wg.Wait()
	out := &GroupConnections{Group: group}
	for i, t := range targets {
		if err := errs[i]; err != nil {
			if isCoded(err) && !errors.Is(err, ErrBrokerUnreachable) {
				// The broker answered and refused (illegal name, no
				// permission): the same everywhere.
				return nil, fmt.Errorf("connections of %s on %s: %w", group, t.name, err)
			}
			if out.Unanswered == nil {
				out.Unanswered = make(map[string]error)
			}
			out.Unanswered[t.addr] = fmt.Errorf("%s: %w", t.name, err)
			continue
		}
		for _, p := range resps[i].GetProducers() {
			out.Producers = append(out.Producers, connectionFromProto(t.name, t.addr, p))
		}
		for _, c := range resps[i].GetConsumers() {
			cc := connectionFromProto(t.name, t.addr, c)
			cc.ConsumeType = c.GetConsumeType()
			if c.GetMessageModel() == pb.MessageModel_BROADCASTING {
				cc.MessageModel = Broadcasting
			}
			cc.Subscriptions = make(map[string]string, len(c.GetSubscriptions()))
			for _, s := range c.GetSubscriptions() {
				cc.Subscriptions[s.GetTopic()] = s.GetExpression()
			}
			out.Consumers = append(out.Consumers, cc)
		}
	}
	if len(out.Unanswered) == len(targets) {
		return nil, fmt.Errorf("connections of %s: no broker answered: %w", group, errors.Join(errs...))
	}
	order := func(x, y ClientConnection) int {
		return cmp.Or(cmp.Compare(x.ClientID, y.ClientID), cmp.Compare(x.BrokerName, y.BrokerName), cmp.Compare(x.BrokerAddr, y.BrokerAddr))
	}
	slices.SortStableFunc(out.Producers, order)
	slices.SortStableFunc(out.Consumers, order)
	return out, nil
}

func connectionFromProto(name, addr string, c *pb.ClientConnection) ClientConnection {
	cc := ClientConnection{BrokerName: name, BrokerAddr: addr, ClientID: c.GetClientId(), RemoteAddr: c.GetRemoteAddr(),
		Language: c.GetLanguage(), Version: c.GetVersion(), Protocol: c.GetProtocol()}
	if ms := c.GetConnectedSinceMs(); ms > 0 {
		cc.ConnectedSince = time.UnixMilli(ms)
	}
	if ms := c.GetLastHeartbeatMs(); ms > 0 {
		cc.LastHeartbeat = time.UnixMilli(ms)
	}
	return cc
}
