package console

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// masters returns broker name → master address (the lowest slave when a
// group has none), sorted by name.
func masters(ctx context.Context, a *client.Admin) ([][2]string, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for name, bd := range ci.Brokers {
		if addr := bd.ReadAddr(); addr != "" {
			out = append(out, [2]string{name, addr})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out, nil
}

type delayLevelJSON struct {
	Level   int        `json:"level"`
	Delay   jsDuration `json:"delay"`
	Pending int64      `json:"pending"`
	NextDue jsTime     `json:"nextDue"`
}

type timerJSON struct {
	Enabled   bool       `json:"enabled"`
	MaxDelay  jsDuration `json:"maxDelay"`
	Pending   int64      `json:"pending"`
	NextDue   jsTime     `json:"nextDue"`
	Delivered int64      `json:"delivered"`
	Cancelled int64      `json:"cancelled"`
	Lost      int64      `json:"lost"`
}

type delayBrokerJSON struct {
	Broker  string           `json:"broker"`
	Addr    string           `json:"addr"`
	Pending int64            `json:"pending"`
	NextDue jsTime           `json:"nextDue"`
	Levels  []delayLevelJSON `json:"levels"`
	Timer   *timerJSON       `json:"timer"`
	Error   string           `json:"error"`
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// delay: the delay levels and timing wheel of every master.
func (c *Console) delay(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	ms, err := masters(ctx, cl.admin)
	if err != nil {
		return nil, err
	}
	out := struct {
		Brokers []delayBrokerJSON `json:"brokers"`
	}{Brokers: make([]delayBrokerJSON, len(ms))}
	each(len(ms), func(i int) {
		b := &out.Brokers[i]
		b.Broker, b.Addr, b.Levels = ms[i][0], ms[i][1], []delayLevelJSON{}
		st, err := cl.admin.DelayStatus(ctx, b.Addr)
		if err != nil {
			b.Error = err.Error()
			return
		}
		var next time.Time
		for _, l := range st.Levels {
			if l.Pending <= 0 {
				continue
			}
			b.Pending += l.Pending
			next = earliest(next, l.NextDeliver)
			b.Levels = append(b.Levels, delayLevelJSON{Level: l.Level, Delay: jsDuration(l.Delay), Pending: l.Pending,
				NextDue: jsTime(l.NextDeliver)})
		}
		t := st.Timer
		b.Timer = &timerJSON{Enabled: t.Enabled, MaxDelay: jsDuration(t.MaxDelay), Pending: t.Pending, NextDue: jsTime(t.NextDue),
			Delivered: t.Delivered, Cancelled: t.Cancelled, Lost: t.Lost}
		b.Pending += t.Pending
		b.NextDue = jsTime(earliest(next, t.NextDue))
	})
	return out, nil
}

type cancelDelayRequest struct {
	Topic string `json:"topic"`
	MsgID string `json:"msgId"`
}

func (c *Console) cancelDelay(ctx context.Context, cl *call) (any, error) {
	var req cancelDelayRequest
	if err := decode(cl.r, &req); err != nil {
		return nil, err
	}
	if err := message.ValidateTopic(req.Topic); err != nil {
		return nil, errcode.Errorf(errcode.IllegalTopic, "%v", err)
	}
	if req.MsgID == "" {
		return nil, badRequest("msgId is empty")
	}
	if err := cl.admin.CancelDelayed(ctx, req.Topic, req.MsgID); err != nil {
		return nil, err
	}
	return map[string]bool{"cancelled": true}, nil
}

type txnStatsJSON struct {
	Broker           string     `json:"broker"`
	Addr             string     `json:"addr"`
	Pending          int64      `json:"pending"`
	OldestPendingAge jsDuration `json:"oldestPendingAge"`
	HalfMessages     int64      `json:"halfMessages"`
	Checks           int64      `json:"checks"`
	Commits          int64      `json:"commits"`
	Rollbacks        int64      `json:"rollbacks"`
	Discards         int64      `json:"discards"`
	DiscardedTotal   int64      `json:"discardedTotal"`
}

type pendingTxnJSON struct {
	Broker          string `json:"broker"`
	Topic           string `json:"topic"`
	QueueID         int32  `json:"queueId"`
	Group           string `json:"group"`
	TransactionID   string `json:"transactionId"`
	CommitLogOffset int64  `json:"commitLogOffset"`
	HalfOffset      int64  `json:"halfOffset"`
	Checks          int32  `json:"checks"`
	Born            jsTime `json:"born"`
	NextCheck       jsTime `json:"nextCheck"`
}

type discardedTxnJSON struct {
	Broker        string `json:"broker"`
	Offset        int64  `json:"offset"`
	Topic         string `json:"topic"`
	QueueID       int32  `json:"queueId"`
	Group         string `json:"group"`
	TransactionID string `json:"transactionId"`
	MsgID         string `json:"msgId"`
	Checks        int32  `json:"checks"`
	Born          jsTime `json:"born"`
	DiscardedAt   jsTime `json:"discardedAt"`
}

func (c *Console) txnQuery(cl *call) (client.TransactionQuery, error) {
	q := cl.r.URL.Query()
	max, err := intParam(cl.r, "max", 200, 1000)
	if err != nil {
		return client.TransactionQuery{}, err
	}
	tq := client.TransactionQuery{Group: q.Get("group"), Topic: q.Get("topic"), Max: max}
	if b := q.Get("broker"); b != "" {
		tq.BrokerNames = []string{b}
	}
	return tq, nil
}

// transactions: every master's counters, pending and discarded half
// messages.
func (c *Console) transactions(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	tq, err := c.txnQuery(cl)
	if err != nil {
		return nil, err
	}
	var stats []client.TransactionStats
	var pending []client.PendingTransaction
	var discarded []client.DiscardedTransaction
	var statsErr, pendErr, discErr error
	done := make(chan struct{}, 2)
	go func() { stats, statsErr = cl.admin.TransactionStats(ctx, tq.BrokerNames...); done <- struct{}{} }()
	go func() { discarded, discErr = cl.admin.DiscardedTransactions(ctx, tq); done <- struct{}{} }()
	pending, pendErr = cl.admin.PendingTransactions(ctx, tq)
	<-done
	<-done
	for _, err := range []error{statsErr, pendErr, discErr} {
		if err != nil {
			return nil, err
		}
	}
	out := struct {
		Stats     []txnStatsJSON     `json:"stats"`
		Pending   []pendingTxnJSON   `json:"pending"`
		Discarded []discardedTxnJSON `json:"discarded"`
		Error     string             `json:"error"`
	}{Stats: []txnStatsJSON{}, Pending: []pendingTxnJSON{}, Discarded: []discardedTxnJSON{}}
	for _, s := range stats {
		out.Stats = append(out.Stats, txnStatsJSON{Broker: s.BrokerName, Addr: s.Addr, Pending: s.Pending,
			OldestPendingAge: jsDuration(s.OldestPendingAge), HalfMessages: s.HalfMessages, Checks: s.Checks,
			Commits: s.Commits, Rollbacks: s.Rollbacks, Discards: s.Discards, DiscardedTotal: s.DiscardedTotal})
	}
	for _, p := range pending {
		out.Pending = append(out.Pending, pendingTxnJSON{Broker: p.BrokerName, Topic: p.Queue.Topic, QueueID: p.Queue.QueueID,
			Group: p.Group, TransactionID: p.TransactionID, CommitLogOffset: p.CommitLogOffset, HalfOffset: p.HalfQueueOffset,
			Checks: p.CheckTimes, Born: jsTime(p.BornTime), NextCheck: jsTime(p.NextCheck)})
	}
	for _, d := range discarded {
		j := discardedTxnJSON{Broker: d.BrokerName, Offset: d.Offset, Topic: d.Queue.Topic, QueueID: d.Queue.QueueID,
			Group: d.Group, TransactionID: d.TransactionID, Checks: d.CheckTimes, Born: jsTime(d.BornTime),
			DiscardedAt: jsTime(d.DiscardedAt)}
		if d.Message != nil {
			j.MsgID = d.Message.MsgID
		}
		out.Discarded = append(out.Discarded, j)
	}
	return out, nil
}

type resolveRequest struct {
	Broker          string `json:"broker"`
	CommitLogOffset *int64 `json:"commitLogOffset"`
	Commit          *bool  `json:"commit"`
}

// resolveTransaction commits or rolls back a pending transaction, named
// by its broker and the CommitLog offset GET /transactions gave.
func (c *Console) resolveTransaction(ctx context.Context, cl *call) (any, error) {
	var req resolveRequest
	if err := decode(cl.r, &req); err != nil {
		return nil, err
	}
	if req.Broker == "" || req.CommitLogOffset == nil || req.Commit == nil {
		return nil, badRequest("broker, commitLogOffset and commit are required")
	}
	p, err := cl.admin.PendingTransactionAt(ctx, req.Broker, *req.CommitLogOffset)
	if err != nil {
		return nil, err
	}
	if err := cl.admin.ResolveTransaction(ctx, *p, *req.Commit); err != nil {
		return nil, err
	}
	return map[string]bool{"resolved": true}, nil
}

type configEntryJSON struct {
	Key         string `json:"key"`
	Value       string `json:"value"`
	Default     string `json:"default"`
	Runtime     bool   `json:"runtime"`
	Description string `json:"description"`
}

func entriesOf(es []client.BrokerConfigEntry) []configEntryJSON {
	out := make([]configEntryJSON, 0, len(es))
	for _, e := range es {
		out = append(out, configEntryJSON{Key: e.Key, Value: e.Value, Default: e.Default, Runtime: e.Runtime, Description: e.Description})
	}
	return out
}

// brokerMembers returns the addresses of a broker group, master first;
// for a broker without NameServers, itself.
func (c *Console) brokerMembers(ctx context.Context, a *client.Admin, name string) ([]string, error) {
	if len(c.opts.NameServers) == 0 {
		if name != c.opts.Name {
			return nil, errcode.Errorf(errcode.BrokerNotExist, "this broker is %s, and has no NameServer to find %s", c.opts.Name, name)
		}
		return []string{c.opts.Addr}, nil
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	bd, ok := ci.Brokers[name]
	if !ok || len(bd.Addrs) == 0 {
		return nil, errcode.Errorf(errcode.BrokerNotExist, "broker %q is not registered", name)
	}
	ids := make([]int64, 0, len(bd.Addrs))
	for id := range bd.Addrs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = bd.Addrs[id]
	}
	return out, nil
}

// memberAddr is ?addr= when it is a member of the group, else the
// group's master (its lowest member).
func (c *Console) memberAddr(ctx context.Context, cl *call) ([]string, error) {
	members, err := c.brokerMembers(ctx, cl.admin, cl.r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	addr := cl.r.URL.Query().Get("addr")
	if addr == "" {
		return members, nil
	}
	for _, m := range members {
		if m == addr {
			return []string{addr}, nil
		}
	}
	return nil, errcode.Errorf(errcode.BrokerNotExist, "%s is not a member of broker %s", addr, cl.r.PathValue("name"))
}

func (c *Console) brokerConfig(ctx context.Context, cl *call) (any, error) {
	addrs, err := c.memberAddr(ctx, cl)
	if err != nil {
		return nil, err
	}
	entries, err := cl.admin.BrokerConfig(ctx, addrs[0])
	if err != nil {
		return nil, err
	}
	return struct {
		Addr    string            `json:"addr"`
		Entries []configEntryJSON `json:"entries"`
	}{Addr: addrs[0], Entries: entriesOf(entries)}, nil
}

// updateBrokerConfig applies the settings on every member of the group
// (or ?addr= only), stopping at the first refusal.
func (c *Console) updateBrokerConfig(ctx context.Context, cl *call) (any, error) {
	var raw map[string]json.RawMessage
	if err := decode(cl.r, &raw); err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, badRequest("no setting to change")
	}
	kv := make(map[string]string, len(raw))
	for k, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			kv[k] = s
			continue
		}
		var n json.Number
		if err := json.Unmarshal(v, &n); err == nil {
			kv[k] = n.String()
			continue
		}
		var b bool
		if err := json.Unmarshal(v, &b); err == nil {
			kv[k] = strconv.FormatBool(b)
			continue
		}
		return nil, badRequest("%s: the value must be a string, a number or a boolean", k)
	}
	addrs, err := c.memberAddr(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := struct {
		Addrs   []string          `json:"addrs"`
		Entries []configEntryJSON `json:"entries"`
	}{Addrs: []string{}, Entries: []configEntryJSON{}}
	for _, addr := range addrs {
		changed, err := cl.admin.UpdateBrokerConfig(ctx, addr, kv)
		if err != nil {
			return nil, err
		}
		out.Addrs = append(out.Addrs, addr)
		out.Entries = entriesOf(changed)
	}
	return out, nil
}

type writePermRequest struct {
	Writable *bool `json:"writable"`
}

func (c *Console) writePerm(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	var req writePermRequest
	if err := decode(cl.r, &req); err != nil {
		return nil, err
	}
	if req.Writable == nil {
		return nil, badRequest("writable (true or false) is required")
	}
	changed, err := cl.admin.SetBrokerWritable(ctx, cl.r.PathValue("name"), *req.Writable)
	if err != nil {
		return nil, err
	}
	return struct {
		Brokers  []string `json:"brokers"`
		Writable bool     `json:"writable"`
	}{Brokers: nonNil(changed), Writable: *req.Writable}, nil
}
