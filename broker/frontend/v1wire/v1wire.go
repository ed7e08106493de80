// Package v1wire adapts Bolide's own protocol, bolide.v1 (proto/bolidev1),
// to the broker core: the send and pull calls that the gRPC and the frame
// front ends both serve, and the conversions both ends of a bolide.v1 call
// share — topics, heartbeats, and the metadata a slave fetches from its
// master (served by broker/frontend/grpcapi, fetched by broker/remote).
// Coded errors become a Status here (internal/wire); the core never sees a
// protobuf type.
package v1wire

import (
	"context"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Send serves a send request on core b for the named front end.
func Send(ctx context.Context, b *broker.Broker, frontend string, req *pb.SendRequest) *pb.SendResponse {
	if len(req.Packed) > 0 || req.PackedTopic != "" {
		return sendPacked(ctx, b, frontend, req)
	}
	for i, pm := range req.Messages {
		if pm == nil {
			return &pb.SendResponse{RequestId: req.RequestId, Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "message %d is empty", i))}
		}
	}
	msgs := wire.MessagesFromProto(req.Messages)
	res, err := b.Send(broker.WithFrontend(ctx, frontend), msgs)
	return sendResponse(b, req, res, err, func(i int, out *pb.SendResult) {
		out.UniqueId, out.QueueId = msgs[i].UniqueID(), msgs[i].QueueID
	})
}

// sendResponse answers req with the outcome of its send, res or err;
// fill sets the fields of the i-th result that come from the message
// (its queue, its unique id).
func sendResponse(b *broker.Broker, req *pb.SendRequest, res []store.PutResult, err error, fill func(i int, out *pb.SendResult)) *pb.SendResponse {
	resp := &pb.SendResponse{RequestId: req.RequestId, Status: wire.Status(err), BrokerName: b.Options().BrokerName}
	if err != nil {
		return resp
	}
	slab := make([]pb.SendResult, len(res))
	resp.Results = make([]*pb.SendResult, len(res))
	for i, r := range res {
		out := &slab[i]
		out.MsgId, out.QueueOffset, out.CommitLogOffset = r.MsgID, r.QueueOffset, r.PhysicalOffset
		fill(i, out)
		resp.Results[i] = out
	}
	return resp
}

// sendPacked serves a send of packed messages. The results leave
// unique_id empty: the producer packed the ids itself.
func sendPacked(ctx context.Context, b *broker.Broker, frontend string, req *pb.SendRequest) *pb.SendResponse {
	if len(req.Messages) > 0 {
		return &pb.SendResponse{RequestId: req.RequestId, Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER,
			"a send request carries messages or packed messages, not both"))}
	}
	sent, err := b.SendPacked(broker.WithFrontend(ctx, frontend), req.PackedTopic, req.PackedQueueId, req.Packed)
	return sendResponse(b, req, sent.Results, err, func(i int, out *pb.SendResult) {
		out.QueueId = sent.QueueID(i, req.PackedQueueId)
	})
}

// Pull serves a pull request on core b for the named front end.
func Pull(ctx context.Context, b *broker.Broker, frontend string, req *pb.PullRequest) *pb.PullResponse {
	res, err := b.Pull(broker.WithFrontend(ctx, frontend), pullRequest(req))
	return pullResponse(res, err)
}

// PullOrPark serves a pull request on core b for the named front end as
// broker.PullOrPark does: when it parks the pull, it returns nil and
// reply gets the answer later; cancel ends the parked pull early.
func PullOrPark(ctx context.Context, b *broker.Broker, frontend string, req *pb.PullRequest,
	reply func(*pb.PullResponse)) (resp *pb.PullResponse, cancel func()) {
	parked, res, err := b.PullOrPark(broker.WithFrontend(ctx, frontend), pullRequest(req), func(res broker.PullResult, err error) {
		reply(pullResponse(res, err))
	})
	if parked != nil {
		return nil, parked.Cancel
	}
	return pullResponse(res, err), nil
}

func pullRequest(req *pb.PullRequest) broker.PullRequest {
	return broker.PullRequest{
		Group: req.Group, Topic: req.Topic, QueueID: req.QueueId, Offset: req.Offset,
		MaxMessages: int(req.MaxMessages), MaxBytes: int(req.MaxBytes), TagExpression: req.TagExpression, ExpressionType: req.ExpressionType,
		SuspendTimeout: time.Duration(req.SuspendTimeoutMs) * time.Millisecond, CommitOffset: req.CommitOffset,
	}
}

func pullResponse(res broker.PullResult, err error) *pb.PullResponse {
	if err != nil {
		return &pb.PullResponse{Status: wire.Status(err)}
	}
	return &pb.PullResponse{Status: wire.OK, PullStatus: pullStatus(res.Status), Records: res.Records,
		NextOffset: res.NextOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset}
}

func pullStatus(s broker.PullStatus) pb.PullStatus {
	switch s {
	case broker.PullFound:
		return pb.PullStatus_FOUND
	case broker.PullNoMatchedMessage:
		return pb.PullStatus_NO_MATCHED_MESSAGE
	case broker.PullOffsetIllegal:
		return pb.PullStatus_OFFSET_ILLEGAL
	}
	return pb.PullStatus_NO_NEW_MESSAGE
}

// TopicToProto converts a topic configuration.
func TopicToProto(t topic.Config) *pb.TopicConfig {
	return &pb.TopicConfig{Name: t.Name, ReadQueueNums: t.ReadQueueNums, WriteQueueNums: t.WriteQueueNums,
		Perm: t.Perm, Order: t.Order, TopicSysFlag: t.TopicSysFlag, Attributes: t.Attributes}
}

// TopicFromProto converts a topic configuration.
func TopicFromProto(p *pb.TopicConfig) topic.Config {
	return topic.Config{Name: p.Name, ReadQueueNums: p.ReadQueueNums, WriteQueueNums: p.WriteQueueNums,
		Perm: p.Perm, Order: p.Order, TopicSysFlag: p.TopicSysFlag, Attributes: p.Attributes}
}

// Queues converts queue references.
func Queues(refs []*pb.QueueRef) []broker.Queue {
	out := make([]broker.Queue, 0, len(refs))
	for _, r := range refs {
		out = append(out, broker.Queue{Topic: r.Topic, ID: r.QueueId})
	}
	return out
}

// QueueRefs converts queues.
func QueueRefs(qs []broker.Queue) []*pb.QueueRef {
	out := make([]*pb.QueueRef, 0, len(qs))
	for _, q := range qs {
		out = append(out, &pb.QueueRef{Topic: q.Topic, QueueId: q.ID})
	}
	return out
}

// Heartbeat converts a client's heartbeat.
func Heartbeat(hb *pb.Heartbeat) broker.Heartbeat {
	out := broker.Heartbeat{ClientID: hb.GetClientId(), ProducerGroups: hb.GetProducerGroups()}
	for _, cd := range hb.GetConsumers() {
		d := broker.ConsumerData{Group: cd.Group, Model: broker.MessageModel(cd.MessageModel), Orderly: cd.Orderly,
			Pull: cd.ConsumeType == pb.ConsumeType_CONSUME_ACTIVELY}
		for _, s := range cd.Subscriptions {
			d.Subscriptions = append(d.Subscriptions, broker.Subscription{Topic: s.Topic, Expression: s.Expression, Type: s.ExpressionType})
		}
		out.Consumers = append(out.Consumers, d)
	}
	return out
}
