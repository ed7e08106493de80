package remoting

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/bolide-mq/bolide/auth"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// Access control of the remoting front end (package auth). With ACL on,
// every request is authenticated by its ACL 1.0 signature before it is
// dispatched, then checked by the class its code has in accessTable:
//
//   - data: the topic and group permissions the request needs (RocketMQ's
//     PlainAccessResource.parse, acl.md §2.5): a send needs PUB on its
//     topic (SUB on the group for a retry topic), a pull SUB on the topic
//     and the group, a heartbeat SUB on each consumer group and each topic
//     it subscribes to, and so on;
//   - read: any authenticated user (broker status, topic and group
//     configurations, connection lists);
//   - admin: an admin user (topics, groups, offset resets, configuration).
//     With ACL off an admin request is accepted from loopback only, unless
//     the broker runs with --allow-remote-admin.
//
// A code missing from the table is refused while ACL is on, whether or not
// a handler serves it (the test keeps the two in step). A refusal is
// NO_PERMISSION (16) with the guard's message as remark, and the handler
// never runs: nothing is written.

// class is what a request code needs.
type class uint8

const (
	classData  class = iota + 1 // needs(req): topic and group permissions
	classRead                   // an authenticated caller
	classAdmin                  // an admin user; loopback while ACL is off
)

// access is one request code's entry.
type access struct {
	class class
	// what names the request in refusals.
	what string
	// needs returns what a data request needs (classData only).
	needs func(req *rmq.Command) []auth.Need
}

// traceTopic is the topic RocketMQ's clients send their message traces to:
// as in RocketMQ's ACL, every authenticated user may publish to it.
const traceTopic = "RMQ_SYS_TRACE_TOPIC"

// accessTable classifies every request code the broker serves.
var accessTable = map[int32]access{
	// Producers.
	rmq.SendMessage:        {classData, "SEND_MESSAGE", sendNeeds},
	rmq.SendMessageV2:      {classData, "SEND_MESSAGE_V2", sendNeeds},
	rmq.SendBatchMessage:   {classData, "SEND_BATCH_MESSAGE", sendNeeds},
	rmq.SendReplyMessage:   {classData, "SEND_REPLY_MESSAGE", sendNeeds},
	rmq.SendReplyMessageV2: {classData, "SEND_REPLY_MESSAGE_V2", sendNeeds},
	rmq.EndTransaction:     {classData, "END_TRANSACTION", endTransactionNeeds},
	rmq.CheckClientConfig:  {classRead, "CHECK_CLIENT_CONFIG", nil},

	// Sessions.
	rmq.HeartBeat:        {classData, "HEART_BEAT", heartbeatNeeds},
	rmq.UnregisterClient: {classData, "UNREGISTER_CLIENT", fieldGroupNeeds("consumerGroup")},

	// Consumers.
	rmq.PullMessage:             {classData, "PULL_MESSAGE", pullNeeds},
	rmq.LitePullMessage:         {classData, "LITE_PULL_MESSAGE", pullNeeds},
	rmq.ConsumerSendMsgBack:     {classData, "CONSUMER_SEND_MSG_BACK", fieldGroupNeeds("group")},
	rmq.GetConsumerListByGroup:  {classData, "GET_CONSUMER_LIST_BY_GROUP", fieldGroupNeeds("consumerGroup")},
	rmq.QueryConsumerOffset:     {classData, "QUERY_CONSUMER_OFFSET", offsetNeeds},
	rmq.UpdateConsumerOffset:    {classData, "UPDATE_CONSUMER_OFFSET", offsetNeeds},
	rmq.SearchOffsetByTimestamp: {classData, "SEARCH_OFFSET_BY_TIMESTAMP", topicAnyNeeds},
	rmq.GetMaxOffset:            {classData, "GET_MAX_OFFSET", topicAnyNeeds},
	rmq.GetMinOffset:            {classData, "GET_MIN_OFFSET", topicAnyNeeds},
	rmq.GetEarliestMsgStoreTime: {classData, "GET_EARLIEST_MSG_STORETIME", topicAnyNeeds},
	rmq.LockBatchMQ:             {classData, "LOCK_BATCH_MQ", lockNeeds},
	rmq.UnlockBatchMQ:           {classData, "UNLOCK_BATCH_MQ", lockNeeds},
	rmq.QueryMessage:            {classData, "QUERY_MESSAGE", topicSubNeeds},

	// Reads of the broker's state (mqadmin).
	rmq.GetAllTopicConfig:             {classRead, "GET_ALL_TOPIC_CONFIG", nil},
	rmq.GetTopicConfig:                {classRead, "GET_TOPIC_CONFIG", nil},
	rmq.GetAllSubscriptionGroupConfig: {classRead, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG", nil},
	rmq.GetSubscriptionGroupConfig:    {classRead, "GET_SUBSCRIPTIONGROUP_CONFIG", nil},
	rmq.GetBrokerRuntimeInfo:          {classRead, "GET_BROKER_RUNTIME_INFO", nil},
	// The settings hold paths and addresses the cluster listing shows
	// anyway, and no secret: cluster status, as bolide.v1 GetBrokerConfig.
	rmq.GetBrokerConfig:           {classRead, "GET_BROKER_CONFIG", nil},
	rmq.GetTopicStatsInfo:         {classRead, "GET_TOPIC_STATS_INFO", nil},
	rmq.GetConsumeStats:           {classRead, "GET_CONSUME_STATS", nil},
	rmq.GetConsumerConnectionList: {classRead, "GET_CONSUMER_CONNECTION_LIST", nil},
	rmq.GetProducerConnectionList: {classRead, "GET_PRODUCER_CONNECTION_LIST", nil},
	rmq.QueryTopicConsumeByWho:    {classRead, "QUERY_TOPIC_CONSUME_BY_WHO", nil},
	// A message by its CommitLog offset: the offset names no topic, so
	// the handler checks SUB on the topic of the record it read
	// (adminViewMessage) before answering.
	rmq.ViewMessageByID: {classRead, "VIEW_MESSAGE_BY_ID", nil},

	// Administration.
	rmq.UpdateAndCreateTopic:             {classAdmin, "UPDATE_AND_CREATE_TOPIC", nil},
	rmq.DeleteTopicInBroker:              {classAdmin, "DELETE_TOPIC_IN_BROKER", nil},
	rmq.UpdateAndCreateSubscriptionGroup: {classAdmin, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", nil},
	rmq.DeleteSubscriptionGroup:          {classAdmin, "DELETE_SUBSCRIPTIONGROUP", nil},
	rmq.UpdateBrokerConfig:               {classAdmin, "UPDATE_BROKER_CONFIG", nil},
	rmq.InvokeBrokerToResetOffset:        {classAdmin, "INVOKE_BROKER_TO_RESET_OFFSET", nil},
}

// check authorizes req before its handler runs: nil to serve it, or the
// refusal to answer. served reports whether a handler serves the code.
// With ACL off it costs a map lookup, and a peer address only for admin
// requests.
func (f *Frontend) check(ctx context.Context, c *rmq.Conn, req *rmq.Command) (context.Context, *rmq.Command) {
	g := f.b.Guard()
	a, known := accessTable[req.Code]
	if !g.Enabled() {
		if known && a.class == classAdmin {
			if err := g.Admin(nil, c.RemoteAddr().String(), a.what); err != nil {
				return ctx, req.Reply(rmq.NoPermission, err.Error())
			}
		}
		return ctx, nil
	}
	if !known {
		return ctx, req.Reply(rmq.NoPermission, "request code "+strconv.Itoa(int(req.Code))+
			" is not served by this broker and is refused while ACL is on")
	}
	peer := c.RemoteAddr().String()
	p, err := g.Remoting(peer, req.Ext, req.Body, req.Language)
	if err == nil {
		switch a.class {
		case classData:
			err = g.Authorize(p, peer, a.needs(req)...)
		case classRead:
			err = g.Authenticated(p, peer)
		case classAdmin:
			err = g.Admin(p, peer, a.what)
		}
	}
	if err != nil {
		return ctx, req.Reply(rmq.NoPermission, err.Error())
	}
	return auth.WithPrincipal(ctx, p), nil
}

// topicNeed is perm on a topic (a retry or dead-letter topic: SUB on its
// group). An empty name needs nothing here: the handler refuses the
// request for its missing field.
func topicNeed(needs []auth.Need, topic string, perm auth.Perm) []auth.Need {
	if topic == "" {
		return needs
	}
	return append(needs, auth.TopicNeed(topic, perm))
}

func groupNeed(needs []auth.Need, group string) []auth.Need {
	if group == "" {
		return needs
	}
	return append(needs, auth.GroupNeed(group, auth.Sub))
}

// sendNeeds: PUB on the topic, in either header naming (send.go).
func sendNeeds(req *rmq.Command) []auth.Need {
	topic := req.String(longSendNames.topic)
	if req.Has(shortSendNames.topic) {
		topic = req.String(shortSendNames.topic)
	}
	if topic == traceTopic {
		return nil
	}
	return topicNeed(nil, topic, auth.Pub)
}

// endTransactionNeeds: PUB on the topic when the header names it (Java
// clients do; rocketmq-client-go does not, and the broker checks the
// producer group against the half message itself).
func endTransactionNeeds(req *rmq.Command) []auth.Need {
	return topicNeed(nil, req.String("topic"), auth.Pub)
}

// pullNeeds: SUB on the topic and on the consumer group.
func pullNeeds(req *rmq.Command) []auth.Need {
	return groupNeed(topicNeed(nil, req.String("topic"), auth.Sub), req.String("consumerGroup"))
}

// offsetNeeds: SUB on the consumer group and the topic.
func offsetNeeds(req *rmq.Command) []auth.Need {
	return pullNeeds(req)
}

// topicAnyNeeds: PUB or SUB on the topic (offsets and store times of a
// queue).
func topicAnyNeeds(req *rmq.Command) []auth.Need {
	return topicNeed(nil, req.String("topic"), auth.Any)
}

// topicSubNeeds: SUB on the topic.
func topicSubNeeds(req *rmq.Command) []auth.Need {
	return topicNeed(nil, req.String("topic"), auth.Sub)
}

// fieldGroupNeeds: SUB on the group a header field names (nothing when
// absent, e.g. a producer's UNREGISTER_CLIENT).
func fieldGroupNeeds(field string) func(req *rmq.Command) []auth.Need {
	return func(req *rmq.Command) []auth.Need { return groupNeed(nil, req.String(field)) }
}

// heartbeatNeeds: SUB on each consumer group and each topic it subscribes
// to (its retry topic: the group again). A body that does not decode needs
// nothing here: the handler refuses it.
func heartbeatNeeds(req *rmq.Command) []auth.Need {
	var d heartbeatData
	if err := json.Unmarshal(req.Body, &d); err != nil {
		return nil
	}
	var needs []auth.Need
	for _, c := range d.ConsumerDataSet {
		needs = groupNeed(needs, c.GroupName)
		for _, s := range c.SubscriptionDataSet {
			needs = topicNeed(needs, s.Topic, auth.Sub)
		}
	}
	return needs
}

// lockNeeds: SUB on the group and on each queue's topic of a lock or
// unlock request's body.
func lockNeeds(req *rmq.Command) []auth.Need {
	var b lockBatchBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return nil
	}
	needs := groupNeed(nil, b.ConsumerGroup)
	for _, mq := range b.MQSet {
		needs = topicNeed(needs, mq.Topic, auth.Sub)
	}
	return needs
}
