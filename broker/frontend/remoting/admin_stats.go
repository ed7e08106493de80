package remoting

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

// adminRuntimeInfo serves GET_BROKER_RUNTIME_INFO (28): the KVTable that
// mqadmin brokerStatus prints and clusterList reads, from the core's
// running figures (Broker.Runtime, the same as bolide.v1 GetBrokerRuntime):
// messages stored and delivered since the broker started, their rates over
// the last minute, the disk, the CommitLog's range. Bolide keeps no daily
// marks: the "today" counters are the totals since start and the morning
// marks 0. Figures RocketMQ's tools parse that Bolide has no counterpart
// of (thread-pool queues, page-cache lock, its timer's backlog) read 0 so
// that clusterList still prints; figures nothing reads and Bolide does not
// measure are left out. Bolide's own figures (Runtime.Extra) follow under
// their names.
func (f *Frontend) adminRuntimeInfo(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	rt := f.b.Runtime()
	info := rt.Info
	version := info.Version
	if version == "" {
		version = "bolide"
	}
	putTPS, getTPS := tpsText(rt.PutTPS), tpsText(rt.GetTPS)
	t := make(map[string]string, 48)
	for k, v := range rt.Extra {
		t[k] = v
	}
	for k, v := range map[string]string{
		"brokerVersionDesc":    version,
		"brokerVersion":        strconv.Itoa(int(rmq.ServerVersion)),
		"brokerActive":         strconv.FormatBool(f.b.IsMaster()),
		"brokerName":           info.BrokerName,
		"brokerId":             strconv.FormatInt(info.BrokerID, 10),
		"clusterName":          info.Cluster,
		"brokerRole":           f.b.Role().String(),
		"brokerPermission":     strconv.Itoa(int(rt.Permission)),
		"bootTimestamp":        strconv.FormatInt(info.StartTime.UnixMilli(), 10),
		"runtime":              runtimeText(time.Since(info.StartTime)),
		"commitLogMinOffset":   strconv.FormatInt(info.CommitLogMinOffset, 10),
		"commitLogMaxOffset":   strconv.FormatInt(info.CommitLogMaxOffset, 10),
		"commitLogDiskRatio":   strconv.FormatFloat(info.DiskUsedRatio, 'f', -1, 64),
		"commitLogDirCapacity": "Total : " + humanBytes(rt.DiskTotal) + ", Free : " + humanBytes(rt.DiskFree) + ".",
		"dispatchBehindBytes":  strconv.FormatInt(max(info.DispatchBehindBytes, 0), 10),
		"flushDiskType":        info.FlushMode,

		"msgPutTotalYesterdayMorning": "0",
		"msgPutTotalTodayMorning":     "0",
		"msgPutTotalTodayNow":         strconv.FormatInt(rt.PutMessages, 10),
		"msgGetTotalYesterdayMorning": "0",
		"msgGetTotalTodayMorning":     "0",
		"msgGetTotalTodayNow":         strconv.FormatInt(rt.GetMessages, 10),
		"putMessageTimesTotal":        strconv.FormatInt(rt.PutMessages, 10),
		"putMessageSizeTotal":         strconv.FormatInt(rt.PutBytes, 10),
		"getMessageSizeTotal":         strconv.FormatInt(rt.GetBytes, 10),

		// One figure each, the rate over the last minute (RocketMQ writes
		// three windows; its tools read the first).
		"putTps":            putTPS,
		"getTransferredTps": getTPS, // RocketMQ 5's tools
		"getTransferedTps":  getTPS, // RocketMQ 4's spelling

		"topicCount":          strconv.Itoa(rt.Topics),
		"queueCount":          strconv.Itoa(rt.Queues),
		"groupCount":          strconv.Itoa(rt.Groups),
		"consumerConnections": strconv.Itoa(rt.ConsumerConnections),
		"producerConnections": strconv.Itoa(rt.ProducerConnections),

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
	} {
		t[k] = v
	}
	if ts := f.firstMessageStoreTime(info.CommitLogMinOffset, info.CommitLogMaxOffset); ts > 0 {
		t["earliestMessageTimeStamp"] = strconv.FormatInt(ts, 10)
	}
	return adminJSON(req, struct {
		Table map[string]string `json:"table"`
	}{t})
}

// tpsText writes a rate as RocketMQ's runtime info does.
func tpsText(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// humanBytes writes n as RocketMQ's MixAll.humanReadableByteCount (binary
// units): "512 B", "1.5 KiB", "37.2 GiB".
func humanBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n), 0
	for v >= 1024 && unit < 6 {
		v /= 1024
		unit++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + string("KMGTPE"[unit-1]) + "iB"
}

// runtimeText is RocketMQ's "runtime" figure.
func runtimeText(d time.Duration) string {
	s := int64(d / time.Second)
	return "[ " + strconv.FormatInt(s/86400, 10) + " days, " + strconv.FormatInt(s/3600%24, 10) + " hours, " +
		strconv.FormatInt(s/60%60, 10) + " minutes, " + strconv.FormatInt(s%60, 10) + " seconds ]"
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
