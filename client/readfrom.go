package client

// Reading from slaves. A broker group is a master (broker id 0) and slaves
// (id > 0) holding copies of its CommitLog. Consumers read from the master.
// When the master is not in the route, or a pull to it fails because it
// cannot be reached, they read from the slave with the lowest id and commit
// their offsets there (a slave keeps them and hands them to its master once
// the master is back). While on a slave, pulls are held at most
// WithMasterRetryInterval, and as often the route is fetched again: when it
// names a master, the consumer commits its own next offsets to the master
// and reads from the master again, so that nothing is skipped and nothing
// consumed is read again. Producers never send to slaves, and orderly
// consumers never read from them: they need the master's queue locks and
// wait for the master instead.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// readSelector decides which broker of each group a consumer reads from.
// Groups read from their master have no entry.
type readSelector struct {
	retry time.Duration
	log   *zap.Logger
	now   func() time.Time

	// mu protects groups.
	mu     sync.Mutex
	groups map[string]*slaveRead
}

// slaveRead is a broker group read from a slave.
type slaveRead struct {
	id      int64     // the slave read from
	since   time.Time // when reading from slaves began
	retryAt time.Time // when to look for the master again
	// checking: a goroutine is looking for the master; the others keep
	// reading from the slave meanwhile.
	checking bool
}

func newReadSelector(retry time.Duration, log *zap.Logger) *readSelector {
	return &readSelector{retry: retry, log: log, now: time.Now, groups: make(map[string]*slaveRead)}
}

// pick returns the id and address of the broker of bd to read from
// (address "" when there is none). A non-orderly consumer moves to the
// lowest slave when the route has no master; once on a slave it stays there
// until returned reports the master back.
func (s *readSelector) pick(bd BrokerData, orderly bool) (int64, string) {
	master := bd.MasterAddr()
	if orderly {
		return 0, master
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.groups[bd.BrokerName]
	if st == nil {
		if master != "" {
			return 0, master
		}
		id, addr := bd.lowestSlave()
		if addr != "" {
			s.enterLocked(bd.BrokerName, id, "the route has no master")
		}
		return id, addr
	}
	if a := bd.Addrs[st.id]; a != "" && st.id > 0 {
		return st.id, a
	}
	id, addr := bd.lowestSlave()
	if addr == "" {
		// No slave left: look for the master at the next read.
		st.retryAt = time.Time{}
		return 0, ""
	}
	if id != st.id {
		s.log.Info("reading from another slave", zap.String("broker", bd.BrokerName),
			zap.Int64("from", st.id), zap.Int64("to", id))
		st.id = id
	}
	return id, addr
}

// enterLocked starts reading group name from slave id. s.mu is held.
func (s *readSelector) enterLocked(name string, id int64, reason string) {
	now := s.now()
	s.groups[name] = &slaveRead{id: id, since: now, retryAt: now.Add(s.retry)}
	s.log.Warn("reading from a slave while the master is unavailable", zap.String("broker", name),
		zap.Int64("slaveId", id), zap.String("reason", reason), zap.Duration("masterRetry", s.retry))
}

// masterFailed moves group bd to its lowest slave after a read from the
// master failed with cause; it reports whether the group is now read from
// a slave (moved by this call or by another read that failed before).
func (s *readSelector) masterFailed(bd BrokerData, cause error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups[bd.BrokerName] != nil {
		return true
	}
	id, addr := bd.lowestSlave()
	if addr == "" {
		return false
	}
	s.enterLocked(bd.BrokerName, id, cause.Error())
	return true
}

// slaveFailed makes the next read of group name look for the master (and
// fetch the route again) at once.
func (s *readSelector) slaveFailed(name string) {
	s.mu.Lock()
	if st := s.groups[name]; st != nil {
		st.retryAt = time.Time{}
	}
	s.mu.Unlock()
}

// due reports whether the caller should look for the master of group name
// now: the group is read from a slave, its retry time has come and nobody
// else is looking. A true answer must be followed by checked.
func (s *readSelector) due(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.groups[name]
	if st == nil || st.checking || s.now().Before(st.retryAt) {
		return false
	}
	st.checking = true
	return true
}

// checked ends a look for the master: back makes the group read from its
// master again, otherwise the next look is one retry interval away.
func (s *readSelector) checked(name string, back bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.groups[name]
	if st == nil {
		return
	}
	st.checking = false
	if !back {
		st.retryAt = s.now().Add(s.retry)
		return
	}
	delete(s.groups, name)
	s.log.Info("reading from the master again", zap.String("broker", name), zap.Int64("slaveId", st.id),
		zap.Duration("onSlave", s.now().Sub(st.since).Round(time.Millisecond)))
}

// onSlave returns the slave group name is read from, if it is.
func (s *readSelector) onSlave(name string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.groups[name]; st != nil {
		return st.id, true
	}
	return 0, false
}

// suspend bounds the long polling of a read from broker id: a read from a
// slave returns within the retry interval, so that the master is looked
// for on time.
func (s *readSelector) suspend(id int64, d time.Duration) time.Duration {
	if id > 0 {
		return min(d, s.retry)
	}
	return d
}

// readUnavailable reports whether a failed read says that the broker could
// not serve it at all (unreachable, stopping), as opposed to an answer
// about the request.
func readUnavailable(err error) bool {
	if isTransport(err) {
		return true
	}
	switch wire.CodeOf(err) {
	case pb.Code_SERVICE_NOT_AVAILABLE, pb.Code_SHUTTING_DOWN:
		return isCoded(err)
	}
	return false
}

// listAddrs returns the brokers of bd to ask for the group's member list,
// in order: the one read from, then the master, then the lowest slave (every
// broker of a group knows the members, which connect to all of them). An
// orderly consumer asks the master, or a slave when there is no master, as
// its queue locks come from the master anyway.
func (c *consumerCore) listAddrs(bd BrokerData) []string {
	if c.orderly {
		if a := bd.ReadAddr(); a != "" {
			return []string{a}
		}
		return nil
	}
	_, first := c.reads.pick(bd, false)
	_, slave := bd.lowestSlave()
	var out []string
	for _, a := range []string{first, bd.MasterAddr(), slave} {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// readTarget is the broker one read goes to.
type readTarget struct {
	cli  pb.BrokerClient
	addr string
	id   int64 // 0 = master
}

// brokerData returns the last known addresses of mq's broker group: from
// the cached route of its topic, else a fetched one, else any route that
// named the group.
func (c *consumerCore) brokerData(ctx context.Context, mq MessageQueue) (BrokerData, bool) {
	if ri := c.routes.cached(mq.Topic); ri != nil {
		if bd, ok := ri.brokers[mq.BrokerName]; ok {
			return bd, true
		}
	}
	if ri, err := c.routes.get(ctx, mq.Topic); err == nil {
		if bd, ok := ri.brokers[mq.BrokerName]; ok {
			return bd, true
		}
	}
	return c.routes.broker(mq.BrokerName)
}

// readFrom returns the broker to pull mq from, first returning to the
// master when the group is read from a slave and it is time to look.
func (c *consumerCore) readFrom(ctx context.Context, mq MessageQueue) (readTarget, error) {
	c.returnToMaster(ctx, mq)
	bd, ok := c.brokerData(ctx, mq)
	id, addr := int64(0), ""
	if ok {
		id, addr = c.reads.pick(bd, c.orderly)
	}
	if addr == "" {
		return readTarget{id: -1}, codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "broker %s has no reachable address", mq.BrokerName)
	}
	cli, err := c.broker(addr)
	if err != nil {
		return readTarget{id: -1}, err
	}
	return readTarget{cli: cli, addr: addr, id: id}, nil
}

// readFailed records that a read of mq from broker id failed with err. It
// reports whether the group moved from its master to a slave, so that the
// read may be tried there at once.
func (c *consumerCore) readFailed(ctx context.Context, mq MessageQueue, id int64, err error) bool {
	if c.orderly || id < 0 || ctx.Err() != nil || !readUnavailable(err) {
		return false
	}
	if id > 0 {
		c.reads.slaveFailed(mq.BrokerName)
		return false
	}
	bd, ok := c.brokerData(ctx, mq)
	return ok && c.reads.masterFailed(bd, err)
}

// returnToMaster, when mq's group is read from a slave and it is time,
// fetches the route again; when it names a master, commits the consumer's
// next offsets of the group's queues it holds to the master, fetches the
// routes of the group's other topics and makes the group read from the
// master again.
func (c *consumerCore) returnToMaster(ctx context.Context, mq MessageQueue) {
	if c.orderly || !c.reads.due(mq.BrokerName) {
		return
	}
	back := false
	defer func() { c.reads.checked(mq.BrokerName, back) }()
	c.routes.markStale(mq.Topic)
	ri, err := c.routes.get(ctx, mq.Topic)
	if err != nil {
		return
	}
	master := ri.brokers[mq.BrokerName].MasterAddr()
	if master == "" {
		return
	}
	if err := c.commitToMaster(ctx, mq, master); err != nil {
		if ctx.Err() == nil {
			c.log.Info("the master is routed but cannot take offsets yet; reading from the slave",
				zap.String("broker", mq.BrokerName), zap.String("master", master), zap.Error(err))
		}
		return
	}
	// The group's other topics may still have routes cached from before
	// the master came back (another address, or none).
	for _, topic := range c.routes.topicsOf(mq.BrokerName) {
		if topic != mq.Topic {
			if _, err := c.routes.fetch(ctx, topic); err != nil && ctx.Err() == nil {
				c.log.Debug("route refresh failed", zap.String("topic", topic), zap.Error(err))
			}
		}
	}
	back = true
}

// commitToMaster commits, to the master at addr, the next offsets of the
// queues of mq's group this consumer holds and has consumed from
// (clustering; a broadcasting consumer keeps its offsets itself). With
// nothing to commit it checks that the master answers.
func (c *consumerCore) commitToMaster(ctx context.Context, mq MessageQueue, addr string) error {
	cli, err := c.broker(addr)
	if err != nil {
		return err
	}
	req := &pb.CommitOffsetsRequest{Group: c.group}
	if c.opts.model == Clustering {
		for _, q := range c.assignment() {
			if q.BrokerName != mq.BrokerName {
				continue
			}
			if off := c.offsets.current(q); off >= 0 {
				req.Offsets = append(req.Offsets, &pb.QueueOffset{Topic: q.Topic, QueueId: q.QueueID, Offset: off})
			}
		}
	}
	sort.Slice(req.Offsets, func(i, j int) bool {
		a, b := req.Offsets[i], req.Offsets[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.QueueId < b.QueueId
	})
	rctx, cancel := c.rpcContext(ctx)
	defer cancel()
	if len(req.Offsets) == 0 {
		resp, err := cli.QueryOffset(rctx, &pb.QueryOffsetRequest{Group: c.group, Topic: mq.Topic, QueueId: mq.QueueID})
		if err == nil {
			err = fromStatus(resp.GetStatus())
		}
		if err != nil {
			return fmt.Errorf("query offset of %s at the master %s: %w", mq, addr, err)
		}
		return nil
	}
	resp, err := cli.CommitOffsets(rctx, req)
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return fmt.Errorf("commit %d offsets to the master %s: %w", len(req.Offsets), addr, err)
	}
	c.log.Debug("committed the offsets read from the slave to the master", zap.String("broker", mq.BrokerName),
		zap.Int("queues", len(req.Offsets)))
	return nil
}
