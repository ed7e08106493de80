package remoting

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// The requests of Apache RocketMQ's admin tool (mqadmin, DefaultMQAdminExt)
// that a broker serves. Each answers what RocketMQ's AdminBrokerProcessor
// answers, in the same JSON shapes (admin_json.go for the fastjson ones);
// the NameServer's half (routes, cluster info, topic lists) is the
// NameServer's. The broker's own configuration may be changed over the
// wire only in its runtime keys (brokerConfig).

// adminHandlers registers what mqadmin sends.
func (f *Frontend) adminHandlers() map[int32]handler {
	return map[int32]handler{
		rmq.UpdateAndCreateTopic:             f.adminUpdateTopic,
		rmq.DeleteTopicInBroker:              f.adminDeleteTopic,
		rmq.GetAllTopicConfig:                f.adminAllTopicConfig,
		rmq.GetTopicConfig:                   f.adminTopicConfig,
		rmq.UpdateAndCreateSubscriptionGroup: f.adminUpdateSubGroup,
		rmq.DeleteSubscriptionGroup:          f.adminDeleteSubGroup,
		rmq.GetAllSubscriptionGroupConfig:    f.adminAllSubGroups,
		rmq.GetSubscriptionGroupConfig:       f.adminSubGroup,
		rmq.UpdateBrokerConfig:               f.adminUpdateConfig,
		rmq.GetBrokerConfig:                  f.adminGetConfig,
		rmq.GetBrokerRuntimeInfo:             f.adminRuntimeInfo,
		rmq.GetTopicStatsInfo:                f.adminTopicStats,
		rmq.GetConsumeStats:                  f.adminConsumeStats,
		rmq.GetConsumerConnectionList:        f.adminConsumerConnections,
		rmq.GetProducerConnectionList:        f.adminProducerConnections,
		rmq.QueryTopicConsumeByWho:           f.adminConsumeByWho,
		rmq.ViewMessageByID:                  f.adminViewMessage,
		rmq.QueryMessage:                     f.adminQueryMessage,
		rmq.InvokeBrokerToResetOffset:        f.adminResetOffset,
	}
}

// adminFail answers req with err's response code (codes.go) and message;
// an illegal topic name is a bad parameter here, not a bad message.
func adminFail(req *rmq.Command, err error) *rmq.Command {
	if errcode.Of(err) == errcode.IllegalTopic {
		return req.Reply(rmq.InvalidParameter, err.Error())
	}
	return errorReply(req, err)
}

// adminBadRequest answers a request whose header does not parse.
func adminBadRequest(req *rmq.Command, err error) *rmq.Command {
	return req.Reply(rmq.InvalidParameter, err.Error())
}

// adminOK answers success with a body.
func adminOK(req *rmq.Command, body []byte) *rmq.Command {
	resp := req.Reply(rmq.Success, "")
	resp.Body = body
	return resp
}

// adminJSON answers success with v as JSON.
func adminJSON(req *rmq.Command, v any) *rmq.Command {
	b, err := json.Marshal(v)
	if err != nil {
		return req.Reply(rmq.SystemError, err.Error())
	}
	return adminOK(req, b)
}

// topicConfigJSON is RocketMQ's TopicConfig (TopicConfigAndQueueMapping
// with no mapping: Bolide has no static topics).
type topicConfigJSON struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int32             `json:"readQueueNums"`
	WriteQueueNums  int32             `json:"writeQueueNums"`
	Perm            int32             `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicSysFlag    int32             `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes"`
}

func toTopicJSON(tc broker.TopicConfig) topicConfigJSON {
	attrs := tc.Attributes
	if attrs == nil {
		attrs = map[string]string{}
	}
	return topicConfigJSON{TopicName: tc.Name, ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums,
		Perm: tc.Perm, TopicFilterType: "SINGLE_TAG", TopicSysFlag: tc.TopicSysFlag, Order: tc.Order, Attributes: attrs}
}

// requestTopic returns the configuration of the topic a request names in
// its "topic" field, or the answer refusing the request.
func (f *Frontend) requestTopic(req *rmq.Command) (broker.TopicConfig, *rmq.Command) {
	name, err := req.Required("topic")
	if err != nil {
		return broker.TopicConfig{}, adminBadRequest(req, err)
	}
	tc, ok := f.topicByName(name)
	if !ok {
		return broker.TopicConfig{}, req.Reply(rmq.TopicNotExist, "topic "+name+" does not exist on broker "+f.b.Options().BrokerName)
	}
	return tc, nil
}

// topicByName returns a topic's configuration on this broker.
func (f *Frontend) topicByName(name string) (broker.TopicConfig, bool) {
	for _, tc := range f.b.TopicConfigs() {
		if tc.Name == name {
			return tc, true
		}
	}
	return broker.TopicConfig{}, false
}

// adminUpdateTopic serves UPDATE_AND_CREATE_TOPIC (17): create the topic or
// change it (mqadmin updateTopic). Attributes are RocketMQ's
// "+key=value,-key" modifications of the topic's current ones.
func (f *Frontend) adminUpdateTopic(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	name, err := req.Required("topic")
	if err != nil {
		return adminBadRequest(req, err)
	}
	tc := broker.TopicConfig{Name: name, Order: req.Bool("order")}
	if tc.ReadQueueNums, err = req.Int32("readQueueNums"); err == nil {
		if tc.WriteQueueNums, err = req.Int32("writeQueueNums"); err == nil {
			if tc.Perm, err = req.OptInt32("perm", broker.PermReadWrite); err == nil {
				tc.TopicSysFlag, err = req.OptInt32("topicSysFlag", 0)
			}
		}
	}
	if err != nil {
		return adminBadRequest(req, err)
	}
	var current map[string]string
	if old, ok := f.topicByName(name); ok {
		current = old.Attributes
	}
	if tc.Attributes, err = applyAttributes(current, req.String("attributes")); err != nil {
		return adminBadRequest(req, err)
	}
	if err := f.b.CreateTopic(tc, true); err != nil {
		return adminFail(req, err)
	}
	return req.Reply(rmq.Success, "")
}

// applyAttributes applies RocketMQ's attribute modifications ("+a=1,-b")
// to a copy of current.
func applyAttributes(current map[string]string, mods string) (map[string]string, error) {
	var out map[string]string
	if len(current) > 0 {
		out = make(map[string]string, len(current))
		for k, v := range current {
			out[k] = v
		}
	}
	for _, m := range strings.Split(mods, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		switch m[0] {
		case '+':
			k, v, ok := strings.Cut(m[1:], "=")
			if !ok || k == "" {
				return nil, errors.New("attribute " + m + ": want +key=value")
			}
			if out == nil {
				out = make(map[string]string)
			}
			out[k] = v
		case '-':
			delete(out, m[1:])
		default:
			return nil, errors.New("attribute " + m + ": want +key=value or -key")
		}
	}
	return out, nil
}

// adminDeleteTopic serves DELETE_TOPIC_IN_BROKER (215). A topic this broker
// does not have is no error: mqadmin deletes a group's retry and
// dead-letter topics on every master whether they exist or not.
func (f *Frontend) adminDeleteTopic(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	name, err := req.Required("topic")
	if err != nil {
		return adminBadRequest(req, err)
	}
	if err := f.b.DeleteTopic(name); err != nil && errcode.Of(err) != errcode.TopicNotExist {
		return adminFail(req, err)
	}
	return req.Reply(rmq.Success, "")
}

// adminAllTopicConfig serves GET_ALL_TOPIC_CONFIG (21): every topic in one
// page (totalTopicNum tells the paging client it has them all).
func (f *Frontend) adminAllTopicConfig(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	topics := f.b.TopicConfigs()
	table := make(map[string]topicConfigJSON, len(topics))
	for _, tc := range topics {
		table[tc.Name] = toTopicJSON(tc)
	}
	resp := adminJSON(req, struct {
		TopicConfigTable map[string]topicConfigJSON `json:"topicConfigTable"`
		DataVersion      broker.DataVersion         `json:"dataVersion"`
	}{table, f.b.TopicDataVersion()})
	return resp.SetInt("totalTopicNum", int64(len(topics)))
}

// adminTopicConfig serves GET_TOPIC_CONFIG (351), which mqadmin asks of
// every broker of a topic before its stats (to find static topics).
func (f *Frontend) adminTopicConfig(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	tc, refused := f.requestTopic(req)
	if refused != nil {
		return refused
	}
	return adminJSON(req, toTopicJSON(tc))
}

// adminUpdateSubGroup serves UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): the
// body is a SubscriptionGroupConfig; fields it leaves out keep RocketMQ's
// defaults.
func (f *Frontend) adminUpdateSubGroup(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	c := subgroup.Default("")
	if err := json.Unmarshal(req.Body, &c); err != nil {
		return adminBadRequest(req, errors.New("body is not a SubscriptionGroupConfig: "+err.Error()))
	}
	if err := f.b.UpdateSubscriptionGroup(c); err != nil {
		return adminFail(req, err)
	}
	return req.Reply(rmq.Success, "")
}

// adminDeleteSubGroup serves DELETE_SUBSCRIPTIONGROUP (207), with the
// group's offsets when cleanOffset is set.
func (f *Frontend) adminDeleteSubGroup(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	group, err := req.Required("groupName")
	if err != nil {
		return adminBadRequest(req, err)
	}
	if err := f.b.DeleteSubscriptionGroup(group, req.Bool("cleanOffset")); err != nil {
		return adminFail(req, err)
	}
	return req.Reply(rmq.Success, "")
}

// subscriptionGroups are the declared groups, and (with RocketMQ's
// defaults, as its broker creates them on a heartbeat) the consumer groups
// the broker knows from clients and offsets.
func (f *Frontend) subscriptionGroups() (map[string]subgroup.Config, broker.DataVersion) {
	declared, v := f.b.SubscriptionGroups()
	out := make(map[string]subgroup.Config, len(declared))
	for _, g := range f.b.ConsumerGroups() {
		c := subgroup.Default(g.Group)
		c.ConsumeMessageOrderly = g.Orderly
		out[g.Group] = c
	}
	for _, c := range declared {
		out[c.GroupName] = c
	}
	return out, v
}

// adminAllSubGroups serves GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), in one
// page.
func (f *Frontend) adminAllSubGroups(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	groups, v := f.subscriptionGroups()
	resp := adminJSON(req, struct {
		SubscriptionGroupTable map[string]subgroup.Config  `json:"subscriptionGroupTable"`
		ForbiddenTable         map[string]map[string]int32 `json:"forbiddenTable"`
		DataVersion            broker.DataVersion          `json:"dataVersion"`
	}{groups, map[string]map[string]int32{}, v})
	return resp.SetInt("totalGroupNum", int64(len(groups)))
}

// adminSubGroup serves GET_SUBSCRIPTIONGROUP_CONFIG (352).
func (f *Frontend) adminSubGroup(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	group, err := req.Required("group")
	if err != nil {
		return adminBadRequest(req, err)
	}
	groups, _ := f.subscriptionGroups()
	c, ok := groups[group]
	if !ok {
		return req.Reply(rmq.SubscriptionGroupNotExist, "subscription group "+group+" does not exist")
	}
	return adminJSON(req, c)
}

// brokerConfig is the allow-list of the broker's configuration keys that
// UPDATE_BROKER_CONFIG may change while it runs (internal/remoting's
// ConfigAllowList), fed from the core: its runtime keys
// (broker.RuntimeConfigKeys), each value checked by the core, and the
// whole update applied by Broker.UpdateConfig — the same keys, checks,
// persistence (config/runtime.json) and all-or-nothing as bolide.v1
// UpdateBrokerConfig. Paths, names, ports and every other key are refused.
func brokerConfig(b *broker.Broker) *rmq.ConfigAllowList {
	names := broker.RuntimeConfigKeys()
	keys := make([]rmq.ConfigKey, len(names))
	for i, name := range names {
		keys[i] = rmq.ConfigKey{Name: name, Check: func(v string) error { return b.CheckConfigValue(name, v) }}
	}
	return rmq.NewConfigAllowList("broker", keys...).WithApply(func(props map[string]string) error {
		_, err := b.UpdateConfig(props)
		return err
	})
}

// adminUpdateConfig serves UPDATE_BROKER_CONFIG (25, mqadmin
// updateBrokerConfig): a properties body whose keys must all be runtime
// keys with good values, applied together or not at all. A key that may
// not change is answered NO_PERMISSION (as RocketMQ answers a key of its
// black list) naming the keys allowed, a bad value INVALID_PARAMETER, a
// failure to persist the change SYSTEM_ERROR; nothing changes then.
func (f *Frontend) adminUpdateConfig(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	keys, err := f.brokerConf.Update(req.Body)
	switch {
	case errors.Is(err, rmq.ErrConfigKeyRefused):
		return req.Reply(rmq.NoPermission, err.Error())
	case errors.Is(err, rmq.ErrConfigValueRefused):
		return req.Reply(rmq.InvalidParameter, err.Error())
	case errcode.Of(err) != errcode.OK:
		return errorReply(req, err)
	case err != nil: // the body is not properties text
		return adminBadRequest(req, err)
	}
	if len(keys) > 0 {
		f.log.Info("broker configuration changed over remoting", zap.Strings("keys", keys))
	}
	return req.Reply(rmq.Success, "")
}

// adminGetConfig serves GET_BROKER_CONFIG (26, mqadmin getBrokerConfig):
// the broker's settings in effect (Broker.Config: RocketMQ's key names,
// runtime changes included) as properties text. No secret is among them.
func (f *Frontend) adminGetConfig(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	entries := f.b.Config()
	props := make(map[string]string, len(entries))
	for _, e := range entries {
		props[e.Key] = e.Value
	}
	return adminOK(req, rmq.EncodeProperties(props))
}
