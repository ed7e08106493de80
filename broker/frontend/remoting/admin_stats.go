package remoting

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

// adminRuntimeInfo serves GET_BROKER_RUNTIME_INFO (28): the KVTable that
// mqadmin brokerStatus prints and clusterList reads (version, TPS, the
// day's message counts, disk ratio, earliest message). Bolide counts
// messages since the broker started and keeps no daily marks or TPS
// windows: the "today" counters are the totals since start, the morning
// marks 0, and the TPS figures 0 (Prometheus rates give them).
func (f *Frontend) adminRuntimeInfo(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	info := f.b.Info()
	in, out, inBytes := f.messageTotals()
	version := info.Version
	if version == "" {
		version = "bolide"
	}
	active := "false"
	if f.b.IsMaster() {
		active = "true"
	}
	t := map[string]string{
		"brokerVersionDesc":   version,
		"brokerVersion":       strconv.Itoa(int(rmq.ServerVersion)),
		"brokerActive":        active,
		"brokerName":          info.BrokerName,
		"brokerId":            strconv.FormatInt(info.BrokerID, 10),
		"clusterName":         info.Cluster,
		"brokerRole":          f.b.Role().String(),
		"bootTimestamp":       strconv.FormatInt(info.StartTime.UnixMilli(), 10),
		"runtime":             runtimeText(time.Since(info.StartTime)),
		"commitLogMinOffset":  strconv.FormatInt(info.CommitLogMinOffset, 10),
		"commitLogMaxOffset":  strconv.FormatInt(info.CommitLogMaxOffset, 10),
		"commitLogDiskRatio":  strconv.FormatFloat(info.DiskUsedRatio, 'f', -1, 64),
		"dispatchBehindBytes": strconv.FormatInt(max(info.DispatchBehindBytes, 0), 10),
		"flushDiskType":       info.FlushMode,

		"msgPutTotalYesterdayMorning": "0",
		"msgPutTotalTodayMorning":     "0",
		"msgPutTotalTodayNow":         strconv.FormatInt(in, 10),
		"msgGetTotalYesterdayMorning": "0",
		"msgGetTotalTodayMorning":     "0",
		"msgGetTotalTodayNow":         strconv.FormatInt(out, 10),
		"putMessageTimesTotal":        strconv.FormatInt(in, 10),
		"putMessageSizeTotal":         strconv.FormatInt(inBytes, 10),

		"putTps":            "0.0 0.0 0.0",
		"getTransferredTps": "0.0 0.0 0.0",
		"getFoundTps":       "0.0 0.0 0.0",
		"getMissTps":        "0.0 0.0 0.0",
		"getTotalTps":       "0.0 0.0 0.0",

		"sendThreadPoolQueueSize":              "0",
		"sendThreadPoolQueueHeadWaitTimeMills": "0",
		"pullThreadPoolQueueSize":              "0",
		"pullThreadPoolQueueHeadWaitTimeMills": "0",
		"pageCacheLockTimeMills":               "0",

		"timerReadBehind":   "0",
		"timerOffsetBehind": "0",
		"timerCongestNum":   "0",
		"timerEnqueueTps":   "0.0",
		"timerDequeueTps":   "0.0",
	}
	if ts := f.firstMessageStoreTime(info.CommitLogMinOffset, info.CommitLogMaxOffset); ts > 0 {
		t["earliestMessageTimeStamp"] = strconv.FormatInt(ts, 10)
	}
	return adminJSON(req, struct {
		Table map[string]string `json:"table"`
	}{t})
}

// runtimeText is RocketMQ's "runtime" figure.
func runtimeText(d time.Duration) string {
	s := int64(d / time.Second)
	return "[ " + strconv.FormatInt(s/86400, 10) + " days, " + strconv.FormatInt(s/3600%24, 10) + " hours, " +
		strconv.FormatInt(s/60%60, 10) + " minutes, " + strconv.FormatInt(s%60, 10) + " seconds ]"
}

// messageTotals reads the broker's message counters (stored, pulled, stored
// body bytes) since it started, from its metrics.
func (f *Frontend) messageTotals() (in, out, inBytes int64) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(f.b.Collector()); err != nil {
		return 0, 0, 0
	}
	mfs, _ := reg.Gather() // a failed figure leaves the others
	for _, mf := range mfs {
		var sum float64
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		switch mf.GetName() {
		case "rocketmq_messages_in_total":
			in = int64(sum)
		case "rocketmq_messages_out_total":
			out = int64(sum)
		case "rocketmq_throughput_in_total":
			inBytes = int64(sum)
		}
	}
	return in, out, inBytes
}

// firstMessageStoreTime is the store time of the CommitLog's first message, 0
// when there is none.
func (f *Frontend) firstMessageStoreTime(minOff, maxOff int64) int64 {
	if maxOff <= minOff {
		return 0
	}
	rec, err := f.b.ViewMessage("", minOff)
	if err != nil {
		return 0
	}
	m, err := message.Decode(rec)
	if err != nil {
		return 0
	}
	return m.StoreTimestamp
}

// topicOffsetJSON is RocketMQ's TopicOffset.
type topicOffsetJSON struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

// adminTopicStats serves GET_TOPIC_STATS_INFO (202): each write queue's
// min and max offset and newest store time, as a TopicStatsTable.
func (f *Frontend) adminTopicStats(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	tc, refused := f.requestTopic(req)
	if refused != nil {
		return refused
	}
	name := tc.Name
	bname := f.b.Options().BrokerName
	entries := make([]mqEntry, 0, tc.WriteQueueNums)
	for q := int32(0); q < tc.WriteQueueNums; q++ {
		st, err := f.b.QueueState(name, q)
		if err != nil {
			return adminFail(req, err)
		}
		entries = append(entries, mqEntry{Topic: name, BrokerName: bname, QueueID: q,
			Value: topicOffsetJSON{MinOffset: st.MinOffset, MaxOffset: st.MaxOffset, LastUpdateTimestamp: st.LastStoreTimestamp}})
	}
	table, err := mqTable(entries)
	if err != nil {
		return req.Reply(rmq.SystemError, err.Error())
	}
	return adminOK(req, adminObject("offsetTable", table, "topicPutTps", 0.0))
}

// offsetWrapperJSON is RocketMQ's OffsetWrapper.
type offsetWrapperJSON struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	PullOffset     int64 `json:"pullOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

// adminConsumeStats serves GET_CONSUME_STATS (208): a group's progress on a
// topic, on a list of topics (topicList, ";"-separated), or on every topic
// it consumes, as a ConsumeStats. A queue the group never committed counts
// as consumed to 0, as RocketMQ counts it; lastTimestamp is the store time
// of the last consumed message.
func (f *Frontend) adminConsumeStats(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	group, err := req.Required("consumerGroup")
	if err != nil {
		return adminBadRequest(req, err)
	}
	var topics []string
	for _, t := range strings.Split(req.String("topicList"), ";") {
		if t = strings.TrimSpace(t); t != "" {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		topics = []string{req.String("topic")}
	}
	bname := f.b.Options().BrokerName
	var entries []mqEntry
	for _, topic := range topics {
		stats, err := f.b.ConsumeStats(group, topic)
		if err != nil {
			if errcode.Of(err) == errcode.TopicNotExist {
				continue // RocketMQ skips a topic the broker does not have
			}
			return adminFail(req, err)
		}
		for _, s := range stats {
			w := offsetWrapperJSON{BrokerOffset: max(s.BrokerOffset, 0), ConsumerOffset: max(s.ConsumerOffset, 0)}
			w.PullOffset = w.ConsumerOffset
			if w.ConsumerOffset > 0 {
				if ts, err := f.b.Store().StoreTimeAt(s.Topic, s.ID, w.ConsumerOffset-1); err == nil {
					w.LastTimestamp = ts
				}
			}
			entries = append(entries, mqEntry{Topic: s.Topic, BrokerName: bname, QueueID: s.ID, Value: w})
		}
	}
	table, err := mqTable(entries)
	if err != nil {
		return req.Reply(rmq.SystemError, err.Error())
	}
	return adminOK(req, adminObject("offsetTable", table, "consumeTps", 0.0))
}

// connectionJSON is RocketMQ's Connection.
type connectionJSON struct {
	ClientID   string `json:"clientId"`
	ClientAddr string `json:"clientAddr"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

// connections describes connected clients as RocketMQ's Connections,
// from the core's listing (broker.GroupConnections), whatever protocol
// they use: a remoting client's version is its MQVersion number, other
// clients' 0; a client that announced no language is OTHER.
func connections(cs []broker.ClientConnection) []connectionJSON {
	out := make([]connectionJSON, 0, len(cs))
	for _, c := range cs {
		j := connectionJSON{ClientID: c.ClientID, ClientAddr: c.RemoteAddr, Language: c.Language}
		if j.Language == "" {
			j.Language = "OTHER"
		}
		if c.Protocol == broker.ProtocolRemoting {
			v, _ := strconv.Atoi(c.Version)
			j.Version = int32(v)
		}
		out = append(out, j)
	}
	return out
}

// adminConsumerConnections serves GET_CONSUMER_CONNECTION_LIST (203): a
// group's connected consumers and what they subscribe to, as a
// ConsumerConnection; CONSUMER_NOT_ONLINE when none is connected.
func (f *Frontend) adminConsumerConnections(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	group, err := req.Required("consumerGroup")
	if err != nil {
		return adminBadRequest(req, err)
	}
	gc, err := f.b.GroupConnections(group)
	if err != nil || len(gc.Consumers) == 0 {
		return req.Reply(rmq.ConsumerNotOnline, "the consumer group "+group+" is not online")
	}
	consumeType, model := "CONSUME_PASSIVELY", "CLUSTERING"
	subs := make(map[string]subscriptionData)
	now := time.Now().UnixMilli()
	for _, c := range gc.Consumers {
		if c.ConsumeType == "PULL" || c.ConsumeType == "SIMPLE" {
			consumeType = "CONSUME_ACTIVELY"
		}
		if c.Model == broker.Broadcasting {
			model = "BROADCASTING"
		}
		for _, s := range c.Subscriptions {
			if _, ok := subs[s.Topic]; !ok {
				subs[s.Topic] = newSubscriptionData(s, now)
			}
		}
	}
	return adminJSON(req, struct {
		ConnectionSet     []connectionJSON            `json:"connectionSet"`
		SubscriptionTable map[string]subscriptionData `json:"subscriptionTable"`
		ConsumeType       string                      `json:"consumeType"`
		MessageModel      string                      `json:"messageModel"`
		ConsumeFromWhere  string                      `json:"consumeFromWhere"`
	}{connections(gc.Consumers), subs, consumeType, model, "CONSUME_FROM_LAST_OFFSET"})
}

// adminProducerConnections serves GET_PRODUCER_CONNECTION_LIST (204): the
// connected producers of a group, as a ProducerConnection.
func (f *Frontend) adminProducerConnections(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	group, err := req.Required("producerGroup")
	if err != nil {
		return adminBadRequest(req, err)
	}
	gc, err := f.b.GroupConnections(group)
	if err != nil || len(gc.Producers) == 0 {
		return req.Reply(rmq.SystemError, "the producer group "+group+" is not online")
	}
	return adminJSON(req, struct {
		ConnectionSet []connectionJSON `json:"connectionSet"`
	}{connections(gc.Producers)})
}

// adminConsumeByWho serves QUERY_TOPIC_CONSUME_BY_WHO (300): the groups that
// subscribe to a topic or hold offsets of it, as a GroupList.
func (f *Frontend) adminConsumeByWho(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	topic, err := req.Required("topic")
	if err != nil {
		return adminBadRequest(req, err)
	}
	groups := []string{}
	for _, g := range f.b.ConsumerGroups() {
		if consumes(g, topic) {
			groups = append(groups, g.Group)
			continue
		}
		stats, err := f.b.ConsumeStats(g.Group, "")
		if err != nil {
			continue
		}
		for _, s := range stats {
			if s.Topic == topic && s.ConsumerOffset >= 0 {
				groups = append(groups, g.Group)
				break
			}
		}
	}
	return adminJSON(req, struct {
		GroupList []string `json:"groupList"`
	}{groups})
}

func consumes(g broker.GroupInfo, topic string) bool {
	for _, s := range g.Subscriptions {
		if s.Topic == topic {
			return true
		}
	}
	return false
}
