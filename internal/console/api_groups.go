package console

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

type groupJSON struct {
	Group         string            `json:"group"`
	Model         string            `json:"model"`
	Orderly       bool              `json:"orderly"`
	Clients       int               `json:"clients"`
	Subscriptions map[string]string `json:"subscriptions"`
	Brokers       []string          `json:"brokers"`
	TotalLag      *int64            `json:"totalLag"`
	Declared      *declaredJSON     `json:"declared"`
	Error         string            `json:"error"`
}

type declaredJSON struct {
	Broker              string            `json:"broker,omitempty"`
	FIFO                bool              `json:"fifo"`
	MaxDeliveryAttempts int               `json:"maxDeliveryAttempts"`
	RetryPolicy         string            `json:"retryPolicy"`
	RetryBackoff        []jsDuration      `json:"retryBackoff"`
	Exponential         *exponentialJSON  `json:"exponential,omitempty"`
	ConsumeEnable       bool              `json:"consumeEnable"`
	Attributes          map[string]string `json:"attributes,omitempty"`
}

type exponentialJSON struct {
	Initial    jsDuration `json:"initial"`
	Max        jsDuration `json:"max"`
	Multiplier int64      `json:"multiplier"`
}

func declaredOf(g client.SubscriptionGroup, detail bool) *declaredJSON {
	d := &declaredJSON{FIFO: g.FIFO, MaxDeliveryAttempts: g.MaxDeliveryAttempts, RetryPolicy: g.RetryPolicy,
		RetryBackoff: durations(g.RetryBackoff), ConsumeEnable: g.ConsumeEnable}
	if detail {
		d.Broker = g.BrokerName
		d.Attributes = g.Attributes
		if d.Attributes == nil {
			d.Attributes = map[string]string{}
		}
		if e := g.Exponential; e != nil {
			d.Exponential = &exponentialJSON{Initial: jsDuration(e.Initial), Max: jsDuration(e.Max), Multiplier: e.Multiplier}
		}
	}
	return d
}

func modelName(m client.MessageModel) string { return strings.ToUpper(m.String()) }

// groups: the groups the masters know (members online or offsets
// committed) and the declared ones, each with its lag, asked with bounded
// parallelism.
func (c *Console) groups(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	var declared []client.SubscriptionGroup
	var declErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		declared, declErr = cl.admin.SubscriptionGroups(ctx)
	}()
	online, err := cl.admin.ConsumerGroups(ctx)
	<-done
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*groupJSON)
	var out []*groupJSON
	get := func(name string) *groupJSON {
		g := byName[name]
		if g == nil {
			g = &groupJSON{Group: name, Subscriptions: map[string]string{}, Brokers: []string{}}
			byName[name] = g
			out = append(out, g)
		}
		return g
	}
	for _, og := range online {
		g := get(og.Name)
		if len(og.ClientIDs) > 0 {
			g.Model = modelName(og.Model)
		}
		g.Orderly = og.Orderly
		g.Clients = len(og.ClientIDs)
		for t, e := range og.Subscriptions {
			g.Subscriptions[t] = e
		}
		g.Brokers = nonNil(og.Brokers)
	}
	for _, dg := range declared {
		if g := get(dg.Name); g.Declared == nil {
			g.Declared = declaredOf(dg, false)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	each(len(out), func(i int) {
		g := out[i]
		st, err := cl.admin.ConsumeStats(ctx, g.Group, "")
		if err != nil {
			g.Error = err.Error()
			return
		}
		lag := st.TotalLag
		g.TotalLag = &lag
	})
	resp := struct {
		Groups []*groupJSON `json:"groups"`
		Error  string       `json:"error"`
	}{Groups: nonNil(out)}
	if declErr != nil {
		resp.Error = declErr.Error()
	}
	return resp, nil
}

type groupQueueJSON struct {
	Topic          string `json:"topic"`
	Broker         string `json:"broker"`
	QueueID        int32  `json:"queueId"`
	BrokerOffset   int64  `json:"brokerOffset"`
	ConsumerOffset int64  `json:"consumerOffset"`
	Lag            int64  `json:"lag"`
	LastStoreTime  jsTime `json:"lastStoreTime"`
}

type onlineJSON struct {
	Model         string            `json:"model"`
	Orderly       bool              `json:"orderly"`
	Subscriptions map[string]string `json:"subscriptions"`
	ClientIDs     []string          `json:"clientIds"`
	Brokers       []string          `json:"brokers"`
}

type groupDetailJSON struct {
	Group       string           `json:"group"`
	TotalLag    int64            `json:"totalLag"`
	Queues      []groupQueueJSON `json:"queues"`
	Online      *onlineJSON      `json:"online"`
	Connections *connectionsJSON `json:"connections"`
	Declared    []*declaredJSON  `json:"declared"`
	Error       string           `json:"error"`
}

// group: a group's lag per queue, its members and its declaration.
func (c *Console) group(ctx context.Context, cl *call) (any, error) {
	if len(c.opts.NameServers) == 0 {
		return nil, errNoNameServer
	}
	name := cl.r.PathValue("group")
	if err := message.ValidateGroup(name); err != nil {
		return nil, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	out := groupDetailJSON{Group: name, Queues: []groupQueueJSON{}}
	var errs []error
	var online []client.ConsumerGroup
	var declared []client.SubscriptionGroup
	var onlineErr, declErr, connErr error
	var conns *connectionsJSON
	done := make(chan struct{}, 3)
	go func() { online, onlineErr = cl.admin.ConsumerGroups(ctx); done <- struct{}{} }()
	go func() { declared, declErr = cl.admin.SubscriptionGroup(ctx, name); done <- struct{}{} }()
	go func() { conns, connErr = groupConnections(ctx, cl.admin, name); done <- struct{}{} }()
	st, err := cl.admin.ConsumeStats(ctx, name, "")
	for range 3 {
		<-done
	}
	if err != nil {
		return nil, err
	}
	out.TotalLag = st.TotalLag
	for _, q := range st.Queues {
		out.Queues = append(out.Queues, groupQueueJSON{Topic: q.Queue.Topic, Broker: q.Queue.BrokerName,
			QueueID: q.Queue.QueueID, BrokerOffset: q.BrokerOffset, ConsumerOffset: q.ConsumerOffset, Lag: q.Lag,
			LastStoreTime: jsTime(q.LastTimestamp)})
	}
	known := len(st.Queues) > 0
	if onlineErr != nil {
		errs = append(errs, onlineErr)
	}
	for _, g := range online {
		if g.Name != name {
			continue
		}
		known = true
		if len(g.ClientIDs) > 0 {
			out.Online = &onlineJSON{Model: modelName(g.Model), Orderly: g.Orderly, Subscriptions: g.Subscriptions,
				ClientIDs: g.ClientIDs, Brokers: nonNil(g.Brokers)}
			if out.Online.Subscriptions == nil {
				out.Online.Subscriptions = map[string]string{}
			}
		}
	}
	switch {
	case declErr == nil:
		known = known || len(declared) > 0
		for _, d := range declared {
			out.Declared = append(out.Declared, declaredOf(d, true))
		}
	case !errors.Is(declErr, client.ErrGroupNotExist):
		errs = append(errs, declErr)
	}
	if connErr != nil {
		errs = append(errs, connErr)
	}
	if conns != nil {
		out.Connections = conns
		known = known || len(conns.Producers) > 0 || len(conns.Consumers) > 0
	}
	if !known && len(errs) == 0 {
		return nil, errcode.Errorf(errcode.SubscriptionGroupMissing, "no broker knows group %s: no member, declaration or offset", name)
	}
	if len(errs) > 0 {
		out.Error = errors.Join(errs...).Error()
	}
	return out, nil
}

// parseResetTarget reads "earliest", "latest", an RFC 3339 time or a
// duration ago.
func parseResetTarget(s string, now time.Time) (client.ResetTarget, error) {
	switch strings.ToLower(s) {
	case "earliest":
		return client.ResetToEarliest, nil
	case "latest":
		return client.ResetToLatest, nil
	}
	t, err := parseTime(s, now)
	if err != nil {
		return client.ResetTarget{}, badRequest("to %q: earliest, latest, an RFC 3339 time or a duration ago (1h)", s)
	}
	return client.ResetToTime(t), nil
}

// parseTime reads an RFC 3339 time or a duration ago ("90m").
func parseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, badRequest("%q is neither an RFC 3339 time nor a duration ago", s)
	}
	return now.Add(-d), nil
}

type resetRequest struct {
	Topic  string `json:"topic"`
	To     string `json:"to"`
	DryRun bool   `json:"dryRun"`
	Force  bool   `json:"force"`
}

type offsetChangeJSON struct {
	Topic   string `json:"topic"`
	Broker  string `json:"broker"`
	QueueID int32  `json:"queueId"`
	Before  int64  `json:"before"`
	After   int64  `json:"after"`
}

func (c *Console) resetGroup(ctx context.Context, cl *call) (any, error) {
	name := cl.r.PathValue("group")
	var req resetRequest
	if err := decode(cl.r, &req); err != nil {
		return nil, err
	}
	if err := message.ValidateGroup(name); err != nil {
		return nil, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	if err := message.ValidateTopic(req.Topic); err != nil {
		return nil, errcode.Errorf(errcode.IllegalTopic, "topic: %v", err)
	}
	to, err := parseResetTarget(req.To, time.Now())
	if err != nil {
		return nil, err
	}
	if !req.DryRun && !req.Force {
		online, err := cl.admin.ConsumerGroups(ctx)
		if err != nil {
			return nil, err
		}
		for _, g := range online {
			if g.Name == name && len(g.ClientIDs) > 0 {
				return nil, badRequest("group %s has %d member(s) online: they would commit their own positions again; stop them first, or force the reset",
					name, len(g.ClientIDs))
			}
		}
	}
	changes, err := cl.admin.ResetOffset(ctx, name, req.Topic, to, req.DryRun)
	if err != nil {
		return nil, err
	}
	out := struct {
		DryRun  bool               `json:"dryRun"`
		Changes []offsetChangeJSON `json:"changes"`
	}{DryRun: req.DryRun, Changes: []offsetChangeJSON{}}
	for _, ch := range changes {
		out.Changes = append(out.Changes, offsetChangeJSON{Topic: ch.Queue.Topic, Broker: ch.Queue.BrokerName,
			QueueID: ch.Queue.QueueID, Before: ch.Before, After: ch.After})
	}
	return out, nil
}

type putGroupRequest struct {
	FIFO                *bool    `json:"fifo"`
	MaxDeliveryAttempts *int     `json:"maxDeliveryAttempts"`
	RetryBackoff        []string `json:"retryBackoff"`
	ConsumeEnable       *bool    `json:"consumeEnable"`
	Cluster             string   `json:"cluster"`
	Brokers             []string `json:"brokers"`
}

// putGroup declares a subscription group or changes it, as bolide group
// update does: settings not given keep their current value.
func (c *Console) putGroup(ctx context.Context, cl *call) (any, error) {
	name := cl.r.PathValue("group")
	var req putGroupRequest
	if err := decode(cl.r, &req); err != nil {
		return nil, err
	}
	if err := message.ValidateGroup(name); err != nil {
		return nil, errcode.Errorf(errcode.IllegalGroup, "%v", err)
	}
	if req.MaxDeliveryAttempts != nil && (*req.MaxDeliveryAttempts < 1 || *req.MaxDeliveryAttempts > 1000) {
		return nil, badRequest("maxDeliveryAttempts must be in 1..1000, not %d", *req.MaxDeliveryAttempts)
	}
	// consumeEnable false stops the group (its pulls and receives are
	// refused, offsets kept), true starts it again; absent keeps it.
	spec := client.SubscriptionGroupSpec{Name: name, Cluster: req.Cluster, BrokerNames: req.Brokers,
		ConsumeEnable: req.ConsumeEnable}
	if req.RetryBackoff != nil {
		for _, s := range req.RetryBackoff {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return nil, badRequest("retryBackoff %q is not a positive duration", s)
			}
			spec.RetryBackoff = append(spec.RetryBackoff, d)
		}
	}
	cur, err := cl.admin.SubscriptionGroup(ctx, name)
	if err != nil && !errors.Is(err, client.ErrGroupNotExist) {
		return nil, err
	}
	if len(cur) > 0 {
		g := cur[0]
		spec.FIFO, spec.MaxDeliveryAttempts = g.FIFO, g.MaxDeliveryAttempts
		if req.RetryBackoff == nil {
			spec.RetryBackoff, spec.Exponential = g.RetryBackoff, g.Exponential
			if g.RetryPolicy == client.RetryExponential {
				spec.RetryBackoff = nil
			}
		}
		if req.Cluster == "" && len(req.Brokers) == 0 {
			for _, g := range cur {
				spec.BrokerNames = append(spec.BrokerNames, g.BrokerName)
			}
		}
	}
	if req.FIFO != nil {
		spec.FIFO = *req.FIFO
	}
	if req.MaxDeliveryAttempts != nil {
		spec.MaxDeliveryAttempts = *req.MaxDeliveryAttempts
	}
	if err := cl.admin.UpdateSubscriptionGroup(ctx, spec); err != nil {
		return nil, err
	}
	got, err := cl.admin.SubscriptionGroup(ctx, name)
	if err != nil {
		return nil, err
	}
	out := struct {
		Group    string          `json:"group"`
		Created  bool            `json:"created"`
		Declared []*declaredJSON `json:"declared"`
	}{Group: name, Created: len(cur) == 0, Declared: []*declaredJSON{}}
	for _, g := range got {
		out.Declared = append(out.Declared, declaredOf(g, true))
	}
	return out, nil
}
