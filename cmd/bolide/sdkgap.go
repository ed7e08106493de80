package main

// Workarounds for what the SDK (package client) does not offer yet. Each
// function makes one direct gRPC call to a broker; each should be replaced
// by an Admin method when the SDK has one:
//
//   - pullMessageAt: read the message at (broker, queue, offset) — wanted
//     as Admin.ViewMessageAt(ctx, MessageQueue, offset) (*MessageExt, error)
//     (RocketMQ's queryMsgByOffset).
//   - brokerTopicOrder: read a topic's configuration (the order flag is not
//     in the route) — wanted as Admin.TopicConfig(ctx, topic), so that
//     topic update can keep the settings it is not given.
//   - brokerReplication, promoteBroker: the BrokerHA service (replication
//     status, promotion of a slave) — wanted as
//     Admin.ReplicationStatus(ctx, addr) and Admin.Promote(ctx, addr, name,
//     epoch).

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// dialBroker opens a connection to one broker for a workaround call.
func dialBroker(addr string) (*grpc.ClientConn, pb.BrokerClient, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	return cc, pb.NewBrokerClient(cc), nil
}

// errNoMessageAt says that a queue has no message at the offset asked.
type errNoMessageAt struct {
	mq                  client.MessageQueue
	offset, minOff, max int64
}

func (e *errNoMessageAt) Error() string {
	return fmt.Sprintf("queue %s has no message at offset %d (its offsets are %d..%d)", e.mq, e.offset, e.minOff, e.max-1)
}

// pullMessageAt reads the message at offset of mq from the broker at addr:
// one pull of one message, without a consumer group, without waiting.
func pullMessageAt(ctx context.Context, addr string, mq client.MessageQueue, offset int64) (*client.MessageExt, error) {
	cc, bc, err := dialBroker(addr)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	resp, err := bc.Pull(ctx, &pb.PullRequest{Topic: mq.Topic, QueueId: mq.QueueID, Offset: offset, MaxMessages: 1,
		TagExpression: "*", SuspendTimeoutMs: 0, CommitOffset: -1})
	if err == nil {
		err = wire.FromStatus(resp.GetStatus())
	}
	if err != nil {
		return nil, fmt.Errorf("pull %s at %d from %s: %w", mq, offset, addr, err)
	}
	if resp.GetPullStatus() != pb.PullStatus_FOUND || len(resp.GetRecords()) == 0 {
		return nil, &errNoMessageAt{mq: mq, offset: offset, minOff: resp.GetMinOffset(), max: resp.GetMaxOffset()}
	}
	e, err := message.Decode(resp.GetRecords()[0])
	if err != nil {
		return nil, fmt.Errorf("decode the record at %s offset %d: %w", mq, offset, err)
	}
	if e.QueueOffset != offset {
		return nil, &errNoMessageAt{mq: mq, offset: offset, minOff: resp.GetMinOffset(), max: resp.GetMaxOffset()}
	}
	return messageExtFromStored(e, mq.BrokerName), nil
}

// messageExtFromStored converts a decoded stored record as the SDK does
// for pulled messages (its own conversion is not exported).
func messageExtFromStored(e *message.Ext, brokerName string) *client.MessageExt {
	props := e.Properties
	m := &client.MessageExt{
		Message: client.Message{
			Topic:       e.Topic,
			Tag:         props[message.PropertyTags],
			Keys:        message.SplitKeys(props[message.PropertyKeys]),
			Body:        e.Body,
			ShardingKey: props[message.PropertyShardingKey],
		},
		UniqueID:        props[message.PropertyUniqueKey],
		BrokerName:      brokerName,
		QueueID:         e.QueueID,
		QueueOffset:     e.QueueOffset,
		CommitLogOffset: e.PhysicalOffset,
		ReconsumeTimes:  e.ReconsumeTimes,
		StoreSize:       e.StoreSize,
	}
	m.BornTimestamp = unixMilli(e.BornTimestamp)
	m.StoreTimestamp = unixMilli(e.StoreTimestamp)
	if e.StoreHost.IsValid() {
		m.StoreHost = e.StoreHost.String()
		m.MsgID = e.MsgID()
	}
	if e.BornHost.IsValid() {
		m.BornHost = e.BornHost.String()
	}
	for k, v := range props {
		switch k {
		case message.PropertyTags, message.PropertyKeys, message.PropertyShardingKey, message.PropertyUniqueKey:
			continue
		}
		if m.Properties == nil {
			m.Properties = make(map[string]string, len(props))
		}
		m.Properties[k] = v
	}
	return m
}

// brokerTopicOrder reads the order flag of topic from the broker at addr.
func brokerTopicOrder(ctx context.Context, addr, topic string) (bool, error) {
	cc, bc, err := dialBroker(addr)
	if err != nil {
		return false, err
	}
	defer cc.Close()
	resp, err := bc.GetTopicConfigs(ctx, &pb.GetTopicConfigsRequest{})
	if err == nil {
		err = wire.FromStatus(resp.GetStatus())
	}
	if err != nil {
		return false, fmt.Errorf("topic configs of %s: %w", addr, err)
	}
	for _, tc := range resp.GetTopics() {
		if tc.GetName() == topic {
			return tc.GetOrder(), nil
		}
	}
	return false, nil
}

// brokerReplication asks the broker at addr for its replication state.
func brokerReplication(ctx context.Context, addr string) (*pb.ReplicationInfo, error) {
	cc, _, err := dialBroker(addr)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	resp, err := pb.NewBrokerHAClient(cc).ReplicationStatus(ctx, &pb.ReplicationStatusRequest{})
	if err == nil {
		err = wire.FromStatus(resp.GetStatus())
	}
	if err != nil {
		return nil, fmt.Errorf("replication status of %s: %w", addr, err)
	}
	return resp.GetReplication(), nil
}

// promoteBroker makes the slave at addr the master of its group: name, when
// not empty, must be its group; epoch 0 takes the next epoch.
func promoteBroker(ctx context.Context, addr, name string, epoch int64) (*pb.PromoteResponse, error) {
	cc, _, err := dialBroker(addr)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	resp, err := pb.NewBrokerHAClient(cc).Promote(ctx, &pb.PromoteRequest{BrokerName: name, Epoch: epoch})
	if err == nil {
		err = wire.FromStatus(resp.GetStatus())
	}
	if err != nil {
		return nil, fmt.Errorf("promote %s: %w", addr, err)
	}
	return resp, nil
}
