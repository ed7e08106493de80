package controller

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/errcode"
)

// Election reasons (the label of bolide_controller_elections_total).
const (
	reasonFirst     = "first"          // a group's first replica heartbeats
	reasonDead      = "master_dead"    // the master's beats stopped, or its stream closed
	reasonRestarted = "master_restart" // the master reports a role other than MASTER at its epoch
	reasonNoMaster  = "no_master"      // a group without master got an alive candidate
	reasonAdmin     = "admin"          // ElectMaster
)

// scanLoop is the leader's failure detector.
func (c *Controller) scanLoop() {
	t := time.NewTicker(c.opts.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		}
		ls := c.leadership()
		if !ls.ready || time.Since(ls.since) < c.opts.grace() {
			c.stopWaiting()
			continue
		}
		for _, g := range c.fsm.groups() {
			c.checkGroup(g, time.Now())
		}
	}
}

// masterHealth says whether a group's master is fine, and if not why.
func (c *Controller) masterHealth(g *Group, now time.Time) (ok bool, reason string, alive bool) {
	v := c.live.get(replicaKey{g.Name, g.MasterID}, now)
	switch {
	case !v.alive:
		return false, reasonDead, false
	case v.epoch == g.MasterEpoch && v.role != RoleMaster:
		return false, reasonRestarted, true
	}
	return true, "", true
}

// checkGroup elects a new master when the group's master is dead (after
// its last lease ran out), or a master for a group without one.
func (c *Controller) checkGroup(g *Group, now time.Time) {
	if g.MasterEpoch == 0 {
		return // never elected: its first beat elects its first replica
	}
	alive := c.live.aliveCandidates(g.Name, g.ReplicaIDs(), now)
	reason := reasonNoMaster
	if g.MasterID != 0 {
		ok, why, masterAlive := c.masterHealth(g, now)
		if ok {
			c.stopWaitingFor(g.Name) // a master back before its lease ran out
			return
		}
		reason = why
		if !masterAlive {
			delete(alive, g.MasterID)
		}
	} else if len(alive) == 0 {
		return
	}
	out := decide(electionInput{group: g, alive: alive, unclean: c.opts.UncleanElection})
	if out.NewMaster == 0 && g.MasterID == 0 {
		return
	}
	if g.MasterID != 0 {
		if !c.scanWaiting[g.Name] {
			c.scanWaiting[g.Name] = true
			c.scanLeaseEnd[g.Name] = c.live.beginElection(g.Name) // grants stop
		}
		if now.Before(c.scanLeaseEnd[g.Name]) {
			return // elect once the last lease ran out
		}
	}
	defer c.stopWaitingFor(g.Name)
	c.elect(g, out, reason)
}

// stopWaitingFor ends the scan's wait for a group's master's lease (and
// lets grants resume unless another election is under way).
func (c *Controller) stopWaitingFor(name string) {
	if c.scanWaiting[name] {
		delete(c.scanWaiting, name)
		delete(c.scanLeaseEnd, name)
		c.live.endElection(name)
	}
}

// stopWaiting ends every wait of the scan (leadership lost).
func (c *Controller) stopWaiting() {
	for name := range c.scanWaiting {
		c.stopWaitingFor(name)
	}
}

// elect commits an election decided on g (the FSM refuses it if g is no
// longer the committed state).
func (c *Controller) elect(g *Group, out electionOutcome, reason string) (Result, error) {
	cmd := &Command{Op: opElect, Name: g.Name, NewMaster: out.NewMaster, ExpectMaster: g.MasterID,
		ExpectEpoch: g.MasterEpoch, MinEpoch: out.MinEpoch, Reason: reason, Unclean: out.Unclean}
	res, err := c.propose(cmd)
	fields := []zap.Field{zap.String("broker_name", g.Name), zap.String("reason", reason),
		zap.Int64("old_master", g.MasterID), zap.Int64("old_epoch", g.MasterEpoch),
		zap.Int64s("old_sync_state_set", g.SSS), zap.Int64("new_master", out.NewMaster)}
	switch {
	case err != nil:
		c.lg.Warn("controller: election not committed", append(fields, zap.Error(err))...)
		return res, err
	case res.Code != ResultOK:
		c.lg.Info("controller: election refused", append(fields, zap.Stringer("result", res.Code), zap.String("why", res.Message))...)
		return res, nil
	}
	c.metrics.elections.WithLabelValues(reason).Inc()
	fields = append(fields, zap.Int64("epoch", res.Group.MasterEpoch))
	switch {
	case out.NewMaster == 0:
		c.lg.Error("controller: no replica can be elected: group has no master (read-only)", fields...)
	case out.Unclean:
		c.metrics.unclean.Inc()
		c.lg.Error("controller: UNCLEAN election: a replica outside the sync state set is master; acknowledged messages it lacks are lost", fields...)
	default:
		c.lg.Info("controller: master elected", fields...)
	}
	return res, nil
}

// firstElection elects the first replica of a never-elected group, at
// epoch 1 or, when the replica already knows an epoch (the controller's
// state was lost, the brokers' was not), just above it: a broker never
// acts on an epoch it has already seen.
func (c *Controller) firstElection(g *Group, id, knownEpoch int64) {
	if g.MasterEpoch != 0 || g.MasterID != 0 {
		return
	}
	_, _ = c.elect(g, electionOutcome{NewMaster: id, MinEpoch: knownEpoch + 1}, reasonFirst)
}

// adminElect is ElectMaster: designated (0 = best candidate), unclean
// allowed or not. It waits for the current master's lease to run out
// (and, after a leadership change, for any lease the previous leader may
// have granted).
func (c *Controller) adminElect(ctx context.Context, name string, designated int64, unclean bool) (*Group, error) {
	ls := c.leadership()
	if !ls.ready {
		id, _ := c.leaderID()
		return nil, errcode.Errorf(errcode.ControllerNotLeader, "controller: not the leader (leader %q)", id)
	}
	g := c.fsm.group(name)
	if g == nil {
		return nil, errcode.Errorf(errcode.InvalidParameter, "controller: unknown broker group %q", name)
	}
	if designated != 0 && designated == g.MasterID {
		return g, nil
	}
	now := time.Now()
	alive := c.live.aliveCandidates(name, g.ReplicaIDs(), now)
	if g.MasterID != 0 {
		if ok, _, masterAlive := c.masterHealth(g, now); ok || !masterAlive {
			delete(alive, g.MasterID) // a master stays master unless it restarted
		}
	}
	var out electionOutcome
	if designated != 0 {
		cand, isAlive := alive[designated]
		switch {
		case g.Replicas[designated] == nil:
			return g, errcode.Errorf(errcode.ControllerMasterNotAvailable, "controller: replica %d unknown in %q", designated, name)
		case !isAlive:
			return g, errcode.Errorf(errcode.ControllerMasterNotAvailable, "controller: replica %d is not alive", designated)
		case !g.inSSS(designated) && !unclean:
			return g, errcode.Errorf(errcode.ControllerMasterNotAvailable,
				"controller: replica %d is not in the sync state set %v (unclean election needed)", designated, g.SSS)
		}
		out = electionOutcome{NewMaster: cand.ID, Unclean: !g.inSSS(designated)}
	} else {
		if ok, _, _ := c.masterHealth(g, now); ok && g.MasterID != 0 {
			return g, nil // the master is alive: nothing to elect
		}
		out = decide(electionInput{group: g, alive: alive, unclean: unclean})
		if out.NewMaster == 0 {
			return g, errcode.Errorf(errcode.ControllerMasterNotAvailable, "controller: no alive replica in the sync state set %v", g.SSS)
		}
	}
	if g.MasterID != 0 {
		leaseEnd := c.live.beginElection(name)
		defer c.live.endElection(name)
		if prev := ls.since.Add(c.opts.Lease + c.opts.RaftElectionTimeout); prev.After(leaseEnd) {
			leaseEnd = prev
		}
		if !c.waitUntil(ctx, leaseEnd) {
			return g, errcode.Errorf(errcode.Timeout, "controller: gave up waiting for the master's lease to end")
		}
	}
	res, err := c.elect(g, out, reasonAdmin)
	if err != nil {
		return g, err
	}
	switch res.Code {
	case ResultOK, ResultNoChange:
		return res.Group, nil
	case ResultFenced:
		return res.Group, errcode.Errorf(errcode.ControllerFenced, "controller: %s", res.Message)
	}
	return res.Group, errcode.Errorf(errcode.InvalidParameter, "controller: %s", res.Message)
}
