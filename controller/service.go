package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// service is bolide.v1.Controller.
type service struct {
	pb.UnimplementedControllerServer
	c *Controller
}

var errClosed = status.Error(codes.Unavailable, "controller: shutting down")

// Heartbeat serves one broker's stream: every beat is recorded and
// answered (same seq); every committed change of the broker's group, and
// every leadership change, is pushed (seq 0).
func (s *service) Heartbeat(stream pb.Controller_HeartbeatServer) error {
	c := s.c
	if !c.enter() {
		return errClosed
	}
	defer c.wg.Done()
	ctx := stream.Context()
	if err := c.authorize(ctx, pb.Controller_Heartbeat_FullMethodName); err != nil {
		return wire.GRPCError(err)
	}
	beats := make(chan *pb.BrokerBeat)
	recvErr := make(chan error, 1)
	c.wg.Add(1)
	go func() { // ends when the stream does (its context ends when this handler returns)
		defer c.wg.Done()
		for {
			b, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case beats <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	st := &beatStream{c: c, sub: newSubscriber()}
	defer st.detach()
	for {
		var out *pb.ControllerBeat
		select {
		case <-c.quit:
			return errClosed
		case <-ctx.Done():
			return nil
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case b := <-beats:
			out = st.handle(ctx, b)
		case <-st.sub.c:
			if !st.attached {
				continue
			}
			out = c.answer(st.key, nil, time.Now())
		}
		if err := stream.Send(out); err != nil {
			return err
		}
	}
}

// beatStream is one Heartbeat stream's state.
type beatStream struct {
	c        *Controller
	sub      *subscriber
	key      replicaKey
	attached bool // key's liveness counts this stream, and the hub knows it
	refused  bool // a beat was refused for an identity held elsewhere (logged once)
}

// attach binds the stream to the replica its beats name (re-binding it if
// a beat names another).
func (st *beatStream) attach(k replicaKey) {
	if st.attached && st.key == k {
		return
	}
	st.detach()
	st.key, st.attached = k, true
	st.c.live.streamOpened(k)
	st.c.hub.add(k.name, st.sub)
}

func (st *beatStream) detach() {
	if !st.attached {
		return
	}
	st.c.live.streamClosed(st.key, time.Now())
	st.c.hub.remove(st.key.name, st.sub)
	st.attached = false
}

// handle records a beat and answers it. On the leader it first commits
// what the beat changes: a new replica or new addresses, and a never
// elected group's first election.
func (st *beatStream) handle(ctx context.Context, b *pb.BrokerBeat) *pb.ControllerBeat {
	c := st.c
	if b.GetBrokerName() == "" || b.GetReplicaId() < 1 {
		return &pb.ControllerBeat{Seq: b.GetSeq(), Status: wire.Status(errcode.Errorf(errcode.InvalidParameter,
			"controller: a beat needs a broker name and a replica id >= 1 (got %q, %d)", b.GetBrokerName(), b.GetReplicaId()))}
	}
	k := replicaKey{b.GetBrokerName(), b.GetReplicaId()}
	now := time.Now()
	if !st.attached || st.key != k {
		if holder, held := c.identityHeld(k, b.GetAddr(), now); held {
			err := errcode.Errorf(errcode.InvalidParameter,
				"controller: broker %s replica %d is registered at %s, which is alive; refusing the beat from %s: "+
					"give this broker another --broker-name or replica id, or stop the broker at %s first",
				k.name, k.id, holder, b.GetAddr(), holder)
			if !st.refused {
				st.refused = true
				c.lg.Warn("controller: beat refused: replica identity held by a live broker", zap.String("broker_name", k.name),
					zap.Int64("replica_id", k.id), zap.String("addr", b.GetAddr()), zap.String("holder", holder))
			}
			return &pb.ControllerBeat{Seq: b.GetSeq(), Status: wire.Status(err)}
		}
	}
	c.live.beat(k, b, now)
	st.attach(k)
	if c.leadership().ready {
		c.commitBeat(k, b)
	}
	return c.answer(k, b, time.Now())
}

// identityHeld reports whether replica k is registered at another address
// than addr (committed, or, before the first commit, the address its last
// beats gave) by a broker that is alive: a second broker started with the
// same name and replica id must not take the first one's place. A holder
// whose streams closed more than the stream grace ago, or which has not
// beaten within the broker timeout, is gone: its identity is free.
func (c *Controller) identityHeld(k replicaKey, addr string, now time.Time) (string, bool) {
	v := c.live.get(k, now)
	if !v.known || !v.alive || v.addr == "" || v.addr == addr {
		return "", false
	}
	registered := v.addr
	if g := c.fsm.group(k.name); g != nil {
		if r := g.Replicas[k.id]; r != nil {
			registered = r.Addr
		}
	}
	if registered != v.addr { // the live record is not the registered broker's
		return "", false
	}
	return registered, true
}

// commitBeat registers the replica (when new or moved) and runs its
// group's first election. Failures are logged: the next beat retries.
func (c *Controller) commitBeat(k replicaKey, b *pb.BrokerBeat) {
	g := c.fsm.group(k.name)
	var r *Replica
	if g != nil {
		r = g.Replicas[k.id]
	}
	if r == nil || r.Addr != b.GetAddr() || r.HAAddr != b.GetHaAddr() {
		res, err := c.propose(&Command{Op: opRegister, Name: k.name, Cluster: b.GetCluster(), ID: k.id,
			Addr: b.GetAddr(), HAAddr: b.GetHaAddr()})
		if err != nil {
			c.lg.Warn("controller: register replica", zap.String("broker_name", k.name), zap.Int64("replica_id", k.id), zap.Error(err))
			return
		}
		if res.Changed {
			c.lg.Info("controller: replica registered", zap.String("broker_name", k.name), zap.Int64("replica_id", k.id),
				zap.String("addr", b.GetAddr()), zap.String("ha_addr", b.GetHaAddr()))
		}
		g = res.Group
	}
	if g != nil && g.MasterEpoch == 0 && g.MasterID == 0 {
		c.firstElection(g, k.id, b.GetEpoch())
	}
}

// answer builds the beat for replica k: the committed group, the leader,
// and (the leader's answer to the current master's beat b) a lease.
func (c *Controller) answer(k replicaKey, b *pb.BrokerBeat, now time.Time) *pb.ControllerBeat {
	ls := c.leadership()
	leaderID, _ := c.leaderID()
	out := &pb.ControllerBeat{Seq: b.GetSeq(), Leader: ls.leader, LeaderId: leaderID, Status: wire.OK}
	if !ls.leader {
		out.Status = wire.Status(errcode.Errorf(errcode.ControllerNotLeader, "controller: not the leader (leader %q)", leaderID))
	}
	g := c.fsm.group(k.name)
	if g == nil {
		return out
	}
	out.Group = c.groupState(g, now)
	if b != nil && ls.ready && g.MasterID == k.id && b.GetRole() == RoleMaster && b.GetEpoch() == g.MasterEpoch &&
		c.live.grant(k.name, k.id, g.MasterEpoch, now) && c.stillMaster(k, g.MasterEpoch) {
		out.LeaseMs = c.opts.Lease.Milliseconds()
	}
	return out
}

// stillMaster re-reads the committed group after a grant was recorded: an
// election that began after the group was read and committed before the
// grant (which it could not wait for) has replaced the master.
func (c *Controller) stillMaster(k replicaKey, epoch int64) bool {
	g := c.fsm.group(k.name)
	return g != nil && g.MasterID == k.id && g.MasterEpoch == epoch
}

// groupState is a committed group with this controller's liveness view.
func (c *Controller) groupState(g *Group, now time.Time) *pb.GroupState {
	gs := &pb.GroupState{Cluster: g.Cluster, BrokerName: g.Name, MasterId: g.MasterID, MasterEpoch: g.MasterEpoch,
		SyncStateSet: append([]int64(nil), g.SSS...), SyncStateSetEpoch: g.SSSEpoch}
	if m := g.Replicas[g.MasterID]; m != nil {
		gs.MasterAddr, gs.MasterHaAddr = m.Addr, m.HAAddr
	}
	for _, id := range g.ReplicaIDs() {
		r := g.Replicas[id]
		rs := &pb.ReplicaState{Id: id, Addr: r.Addr, HaAddr: r.HAAddr}
		if v := c.live.get(replicaKey{g.Name, id}, now); v.known {
			rs.Alive, rs.Epoch, rs.MaxOffset, rs.Role = v.alive, v.epoch, v.maxOffset, v.role
			rs.LastBeatMsAgo = now.Sub(v.lastSeen).Milliseconds()
		}
		gs.Replicas = append(gs.Replicas, rs)
	}
	return gs
}

// notLeader is the error of a leader-only call on a follower.
func (c *Controller) notLeader() error {
	id, _ := c.leaderID()
	return errcode.Errorf(errcode.ControllerNotLeader, "controller: not the leader (leader %q)", id)
}

// AlterSyncStateSet is the master's request to change its sync state set:
// fenced by the master and both epochs; every member must exist and be
// alive, and the master stays in the set.
func (s *service) AlterSyncStateSet(ctx context.Context, req *pb.AlterSyncStateSetRequest) (*pb.AlterSyncStateSetResponse, error) {
	c := s.c
	if !c.enter() {
		return nil, errClosed
	}
	defer c.wg.Done()
	if err := c.authorize(ctx, pb.Controller_AlterSyncStateSet_FullMethodName); err != nil {
		return &pb.AlterSyncStateSetResponse{Status: wire.Status(err)}, nil
	}
	g, err := c.alterSSS(req)
	resp := &pb.AlterSyncStateSetResponse{Status: wire.Status(err)}
	if g != nil {
		resp.Group = c.groupState(g, time.Now())
	}
	return resp, nil
}

func (c *Controller) alterSSS(req *pb.AlterSyncStateSetRequest) (*Group, error) {
	if !c.leadership().ready {
		return nil, c.notLeader()
	}
	g := c.fsm.group(req.GetBrokerName())
	if g == nil {
		return nil, errcode.Errorf(errcode.InvalidParameter, "controller: unknown broker group %q", req.GetBrokerName())
	}
	newSet := normSet(req.GetNewSyncStateSet())
	if ce := checkAlterSSS(g, req.GetMasterId(), req.GetMasterEpoch(), req.GetSyncStateSetEpoch(), newSet); ce != nil {
		return g, resultError(ce.code, ce.msg)
	}
	now := time.Now()
	for _, id := range newSet {
		if v := c.live.get(replicaKey{g.Name, id}, now); !v.alive {
			return g, errcode.Errorf(errcode.InvalidParameter, "controller: replica %d is not alive", id)
		}
	}
	res, err := c.propose(&Command{Op: opAlterSSS, Name: g.Name, MasterID: req.GetMasterId(),
		MasterEpoch: req.GetMasterEpoch(), SSSEpoch: req.GetSyncStateSetEpoch(), NewSSS: newSet})
	if err != nil {
		return g, err
	}
	if res.Changed {
		c.lg.Info("controller: sync state set changed", zap.String("broker_name", g.Name),
			zap.Int64s("old", g.SSS), zap.Int64s("new", res.Group.SSS), zap.Int64("sss_epoch", res.Group.SSSEpoch))
	}
	return res.Group, resultError(res.Code, res.Message)
}

// resultError turns a command's outcome into a coded error (nil for OK
// and no change).
func resultError(code ResultCode, msg string) error {
	switch code {
	case ResultOK, ResultNoChange:
		return nil
	case ResultFenced:
		return errcode.Errorf(errcode.ControllerFenced, "controller: %s", msg)
	}
	return errcode.Errorf(errcode.InvalidParameter, "controller: %s", msg)
}

// ElectMaster elects a designated replica or the best candidate now.
func (s *service) ElectMaster(ctx context.Context, req *pb.ElectMasterRequest) (*pb.ElectMasterResponse, error) {
	c := s.c
	if !c.enter() {
		return nil, errClosed
	}
	defer c.wg.Done()
	if err := c.authorize(ctx, pb.Controller_ElectMaster_FullMethodName); err != nil {
		return &pb.ElectMasterResponse{Status: wire.Status(err)}, nil
	}
	g, err := c.adminElect(ctx, req.GetBrokerName(), req.GetDesignated(), req.GetUnclean())
	resp := &pb.ElectMasterResponse{Status: wire.Status(err)}
	if g != nil {
		resp.Group = c.groupState(g, time.Now())
	}
	return resp, nil
}

// DescribeController answers on every controller.
func (s *service) DescribeController(ctx context.Context, _ *pb.DescribeControllerRequest) (*pb.DescribeControllerResponse, error) {
	c := s.c
	if !c.enter() {
		return nil, errClosed
	}
	defer c.wg.Done()
	if err := c.authorize(ctx, pb.Controller_DescribeController_FullMethodName); err != nil {
		return &pb.DescribeControllerResponse{Status: wire.Status(err)}, nil
	}
	leaderID, leaderAddr := c.leaderID()
	resp := &pb.DescribeControllerResponse{Status: wire.OK, SelfId: c.opts.ID, LeaderId: leaderID,
		LeaderRaftAddr: leaderAddr, Term: c.raft.CurrentTerm(), CommitIndex: c.raft.CommitIndex()}
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		resp.Status = wire.Status(fmt.Errorf("controller: configuration: %w", err))
		return resp, nil
	}
	self := c.raft.State()
	for _, srv := range f.Configuration().Servers {
		p := &pb.ControllerPeer{Id: string(srv.ID), RaftAddr: string(srv.Address), State: "unknown"}
		switch {
		case string(srv.ID) == c.opts.ID:
			p.State = stateName(self)
		case string(srv.ID) == leaderID:
			p.State = "leader"
		}
		resp.Peers = append(resp.Peers, p)
	}
	now := time.Now()
	for _, g := range c.fsm.groups() {
		resp.Groups = append(resp.Groups, c.groupState(g, now))
	}
	return resp, nil
}
