package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/message"
)

func newTopicCmd(a *app) *cobra.Command {
	return groupCmd("topic", "Create, change, delete and inspect topics",
		`  bolide topic create orders --queues 8
  bolide topic list
  bolide topic status orders`,
		newTopicCreateCmd(a, false),
		newTopicCreateCmd(a, true),
		newTopicDeleteCmd(a),
		newTopicListCmd(a),
		newTopicRouteCmd(a),
		newTopicStatusCmd(a),
	)
}

// topicJSON is what topic create and update print.
type topicJSON struct {
	Topic   string   `json:"topic"`
	Queues  int      `json:"queues"`
	Perm    string   `json:"perm"`
	Order   bool     `json:"order"`
	Type    string   `json:"messageType"`
	Brokers []string `json:"brokers"`
}

func newTopicCreateCmd(a *app, update bool) *cobra.Command {
	var (
		queues  int
		perm    string
		order   bool
		mtype   string
		cluster string
		brokers string
	)
	c := &cobra.Command{
		Use:   "create TOPIC",
		Short: "Create a topic on every master (or those of one cluster or of some broker groups)",
		Long: `Create a topic. By default every master of every cluster gets the topic with --queues read
and write queues; --cluster limits it to one cluster, --broker to some broker groups. The
command returns once the NameServers route the topic.`,
		Example: `  bolide topic create orders
  bolide topic create payments --queues 16 --cluster DefaultCluster
  bolide topic create audit --queues 4 --order --broker broker-a -o json
  bolide topic create payments --type FIFO`,
		Args:              exactArgs(1, "a TOPIC"),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	if update {
		c.Use = "update TOPIC"
		c.Short = "Change a topic's queues, permission, order flag or message type"
		c.Long = `Change a topic. Settings not given keep their current value (the message type too). A topic
that does not exist is an error (TOPIC_NOT_EXIST): create it with 'bolide topic create'. The
command returns once the NameServers route the new configuration.`
		c.Example = `  bolide topic update orders --queues 16
  bolide topic update orders --perm r        # stop writes, keep reads
  bolide topic update orders --perm rw
  bolide topic update orders --type NORMAL`
		c.ValidArgsFunction = a.topicArgCompletion
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		topic := args[0]
		if err := message.ValidateTopic(topic); err != nil {
			return usageErrorf("%v", err)
		}
		spec := client.TopicSpec{Name: topic, Queues: queues, Order: order, Cluster: cluster, BrokerNames: splitList(brokers)}
		if mtype != "" {
			mt, ok := client.ParseTopicMessageType(mtype)
			if !ok {
				return usageErrorf("--type must be one of %s, not %q", strings.Join(client.TopicMessageTypes, ", "), mtype)
			}
			spec.MessageType = mt
		}
		p, err := parsePerm(perm)
		if err != nil {
			return usageErrorf("--perm: %v", err)
		}
		spec.Perm = p
		if spec.Perm == 0 {
			return usageErrorf("--perm: a topic needs r, w or rw")
		}
		if queues < 1 || queues > 1024 {
			return usageErrorf("--queues must be in 1..1024, not %d", queues)
		}
		adm, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx()
		defer cancel()
		if update {
			if err := a.keepTopicSettings(cmd, &spec); err != nil {
				return err
			}
			err = adm.UpdateTopic(ctx, spec)
			if errors.Is(err, client.ErrTopicNotExist) {
				return &missingTopicError{topic: topic, err: err}
			}
		} else {
			err = adm.CreateTopic(ctx, spec)
		}
		if err != nil {
			return forTopic(topic, err)
		}
		r, err := adm.Route(ctx, topic)
		if err != nil {
			return forTopic(topic, err)
		}
		mt, _ := client.ParseTopicMessageType(spec.MessageType)
		out := topicJSON{Topic: topic, Queues: spec.Queues, Perm: permString(spec.Perm), Order: spec.Order, Type: mt}
		for _, q := range r.Queues {
			out.Brokers = append(out.Brokers, q.BrokerName)
		}
		if a.json() {
			return a.emit(out)
		}
		verb := "created"
		if update {
			verb = "updated"
		}
		order := ""
		if spec.Order {
			order = ", ordered"
		}
		if mt != client.TopicMixed {
			order += ", type " + mt
		}
		fmt.Fprintf(a.stdout, "%s topic %s: %d queues on %s (perm %s%s)\n", verb, topic, spec.Queues,
			strings.Join(out.Brokers, ", "), out.Perm, order)
		return nil
	}
	fs := c.Flags()
	fs.IntVar(&queues, "queues", 8, "read and write queues on each broker group")
	fs.StringVar(&perm, "perm", "rw", "permission: rw, r (read only) or w (write only)")
	fs.BoolVar(&order, "order", false, "mark the topic ordered (consumers lock queues)")
	fs.StringVar(&mtype, "type", "", "message type the topic accepts: NORMAL, FIFO, DELAY, TRANSACTION or MIXED (default: any, as MIXED)")
	fs.StringVar(&cluster, "cluster", "", "only the masters of this cluster")
	fs.StringVar(&brokers, "broker", "", "only these broker groups (comma-separated)")
	_ = c.RegisterFlagCompletionFunc("perm", fixedCompletion("rw", "r", "w"))
	_ = c.RegisterFlagCompletionFunc("type", fixedCompletion(client.TopicMessageTypes...))
	return c
}

// missingTopicError is topic update's refusal of a topic that does not
// exist: one line pointing at topic create (RocketMQ's updateTopic would
// create it; a mistyped name should not become a topic).
type missingTopicError struct {
	topic string
	err   error
}

func (e *missingTopicError) Error() string {
	return fmt.Sprintf("topic %q does not exist on any registered broker (create it with 'bolide topic create')", e.topic)
}

func (e *missingTopicError) Unwrap() error { return e.err }

// keepTopicSettings fills the settings topic update was not given from
// the topic's current route (and the order flag from its configuration).
func (a *app) keepTopicSettings(cmd *cobra.Command, spec *client.TopicSpec) error {
	adm, err := a.adminClient()
	if err != nil {
		return err
	}
	ctx, cancel := a.opCtx()
	defer cancel()
	r, err := adm.Route(ctx, spec.Name)
	if errors.Is(err, client.ErrTopicNotExist) {
		return &missingTopicError{topic: spec.Name, err: err}
	}
	if err != nil {
		return forTopic(spec.Name, err)
	}
	if len(r.Queues) == 0 {
		return nil
	}
	cur := r.Queues[0]
	fs := cmd.Flags()
	if !fs.Changed("queues") {
		spec.Queues = int(cur.WriteQueues)
	}
	if !fs.Changed("perm") {
		spec.Perm = cur.Perm & client.PermReadWrite
	}
	if !fs.Changed("cluster") && !fs.Changed("broker") {
		for _, q := range r.Queues {
			spec.BrokerNames = append(spec.BrokerNames, q.BrokerName)
		}
	}
	if !fs.Changed("order") || !fs.Changed("type") {
		cfgs, err := adm.TopicConfig(ctx, spec.Name)
		if err != nil {
			return forTopic(spec.Name, err)
		}
		if !fs.Changed("order") {
			spec.Order = cfgs[0].Order
		}
		if !fs.Changed("type") {
			spec.MessageType = cfgs[0].Attributes[client.AttrMessageType]
		}
	}
	return nil
}

func newTopicDeleteCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "delete TOPIC",
		Short: "Delete a topic from its brokers and the NameServers",
		Long: `Delete a topic: its queues are removed from every broker at once, and its messages are
removed with the CommitLog segments that hold them (retention).`,
		Example:           "  bolide topic delete orders-test",
		Args:              exactArgs(1, "a TOPIC"),
		ValidArgsFunction: a.topicArgCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			topic := args[0]
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			// Deleting an unknown topic is an error, as for kafka-topics.
			if _, err := adm.Route(ctx, topic); err != nil {
				return forTopic(topic, err)
			}
			if err := adm.DeleteTopic(ctx, topic); err != nil {
				return forTopic(topic, err)
			}
			if a.json() {
				return a.emit(map[string]any{"topic": topic, "deleted": true})
			}
			fmt.Fprintf(a.stdout, "deleted topic %s\n", topic)
			return nil
		},
	}
}

// topicType classifies a topic for topic list.
func topicType(t string) string {
	switch {
	case message.IsRetryTopic(t):
		return "retry"
	case message.IsDLQTopic(t):
		return "dlq"
	case message.IsSystemTopic(t):
		return "system"
	}
	return "normal"
}

// topicKind says what a topic holds, for topic list --all.
func topicKind(t string) string {
	switch {
	case message.IsRetryTopic(t):
		return "retries of group " + strings.TrimPrefix(t, message.RetryTopicPrefix)
	case message.IsDLQTopic(t):
		return "dead letters of group " + strings.TrimPrefix(t, message.DLQTopicPrefix)
	}
	switch t {
	case message.ScheduleTopic:
		return "delayed messages (delay levels)"
	case message.TimerTopic:
		return "messages delivered at a set time"
	case message.TransHalfTopic:
		return "transaction half messages"
	case message.TransOpHalfTopic:
		return "transaction outcomes"
	case message.TransCheckMaxTopic:
		return "discarded transactions (txn list)"
	case message.PopLogTopic:
		return "POP consumption state"
	case message.AutoCreateTopic:
		return "route template for auto-created topics"
	}
	switch {
	case message.IsSystemTopic(t):
		return "system"
	case strings.HasSuffix(t, "_REPLY_TOPIC"):
		return "replies to requests (a cluster's reply topic)"
	}
	return "" // a topic of the users' messages
}

// messageTypeOf is a topic's message type on its broker groups: "" when
// none answered, the types joined by "/" when they disagree.
func messageTypeOf(cfgs []client.TopicConfig) string {
	var types []string
	for i := range cfgs {
		types = append(types, cfgs[i].MessageType())
	}
	return strings.Join(slices.Compact(slices.Sorted(slices.Values(types))), "/")
}

func newTopicListCmd(a *app) *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List topics; TYPE marks retry (%RETRY%) and dead-letter (%DLQ%) topics, MESSAGE TYPE what a topic accepts",
		Long: `List the topics the NameServers route. --all adds the topics of the system, which the brokers
keep to themselves (the NameServers do not route them): they are read from the brokers' topic
configurations, and a KIND column says what each holds.`,
		Example: `  bolide topic list
  bolide topic list --all
  bolide topic list --type dlq -o json`,
		Args: exactArgs(0, ""),
	}
	var typ string
	c.RunE = func(*cobra.Command, []string) error {
		switch typ {
		case "", "normal", "retry", "dlq", "system":
		default:
			return usageErrorf("--type must be normal, retry, dlq or system, not %q", typ)
		}
		adm, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx()
		defer cancel()
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		cfgs, err := adm.AllTopicConfigs(ctx)
		if err != nil {
			a.warn("message types may be missing: %s", oneLine(err.Error()))
		}
		system := all || typ == "system"
		if system {
			// The brokers do not register their system topics with the
			// NameServers: the brokers list them (their configurations, and
			// their topic stats, which name the topics their store holds).
			names := slices.Collect(maps.Keys(cfgs))
			stats, err := adm.TopicStats(ctx)
			if err != nil {
				a.warn("system topics may be missing: %s", oneLine(err.Error()))
			}
			for _, st := range stats {
				names = append(names, st.Topic)
			}
			for _, name := range names {
				if message.IsSystemTopic(name) && !slices.Contains(topics, name) {
					topics = append(topics, name)
				}
			}
			slices.Sort(topics)
		}
		header := []string{"TOPIC", "TYPE", "MESSAGE TYPE"}
		if all {
			header = append(header, "KIND")
		}
		t := newTable(header...)
		for _, name := range topics {
			kind := topicType(name)
			if typ != "" && kind != typ || !system && kind == "system" {
				continue
			}
			mt := messageTypeOf(cfgs[name])
			if a.json() {
				j := map[string]string{"topic": name, "type": kind, "messageType": mt}
				if all {
					j["kind"] = topicKind(name)
				}
				if err := a.emit(j); err != nil {
					return err
				}
				continue
			}
			if mt == "" {
				mt = "-"
			}
			if all {
				t.row(name, kind, mt, topicKind(name))
			} else {
				t.row(name, kind, mt)
			}
		}
		if a.json() {
			return nil
		}
		return t.write(a.stdout)
	}
	c.Flags().StringVar(&typ, "type", "", "only topics of this type: normal, retry, dlq or system")
	c.Flags().BoolVar(&all, "all", false, "include the broker's system topics")
	_ = c.RegisterFlagCompletionFunc("type", fixedCompletion("normal", "retry", "dlq", "system"))
	return c
}

// routeJSON is one broker group of a topic's route.
type routeJSON struct {
	Topic       string            `json:"topic"`
	Broker      string            `json:"broker"`
	Cluster     string            `json:"cluster"`
	ReadQueues  int32             `json:"readQueues"`
	WriteQueues int32             `json:"writeQueues"`
	Perm        string            `json:"perm"`
	Addrs       map[string]string `json:"addrs"`
}

func newTopicRouteCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:               "route TOPIC",
		Short:             "Show where a topic lives: its queues on each broker group and their addresses",
		Example:           "  bolide topic route orders\n  bolide topic route orders -o json",
		Args:              exactArgs(1, "a TOPIC"),
		ValidArgsFunction: a.topicArgCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			topic := args[0]
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			r, err := adm.Route(ctx, topic)
			if err != nil {
				return forTopic(topic, err)
			}
			brokers := make(map[string]client.BrokerData, len(r.Brokers))
			for _, b := range r.Brokers {
				brokers[b.BrokerName] = b
			}
			t := newTable("BROKER", "CLUSTER", "READ", "WRITE", "PERM", "ADDRESSES")
			for _, q := range r.Queues {
				b := brokers[q.BrokerName]
				addrs := map[string]string{}
				var shown []string
				for _, id := range slices.Sorted(maps.Keys(b.Addrs)) {
					addrs[fmt.Sprint(id)] = b.Addrs[id]
					role := "slave"
					if id == 0 {
						role = "master"
					}
					shown = append(shown, fmt.Sprintf("%s=%s", role, b.Addrs[id]))
				}
				if a.json() {
					if err := a.emit(routeJSON{Topic: topic, Broker: q.BrokerName, Cluster: b.Cluster, ReadQueues: q.ReadQueues,
						WriteQueues: q.WriteQueues, Perm: permString(q.Perm), Addrs: addrs}); err != nil {
						return err
					}
					continue
				}
				t.row(q.BrokerName, b.Cluster, q.ReadQueues, q.WriteQueues, permString(q.Perm), joinOrDash(shown, " "))
			}
			if a.json() {
				return nil
			}
			return t.write(a.stdout)
		},
	}
}

// queueStatusJSON is one queue of topic status.
type queueStatusJSON struct {
	Topic         string `json:"topic"`
	Broker        string `json:"broker"`
	QueueID       int32  `json:"queueId"`
	MinOffset     int64  `json:"minOffset"`
	MaxOffset     int64  `json:"maxOffset"`
	Messages      int64  `json:"messages"`
	LastStoreTime string `json:"lastStoreTime"`
}

func newTopicStatusCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status TOPIC",
		Short: "Show each queue's min and max offset and the store time of its newest message",
		Example: `  bolide topic status orders
  bolide topic status orders -o json | jq -s 'map(.messages) | add'`,
		Args:              exactArgs(1, "a TOPIC"),
		ValidArgsFunction: a.topicArgCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			topic := args[0]
			adm, err := a.adminClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx()
			defer cancel()
			qs, err := adm.QueueStatus(ctx, topic)
			if err != nil {
				return forTopic(topic, err)
			}
			t := newTable("BROKER", "QUEUE", "MIN", "MAX", "MESSAGES", "LAST STORED")
			var total int64
			var last time.Time
			for _, q := range qs {
				n := q.MaxOffset - q.MinOffset
				total += n
				if q.LastStoreTime.After(last) {
					last = q.LastStoreTime
				}
				if a.json() {
					if err := a.emit(queueStatusJSON{Topic: topic, Broker: q.Queue.BrokerName, QueueID: q.Queue.QueueID,
						MinOffset: q.MinOffset, MaxOffset: q.MaxOffset, Messages: n, LastStoreTime: jsonTime(q.LastStoreTime)}); err != nil {
						return err
					}
					continue
				}
				t.row(q.Queue.BrokerName, q.Queue.QueueID, q.MinOffset, q.MaxOffset, n, q.LastStoreTime)
			}
			if a.json() {
				return nil
			}
			t.foot("TOTAL", fmt.Sprintf("%d queues", len(qs)), "", "", total, last)
			return t.write(a.stdout)
		},
	}
}
