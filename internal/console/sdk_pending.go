package console

import (
	"context"
	"errors"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// The SDK calls below are not in this build's client package yet; the
// endpoints that need them answer REQUEST_NOT_SUPPORTED or leave the part
// out (null), as doc.go says.

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

// groupConnections: nil (connections unknown) until Admin.GroupConnections.
func groupConnections(context.Context, *client.Admin, string) (*connectionsJSON, error) {
	return nil, nil
}

func messagesByTime(context.Context, *client.Admin, string, time.Time, time.Time, int) ([]*client.MessageExt, error) {
	return nil, errcode.Errorf(errcode.RequestNotSupported, "a search by time needs Admin.MessagesByTime, not in this build")
}

// traceMessage finds the message; its hops are where it was found until
// Admin.TraceMessage.
func traceMessage(ctx context.Context, a *client.Admin, id, topic string) (*client.MessageExt, []hopJSON, error) {
	var opts []client.ViewOption
	if topic != "" {
		opts = append(opts, client.InTopic(topic))
	}
	lk, err := a.ViewMessage(ctx, id, opts...)
	if err != nil {
		return nil, nil, err
	}
	m := lk.Messages[0]
	hops := make([]hopJSON, 0, len(lk.Messages))
	for _, c := range lk.Messages {
		hops = append(hops, originHop(c))
	}
	return m, hops, nil
}

func resolvePending(context.Context, *client.Admin, client.PendingTransaction, bool) error {
	return errcode.Errorf(errcode.RequestNotSupported, "resolving a transaction needs Admin.ResolveTransaction, not in this build")
}

// unimplemented reports a daemon that does not serve the RPC (an older
// build, or a part of this one not merged yet).
func unimplemented(err error) bool { return status.Code(unwrapStatus(err)) == codes.Unimplemented }

func unwrapStatus(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := status.FromError(e); ok {
			return e
		}
	}
	return err
}

// topicStats is Admin.TopicStats, or, from brokers that do not serve
// GetTopicStats, their topic configurations without offsets.
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
