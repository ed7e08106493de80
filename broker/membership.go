package broker

import (
	"strconv"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/membership"
)

// GossipPortOffset derives a broker's gossip port from its listen port
// (10911 → 10914; 10912 is RocketMQ's HA port).
const GossipPortOffset = 3

// gossip is the broker's membership in the memberlist pool: NameServers
// learn from it within seconds that a broker died.
type gossip struct {
	node *membership.Node
}

// inPool reports whether a gossip address is a live member of the pool.
func (g *gossip) inPool(addr string) bool {
	for _, m := range g.node.Members() {
		if m.GossipAddr == addr {
			return true
		}
	}
	return false
}

// startGossip joins the pool unless membership is off.
func (b *Broker) startGossip() error {
	if b.opts.GossipAddr == "off" {
		return nil
	}
	bind := b.opts.GossipAddr
	if bind == "" {
		bind = membership.DeriveGossipAddr(b.opts.ListenAddr, GossipPortOffset)
	}
	o := membership.DefaultOptions()
	o.BindAddr = bind
	o.Role = membership.RoleBroker
	o.Profile = b.opts.GossipProfile
	o.SecretKey = b.opts.GossipKey
	o.Meta = map[string]string{
		membership.MetaAddr:       b.addr,
		membership.MetaCluster:    b.opts.Cluster,
		membership.MetaBrokerName: b.opts.BrokerName,
		membership.MetaBrokerID:   strconv.FormatInt(b.opts.BrokerID, 10),
	}
	node, err := membership.New(o, b.log.Named("gossip"))
	if err != nil {
		return err
	}
	b.gossip = &gossip{node: node}
	// Join the pool through each NameServer's gossip address as
	// registration answers reveal them.
	b.reg.onRegistered = func(ns string, ans RegistrationAnswer) {
		addr := ans.GossipAddr
		if addr == "" {
			return
		}
		// (Re)join whenever the NameServer is not in the pool: it may have
		// restarted since we last joined it.
		if b.gossip.inPool(addr) {
			return
		}
		if _, err := node.Join(addr); err != nil {
			b.log.Warn("join gossip pool failed", zap.String("nameServer", ns), zap.String("gossip", addr), zap.Error(err))
		}
	}
	return nil
}

// gossipAddr is the broker's memberlist address ("" while membership is off).
func (b *Broker) gossipAddr() string {
	if b.gossip == nil {
		return ""
	}
	return b.gossip.node.GossipAddr()
}

func (b *Broker) stopGossip() error {
	if b.gossip == nil {
		return nil
	}
	return b.gossip.node.Close()
}
