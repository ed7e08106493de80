package broker

import (
	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// SubscriptionGroup is a consumer group's declared configuration
// (RocketMQ's SubscriptionGroupConfig).
type SubscriptionGroup = subgroup.Config

// SubscriptionGroups lists the declared subscription groups by name, with
// the table's version.
func (b *Broker) SubscriptionGroups() ([]SubscriptionGroup, DataVersion) {
	return b.subs.All()
}

// DataVersion is the version of a metadata table (topics, subscription
// groups): it changes with every change of the table.
type DataVersion = dataVersion

// TopicDataVersion is the topic table's version.
func (b *Broker) TopicDataVersion() DataVersion { return b.topics.dataVersion() }

// LookupSubscriptionGroup returns a group's declared configuration.
func (b *Broker) LookupSubscriptionGroup(group string) (SubscriptionGroup, bool) {
	return b.subs.Get(group)
}

// UpdateSubscriptionGroup declares (or redeclares) a subscription group.
// Only a master takes it.
func (b *Broker) UpdateSubscriptionGroup(c SubscriptionGroup) error {
	if err := b.checkWritable(); err != nil {
		return err
	}
	if err := validGroup(c.GroupName); err != nil {
		return err
	}
	if err := b.subs.Put(c); err != nil {
		return errcode.Errorf(errcode.SystemError, "%v", err)
	}
	b.log.Info("subscription group saved", zap.String("group", c.GroupName))
	b.reg.trigger() // the NameServers route FIFO groups (v5 assignments)
	return b.pushMetadata()
}

// DeleteSubscriptionGroup removes a group's declaration and, with
// cleanOffsets, its consumer offsets. A group that was never declared is
// no error (RocketMQ answers success too).
func (b *Broker) DeleteSubscriptionGroup(group string, cleanOffsets bool) error {
	if err := b.checkWritable(); err != nil {
		return err
	}
	if err := validGroup(group); err != nil {
		return err
	}
	if _, err := b.subs.Remove(group); err != nil {
		return errcode.Errorf(errcode.SystemError, "%v", err)
	}
	if cleanOffsets {
		b.offsets.RemoveGroup(group)
		if err := b.offsets.Persist(); err != nil {
			return storeError(err)
		}
	}
	b.log.Info("subscription group deleted", zap.String("group", group), zap.Bool("cleanOffsets", cleanOffsets))
	b.reg.trigger()
	return b.pushMetadata()
}

// replaceSubscriptionGroups makes the group table the master's (a slave's
// metadata sync).
func (b *Broker) replaceSubscriptionGroups(groups []SubscriptionGroup, v DataVersion) (bool, error) {
	changed, err := b.subs.Replace(groups, v)
	if err != nil {
		return false, errcode.Errorf(errcode.SystemError, "%v", err)
	}
	if changed {
		b.reg.trigger()
	}
	return changed, nil
}

// ProducerClients returns the client ids of the connected clients that said
// in their last heartbeat that they produce for group, sorted.
func (b *Broker) ProducerClients(group string) []string {
	sessions := b.clients.producersOf(group)
	b.clients.mu.Lock()
	defer b.clients.mu.Unlock()
	ids := make([]string, 0, len(sessions))
	for _, s := range sessions {
		ids = append(ids, s.id)
	}
	return ids
}
