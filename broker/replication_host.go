package broker

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/tlsconf"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/message"
)

// Role is a broker's part in its group (package broker/replication).
type Role = replication.Role

// Roles.
const (
	RoleMaster = replication.RoleMaster
	RoleSlave  = replication.RoleSlave
	RoleFenced = replication.RoleFenced
)

// Replication modes.
const (
	ReplicationAsync = replication.ModeAsync
	ReplicationSync  = replication.ModeSync
)

// HAPortOffset derives the HA address from the listen port.
const HAPortOffset = replication.HAPortOffset

// ReplicationOptions configure master–slave replication.
type ReplicationOptions = replication.Options

// PromoteResult says what a promotion did.
type PromoteResult = replication.PromoteResult

// PromoteRequest asks a broker to become the master of its group.
type PromoteRequest = replication.PromoteRequest

// newReplicator loads the saved role and binds the HA listener.
func newReplicator(b *Broker, master replication.MasterClient, controllers replication.ControllerClient) (*replication.Replicator, error) {
	link, err := haLink(b.opts, b.guard, b.certs, b.log.Named("ha"))
	if err != nil {
		return nil, err
	}
	return replication.New(replication.Config{
		Link:        link,
		Cluster:     b.opts.Cluster,
		Controllers: controllers,
		Options:     b.opts.Replication,
		BrokerName:  b.opts.BrokerName,
		BrokerID:    b.opts.BrokerID,
		StoreDir:    b.opts.StoreDir,
		ListenAddr:  b.opts.ListenAddr,
		Addr:        b.addr,
		Store:       b.store,
		Offsets:     b.offsets,
		Master:      master,
	}, replicationHost{b}, b.log.Named("ha"))
}

// haLink secures the HA connections from the broker's options: the TLS
// mode on the HA listener (as on the client port), TLS when the slave
// dials (TLS.Dial), the slave's credentials in an AUTH frame, and, with
// ACL on, the master's check of them (a user that may make calls between
// daemons: an admin user).
func haLink(opts Options, g *auth.Guard, certs *tlsconf.Source, log *zap.Logger) (replication.Link, error) {
	var link replication.Link
	if certs == nil && (opts.TLS.Mode != tlsconf.Off || opts.TLS.Dial) {
		var err error
		if certs, err = tlsconf.Open(opts.TLS, log.Named("tls")); err != nil {
			return link, fmt.Errorf("broker: HA TLS: %w", err)
		}
	}
	tc := opts.TLS
	link.WrapListener = func(l net.Listener) net.Listener { return tlsconf.Listen(l, tc, certs, log.Named("listener")) }
	if opts.TLS.Dial {
		cfg, err := tlsconf.ClientConfig(opts.TLS, certs)
		if err != nil {
			return link, fmt.Errorf("broker: HA TLS: %w", err)
		}
		link.TLS = cfg
	}
	if creds := opts.Credentials; !creds.Empty() {
		link.Credentials = func() (string, string) { return auth.NewHeader(creds, time.Now()) }
	} else if g.Enabled() {
		log.Warn("ACL is on but this broker has no access key (--access-key, --secret-key): its own calls to other daemons " +
			"(registration, controller heartbeats, replication as a slave, metadata) carry no credentials, and daemons with ACL on refuse them")
	}
	if g.Enabled() {
		link.Authenticate = func(remote, authorization, date string) error {
			p, err := g.Header(remote, authorization, date)
			if err != nil {
				return err
			}
			return g.Internal(p, remote, "replication (HA)")
		}
	}
	return link, nil
}

// replicationHost is the broker as replication sees it.
type replicationHost struct{ b *Broker }

func (h replicationHost) Topics() ([]topic.Config, topic.DataVersion) {
	return h.b.topics.snapshot()
}

func (h replicationHost) ReplaceTopics(topics []topic.Config, v topic.DataVersion) ([]string, bool, error) {
	return h.b.topics.replaceAll(topics, v)
}

func (h replicationHost) SubscriptionGroups() ([]SubscriptionGroup, topic.DataVersion) {
	return h.b.subs.All()
}

func (h replicationHost) ReplaceSubscriptionGroups(groups []SubscriptionGroup, v topic.DataVersion) (bool, error) {
	return h.b.replaceSubscriptionGroups(groups, v)
}

func (h replicationHost) DelayProgress() (delay.MasterProgress, bool) {
	if d := h.b.delay.Load(); d != nil {
		return d.Snapshot()
	}
	return delay.MasterProgress{}, false
}

func (h replicationHost) OfferDelayProgress(p delay.MasterProgress) {
	if d := h.b.delay.Load(); d != nil {
		d.Offer(p)
	}
}

// RecoverTopics adds the topics the store has queues of but the topic
// table lacks (a new master in controller mode), and the cluster's reply
// topic.
func (h replicationHost) RecoverTopics() []string {
	b := h.b
	queues := map[string]int32{}
	for _, q := range b.store.Queues() {
		queues[q.Topic] = max(queues[q.Topic], q.QueueID+1)
	}
	queues[ReplyTopic(b.opts.Cluster)] = max(queues[ReplyTopic(b.opts.Cluster)], 1)
	var out []string
	for name, n := range queues {
		if message.IsSystemTopic(name) || message.IsRetryTopic(name) || message.IsDLQTopic(name) {
			continue
		}
		if _, ok := b.topics.get(name); ok {
			continue
		}
		if err := b.topics.put(TopicConfig{Name: name, ReadQueueNums: n, WriteQueueNums: n, Perm: PermReadWrite}, false); err != nil {
			b.log.Warn("topic not recovered", zap.String("topic", name), zap.Error(err))
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func (h replicationHost) Register()                  { h.b.reg.registerAll() }
func (h replicationHost) Registered() bool           { return h.b.reg.registered() }
func (h replicationHost) TriggerRegistration()       { h.b.reg.trigger() }
func (h replicationHost) StoreError(err error) error { return storeError(err) }

func (b *Broker) startReplication() error { return b.repl.Start() }
func (b *Broker) stopReplication() error  { return b.repl.Close() }

// pushMetadata gives the topic and subscription group tables to every
// other member of the sync state set after an admin change and returns
// once they applied them (controller mode; replication.PushMetadata): past
// the bound it fails with FLUSH_SLAVE_TIMEOUT, the change being saved on
// this master only.
func (b *Broker) pushMetadata() error {
	return b.repl.PushMetadata(context.Background())
}

// checkWritable refuses sends on a broker that is not a master.
func (b *Broker) checkWritable() error { return b.repl.CheckWritable() }

// checkInSync refuses a sync-mode send too few slaves could acknowledge.
func (b *Broker) checkInSync() error { return b.repl.CheckInSync() }

// waitReplicated returns once the stored messages are held by as many
// slaves as the replication mode requires.
func (b *Broker) waitReplicated(ctx context.Context, res []store.PutResult) error {
	return b.repl.WaitReplicated(ctx, res)
}

// brokerID is the broker's current id (0 once promoted).
func (b *Broker) brokerID() int64 { return b.repl.ID() }

// IsMaster reports whether the broker takes writes now: a master that was
// not fenced. Services that write (delayed delivery, transaction checks)
// run only while it holds.
func (b *Broker) IsMaster() bool { return b.repl.IsMaster() }

// Role returns the broker's replication role.
func (b *Broker) Role() Role { return b.repl.Role() }

// Epoch returns the broker's epoch.
func (b *Broker) Epoch() int64 { return b.repl.Epoch() }

// HAAddr is the advertised HA address.
func (b *Broker) HAAddr() string { return b.repl.HAAddr() }

// HAServerAddr is the bound HA address.
func (b *Broker) HAServerAddr() string { return b.repl.Server().Addr() }

// Promote makes this slave (or fenced master) the master of its group
// (replication.Replicator.Promote): in controller mode through the
// controller.
func (b *Broker) Promote(ctx context.Context, req PromoteRequest) (PromoteResult, error) {
	return b.repl.Promote(ctx, req)
}

// commitOffset records a consumer offset. On a slave it is also a local
// commit that the next metadata sync sends to the master.
func (b *Broker) commitOffset(group, topic string, queueID int32, offset int64) {
	b.repl.RecordOffset(group, topic, queueID, offset, false)
}

// advanceOffset is commitOffset for the progress a pull carries: it only
// moves an offset forward. A pull still on its way when its consumer
// releases the queue (commits, then unlocks) must not move the offset back
// below that final commit: the queue's next owner would consume the
// released messages again. Explicit commits and resets may move it back.
func (b *Broker) advanceOffset(group, topic string, queueID int32, offset int64) {
	b.repl.RecordOffset(group, topic, queueID, offset, true)
}
