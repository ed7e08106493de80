package console

import (
	"context"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/client"
)

// SDK calls the endpoints share, and their JSON.

type connectionsJSON struct {
	Producers []connJSON `json:"producers"`
	Consumers []connJSON `json:"consumers"`
}

type connJSON struct {
	ClientID       string            `json:"clientId"`
	RemoteAddr     string            `json:"remoteAddr"`
	Language       string            `json:"language"`
	Version        string            `json:"version"`
	Protocol       string            `json:"protocol"`
	ConnectedSince jsTime            `json:"connectedSince"`
	LastHeartbeat  jsTime            `json:"lastHeartbeat"`
	ConsumeType    string            `json:"consumeType"`
	MessageModel   string            `json:"messageModel"`
	Subscriptions  map[string]string `json:"subscriptions"`
	Broker         string            `json:"broker"`
}

func connsOf(cs []client.ClientConnection, consumers bool) []connJSON {
	out := make([]connJSON, 0, len(cs))
	for _, c := range cs {
		j := connJSON{ClientID: c.ClientID, RemoteAddr: c.RemoteAddr, Language: c.Language, Version: c.Version,
			Protocol: c.Protocol, ConnectedSince: jsTime(c.ConnectedSince), LastHeartbeat: jsTime(c.LastHeartbeat),
			Subscriptions: map[string]string{}, Broker: c.BrokerName}
		if consumers {
			j.ConsumeType, j.MessageModel = c.ConsumeType, modelName(c.MessageModel)
			for t, e := range c.Subscriptions {
				j.Subscriptions[t] = e
			}
		}
		out = append(out, j)
	}
	return out
}

// groupConnections is Admin.GroupConnections; brokers that did not answer
// are named in the error returned with the connections of the others.
func groupConnections(ctx context.Context, a *client.Admin, group string) (*connectionsJSON, error) {
	gc, err := a.GroupConnections(ctx, group)
	if err != nil {
		return nil, err
	}
	out := &connectionsJSON{Producers: connsOf(gc.Producers, false), Consumers: connsOf(gc.Consumers, true)}
	if len(gc.Unanswered) > 0 {
		addrs := make([]string, 0, len(gc.Unanswered))
		for addr, e := range gc.Unanswered {
			addrs = append(addrs, addr+": "+e.Error())
		}
		sort.Strings(addrs)
		return out, &partialError{"connections unknown from " + strings.Join(addrs, "; ")}
	}
	return out, nil
}

// partialError says part of an answer is missing; the rest is good.
type partialError struct{ msg string }

func (e *partialError) Error() string { return e.msg }

func messagesByTime(ctx context.Context, a *client.Admin, topic string, begin, end time.Time, max int) ([]*client.MessageExt, error) {
	return a.MessagesByTime(ctx, topic, begin, end, max)
}

// traceMessage is Admin.TraceMessage: the message and its hops.
func traceMessage(ctx context.Context, a *client.Admin, id, topic string) (*client.MessageExt, []hopJSON, error) {
	tr, err := a.TraceMessage(ctx, id, topic)
	if err != nil {
		return nil, nil, err
	}
	hops := make([]hopJSON, 0, len(tr.Hops))
	for _, h := range tr.Hops {
		hops = append(hops, hopJSON{Kind: h.Kind, Topic: h.Topic, Group: h.Group, Broker: h.BrokerName, QueueID: h.QueueID,
			QueueOffset: h.QueueOffset, StoreTime: jsTime(h.StoreTime), ReconsumeTimes: h.ReconsumeTimes, MsgID: h.MsgID})
	}
	return tr.Message, hops, nil
}

// unimplemented reports a daemon that does not serve the RPC (an older
// build).
func unimplemented(err error) bool { return status.Code(err) == codes.Unimplemented }

// topicStats is Admin.TopicStats, or, from brokers of an older build that
// do not serve GetTopicStats, their topic configurations without offsets.
func topicStats(ctx context.Context, a *client.Admin) ([]client.TopicStat, error) {
	stats, err := a.TopicStats(ctx)
	if err == nil || !unimplemented(err) {
		return stats, err
	}
	all, err := a.AllTopicConfigs(ctx)
	stats = stats[:0]
	for _, cfgs := range all {
		for _, c := range cfgs {
			stats = append(stats, client.TopicStat{Topic: c.Name, BrokerName: c.BrokerName, MessageType: c.MessageType(),
				ReadQueues: int(c.ReadQueues), WriteQueues: int(c.WriteQueues), Perm: c.Perm})
		}
	}
	sort.Slice(stats, func(i, j int) bool {
		x, y := stats[i], stats[j]
		return x.Topic < y.Topic || x.Topic == y.Topic && x.BrokerName < y.BrokerName
	})
	return stats, err
}
