package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

func newGroupCmd(a *app) *cobra.Command {
	return groupCmd("group", "Declare subscription groups; inspect consumer groups: members, subscriptions and lag",
		"  bolide group list\n  bolide group lag billing\n  bolide group create ledger --fifo --max-delivery-attempts 5",
		newGroupListCmd(a),
		newGroupLagCmd(a),
		newGroupCreateCmd(a, false),
		newGroupCreateCmd(a, true),
		newGroupGetCmd(a),
		newGroupDeleteCmd(a),
		newGroupConnectionsCmd(a),
	)
}

// groupJSON is one consumer group of group list.
type groupJSON struct {
	Group         string            `json:"group"`
	Model         string            `json:"model"`
	Orderly       bool              `json:"orderly"`
	Clients       []string          `json:"clients"`
	Subscriptions map[string]string `json:"subscriptions"`
	Brokers       []string          `json:"brokers"`
}

func newGroupListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List consumer groups with their running members and subscriptions",
		Long: `List the consumer groups the brokers know: groups with running consumers, and groups
with committed offsets and no consumer running (CLIENTS 0).`,
		Example: "  bolide group list\n  bolide group list -o json",
		Args:    exactArgs(0, ""),
		RunE: func(*cobra.Command, []string) error {
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			groups, err := adm.ConsumerGroups(ctx)
			if err != nil {
				return err
			}
			t := newTable("GROUP", "MODEL", "CLIENTS", "SUBSCRIPTIONS", "BROKERS")
			for _, g := range groups {
				j := groupJSON{Group: g.Name, Model: g.Model.String(), Orderly: g.Orderly, Clients: g.ClientIDs,
					Subscriptions: g.Subscriptions, Brokers: slices.Compact(slices.Sorted(slices.Values(g.Brokers)))}
				if j.Clients == nil {
					j.Clients = []string{}
				}
				if j.Subscriptions == nil {
					j.Subscriptions = map[string]string{}
				}
				if a.json() {
					if err := a.emit(j); err != nil {
						return err
					}
					continue
				}
				var subs []string
				for _, topic := range slices.Sorted(maps.Keys(j.Subscriptions)) {
					subs = append(subs, topic+"("+j.Subscriptions[topic]+")")
				}
				model := j.Model
				if j.Orderly {
					model += ", orderly"
				}
				t.row(j.Group, model, len(j.Clients), joinOrDash(subs, " "), joinOrDash(j.Brokers, ","))
			}
			if a.json() {
				return nil
			}
			return t.write(a.stdout)
		},
	}
}

// queueLagJSON is one queue of group lag.
type queueLagJSON struct {
	Topic          string `json:"topic"`
	Broker         string `json:"broker"`
	QueueID        int32  `json:"queueId"`
	BrokerOffset   int64  `json:"brokerOffset"`
	ConsumerOffset int64  `json:"consumerOffset"`
	Lag            int64  `json:"lag"`
	LastStoreTime  string `json:"lastStoreTime"`
}

// groupLagJSON is what group lag prints with -o json: one object.
type groupLagJSON struct {
	Group    string         `json:"group"`
	Topic    string         `json:"topic,omitempty"`
	TotalLag int64          `json:"totalLag"`
	Queues   []queueLagJSON `json:"queues"`
}

func newGroupLagCmd(a *app) *cobra.Command {
	var topic string
	c := &cobra.Command{
		Use:   "lag GROUP",
		Short: "Show a group's progress per queue: broker offset, consumer offset and lag, with totals",
		Long: `Show how far a consumer group is behind on each queue of the topics it consumes (or of
--topic): the queue's max offset, the group's committed offset ("-": none yet) and the
difference. With -o json the output is one object: group, totalLag and a queues array.`,
		Example: `  bolide group lag billing
  bolide group lag billing --topic orders -o json | jq .totalLag`,
		Args:              exactArgs(1, "a GROUP"),
		ValidArgsFunction: a.groupArgCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			group := args[0]
			if err := message.ValidateGroup(group); err != nil {
				return usageErrorf("%v", err)
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			st, err := adm.ConsumeStats(ctx, group, topic)
			if err != nil {
				return forTopic(topic, err)
			}
			if len(st.Queues) == 0 {
				return fmt.Errorf("group %s has no committed offsets and no running consumer (see 'bolide group list')", group)
			}
			out := groupLagJSON{Group: group, Topic: topic, TotalLag: st.TotalLag, Queues: []queueLagJSON{}}
			t := newTable("TOPIC", "BROKER", "QUEUE", "BROKER OFFSET", "CONSUMER OFFSET", "LAG", "LAST STORED")
			var brokerTotal, consumerTotal int64
			topics := map[string]bool{}
			for _, q := range st.Queues {
				out.Queues = append(out.Queues, queueLagJSON{Topic: q.Queue.Topic, Broker: q.Queue.BrokerName,
					QueueID: q.Queue.QueueID, BrokerOffset: q.BrokerOffset, ConsumerOffset: q.ConsumerOffset, Lag: q.Lag,
					LastStoreTime: jsonTime(q.LastTimestamp)})
				consumer := "-"
				if q.ConsumerOffset >= 0 {
					consumer = fmt.Sprint(q.ConsumerOffset)
					consumerTotal += q.ConsumerOffset
				}
				brokerTotal += q.BrokerOffset
				topics[q.Queue.Topic] = true
				t.row(q.Queue.Topic, q.Queue.BrokerName, q.Queue.QueueID, q.BrokerOffset, consumer, q.Lag, q.LastTimestamp)
			}
			if a.json() {
				return a.emit(out)
			}
			t.foot("TOTAL", fmt.Sprintf("%d queues", len(st.Queues)), "", brokerTotal, consumerTotal, st.TotalLag, "")
			if err := t.write(a.stdout); err != nil {
				return err
			}
			if len(topics) > 1 {
				a.info("%d topics: %s", len(topics), strings.Join(slices.Sorted(maps.Keys(topics)), ", "))
			}
			return nil
		},
	}
	c.Flags().StringVarP(&topic, "topic", "t", "", "only this topic")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

// groupArgCompletion completes the first argument as a consumer group.
func (a *app) groupArgCompletion(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 || a.validateGlobals() != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	adm, err := a.adminClient()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := a.opCtx()
	defer cancel()
	groups, err := adm.ConsumerGroups(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, g := range groups {
		out = append(out, g.Name)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// offsetChangeJSON is one queue of offset reset.
type offsetChangeJSON struct {
	Broker  string `json:"broker"`
	QueueID int32  `json:"queueId"`
	Before  int64  `json:"before"`
	After   int64  `json:"after"`
}

// offsetResetJSON is what offset reset prints with -o json: one object.
type offsetResetJSON struct {
	Group  string             `json:"group"`
	Topic  string             `json:"topic"`
	To     string             `json:"to"`
	DryRun bool               `json:"dryRun"`
	Queues []offsetChangeJSON `json:"queues"`
}

func newOffsetCmd(a *app) *cobra.Command {
	return groupCmd("offset", "Move a consumer group's committed offsets",
		"  bolide offset reset --group billing --topic orders --to-time -1h --dry-run",
		newOffsetResetCmd(a),
	)
}

func newOffsetResetCmd(a *app) *cobra.Command {
	var group, topic, toTime string
	var earliest, latest, dryRun, force bool
	c := &cobra.Command{
		Use:   "reset --group G --topic T --to-time T|--to-earliest|--to-latest [--dry-run]",
		Short: "Rewind or advance a group's offsets on a topic to a time, the earliest or the latest",
		Long: `Move a consumer group's committed offsets on a topic, for every queue: --to-time moves to
the first message stored at or after that time, --to-earliest to the oldest message kept,
--to-latest past the newest (skipping everything). Every queue's offset before and after
is shown; --dry-run only shows them.

Running consumers of the group would overwrite the reset with their own position, so the
command refuses while the group has running members, unless --force.`,
		Example: `  bolide offset reset --group billing --topic orders --to-time -1h --dry-run
  bolide offset reset --group billing --topic orders --to-time 2026-01-02T15:00:00Z
  bolide offset reset --group billing --topic orders --to-earliest -o json`,
		Args: exactArgs(0, ""),
	}
	c.RunE = func(*cobra.Command, []string) error {
		if group == "" || topic == "" {
			return usageErrorf("--group and --topic are required")
		}
		if err := message.ValidateGroup(group); err != nil {
			return usageErrorf("--group: %v", err)
		}
		n := 0
		for _, set := range []bool{toTime != "", earliest, latest} {
			if set {
				n++
			}
		}
		if n != 1 {
			return usageErrorf("give exactly one of --to-time, --to-earliest and --to-latest")
		}
		target, to := client.ResetToEarliest, "earliest"
		switch {
		case latest:
			target, to = client.ResetToLatest, "latest"
		case toTime != "":
			t, err := parseTime(toTime, time.Now())
			if err != nil {
				return usageErrorf("--to-time: %v", err)
			}
			target, to = client.ResetToTime(t), formatTime(t)
		}
		adm, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx()
		defer cancel()
		if _, err := adm.Route(ctx, topic); err != nil {
			return forTopic(topic, err)
		}
		groups, err := adm.ConsumerGroups(ctx)
		if err != nil {
			return err
		}
		for _, g := range groups {
			if g.Name != group || len(g.ClientIDs) == 0 {
				continue
			}
			switch {
			case dryRun:
				a.warn("group %s has %d running consumer(s): stop them before the reset", group, len(g.ClientIDs))
			case !force:
				return fmt.Errorf("group %s has %d running consumer(s) (%s) that would overwrite the reset: stop them first, or use --force",
					group, len(g.ClientIDs), strings.Join(g.ClientIDs, ", "))
			}
		}
		changes, err := adm.ResetOffset(ctx, group, topic, target, dryRun)
		if err != nil {
			return forTopic(topic, err)
		}
		out := offsetResetJSON{Group: group, Topic: topic, To: to, DryRun: dryRun, Queues: []offsetChangeJSON{}}
		t := newTable("BROKER", "QUEUE", "BEFORE", "AFTER", "CHANGE")
		var moved int64
		for _, ch := range changes {
			out.Queues = append(out.Queues, offsetChangeJSON{Broker: ch.Queue.BrokerName, QueueID: ch.Queue.QueueID,
				Before: ch.Before, After: ch.After})
			before, delta := "-", "-"
			if ch.Before >= 0 {
				before = fmt.Sprint(ch.Before)
				delta = fmt.Sprintf("%+d", ch.After-ch.Before)
				moved += ch.After - ch.Before
			}
			t.row(ch.Queue.BrokerName, ch.Queue.QueueID, before, ch.After, delta)
		}
		if a.json() {
			return a.emit(out)
		}
		t.foot("TOTAL", fmt.Sprintf("%d queues", len(changes)), "", "", fmt.Sprintf("%+d", moved))
		if err := t.write(a.stdout); err != nil {
			return err
		}
		if dryRun {
			a.info("dry run: nothing changed; run again without --dry-run to move group %s to %s", group, to)
		} else {
			a.info("group %s now starts on %s at %s", group, topic, to)
		}
		return nil
	}
	fs := c.Flags()
	fs.StringVarP(&group, "group", "g", "", "consumer group (required)")
	fs.StringVarP(&topic, "topic", "t", "", "topic (required)")
	fs.StringVar(&toTime, "to-time", "", "move to the first message stored at or after this time")
	fs.BoolVar(&earliest, "to-earliest", false, "move to the oldest message kept")
	fs.BoolVar(&latest, "to-latest", false, "move past the newest message")
	fs.BoolVar(&dryRun, "dry-run", false, "show the change without making it")
	fs.BoolVar(&force, "force", false, "reset even while consumers of the group are running")
	_ = c.RegisterFlagCompletionFunc("topic", a.topicCompletion)
	return c
}

// connectionJSON is one client connection of group connections.
type connectionJSON struct {
	Group          string            `json:"group"`
	Role           string            `json:"role"` // producer or consumer
	Broker         string            `json:"broker"`
	BrokerAddr     string            `json:"brokerAddr"`
	ClientID       string            `json:"clientId"`
	RemoteAddr     string            `json:"remoteAddr"`
	Protocol       string            `json:"protocol"`
	Language       string            `json:"language"`
	Version        string            `json:"version"`
	ConsumeType    string            `json:"consumeType,omitempty"`
	MessageModel   string            `json:"messageModel,omitempty"`
	Subscriptions  map[string]string `json:"subscriptions,omitempty"`
	ConnectedSince string            `json:"connectedSince"`
	LastHeartbeat  string            `json:"lastHeartbeat"`
}

func newGroupConnectionsCmd(a *app) *cobra.Command {
	var producers, consumers bool
	c := &cobra.Command{
		Use:   "connections GROUP",
		Short: "List the clients connected as producers and consumers of a group, on every broker",
		Long: `List the clients connected to the brokers (masters and slaves) as producers and as consumers
of GROUP, whatever their protocol (Bolide's SDK, RocketMQ remoting, RocketMQ 5 gRPC): client id,
its address, protocol, language and version, since when it is connected and its last heartbeat;
for consumers how they consume (PUSH, PULL, POP, SIMPLE), the model and their subscriptions.
A client connected to several brokers has a line per broker. --producers or --consumers shows
only those. mqadmin's producerConnection and consumerConnection.`,
		Example: `  bolide group connections billing
  bolide group connections billing --consumers -o json`,
		Args:              exactArgs(1, "a GROUP"),
		ValidArgsFunction: a.groupArgCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			group := args[0]
			if err := message.ValidateGroup(group); err != nil {
				return usageErrorf("%v", err)
			}
			if !producers && !consumers {
				producers, consumers = true, true
			}
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			gc, err := adm.GroupConnections(ctx, group)
			if err != nil {
				return err
			}
			for _, addr := range slices.Sorted(maps.Keys(gc.Unanswered)) {
				a.warn("broker %s did not answer, its clients are missing: %s", addr, oneLine(gc.Unanswered[addr].Error()))
			}
			var rows []connectionJSON
			if producers {
				for _, cc := range gc.Producers {
					rows = append(rows, connectionRow(group, "producer", cc))
				}
			}
			if consumers {
				for _, cc := range gc.Consumers {
					j := connectionRow(group, "consumer", cc)
					j.ConsumeType, j.MessageModel, j.Subscriptions = cc.ConsumeType, cc.MessageModel.String(), cc.Subscriptions
					if j.Subscriptions == nil {
						j.Subscriptions = map[string]string{}
					}
					rows = append(rows, j)
				}
			}
			if a.json() {
				for _, j := range rows {
					if err := a.emit(j); err != nil {
						return err
					}
				}
				return nil
			}
			if len(rows) == 0 {
				a.info("no client is connected as a %s of %s", roles(producers, consumers), group)
				return nil
			}
			t := newTable("ROLE", "CLIENT ID", "BROKER", "ADDRESS", "PROTOCOL", "LANGUAGE", "VERSION", "CONSUME", "SUBSCRIPTIONS",
				"CONNECTED", "LAST HEARTBEAT")
			for _, j := range rows {
				var subs []string
				for _, topic := range slices.Sorted(maps.Keys(j.Subscriptions)) {
					subs = append(subs, topic+"("+j.Subscriptions[topic]+")")
				}
				consume := j.ConsumeType
				if j.MessageModel != "" {
					consume += ", " + j.MessageModel
				}
				t.row(j.Role, j.ClientID, j.Broker, cell(j.RemoteAddr), cell(j.Protocol), cell(j.Language), cell(j.Version),
					cell(consume), joinOrDash(subs, " "), cell(j.ConnectedSince), cell(j.LastHeartbeat))
			}
			return t.write(a.stdout)
		},
	}
	c.Flags().BoolVar(&producers, "producers", false, "only the producers")
	c.Flags().BoolVar(&consumers, "consumers", false, "only the consumers")
	return c
}

func connectionRow(group, role string, cc client.ClientConnection) connectionJSON {
	return connectionJSON{Group: group, Role: role, Broker: cc.BrokerName, BrokerAddr: cc.BrokerAddr, ClientID: cc.ClientID,
		RemoteAddr: cc.RemoteAddr, Protocol: cc.Protocol, Language: cc.Language, Version: cc.Version,
		ConnectedSince: jsonTime(cc.ConnectedSince), LastHeartbeat: jsonTime(cc.LastHeartbeat)}
}

// roles names what group connections was asked for.
func roles(producers, consumers bool) string {
	switch {
	case producers && consumers:
		return "producer or consumer"
	case producers:
		return "producer"
	}
	return "consumer"
}
