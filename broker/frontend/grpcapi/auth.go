package grpcapi

import (
	"context"
	"strings"

	"google.golang.org/grpc"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker/frontend/v1wire"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Access control of bolide.v1 (package auth). Every call carries the
// signed-date header as metadata (authorization, x-mq-date-time), signed
// afresh by the client for each call. The interceptors authenticate it,
// put the principal in the call's context, and check the method's class
// from the table below before the handler runs; a refusal is a gRPC
// Unauthenticated or PermissionDenied status carrying the coded Status
// (wire.GRPCError), and the handler never runs. The streams (Connect,
// SendStream) are authenticated when they open and authorized message by
// message in their handlers. Other services on the same grpc.Server
// (RocketMQ 5's apache.rocketmq.v2) are not touched: they check their own.

// class says how a bolide.v1 request is checked.
type class uint8

const (
	// classData: the request's topics and groups need permissions
	// (Guard.Authorize with the rule's needs).
	classData class = iota + 1
	// classRead: any authenticated caller (Guard.Authenticated).
	classRead
	// classAdmin: an administrative request (Guard.Admin).
	classAdmin
	// classInternal: a call between daemons (Guard.Internal).
	classInternal
	// classStream: authenticated when the stream opens, authorized per
	// message by the handler.
	classStream
)

func (c class) String() string {
	switch c {
	case classData:
		return "data"
	case classRead:
		return "read"
	case classAdmin:
		return "admin"
	case classInternal:
		return "internal"
	case classStream:
		return "stream"
	}
	return "unknown"
}

// rule is the check of one method.
type rule struct {
	class class
	// what names the request in refusals (admin, internal).
	what string
	// needs are the permissions a data request needs.
	needs func(req any) []auth.Need
}

func data(needs func(req any) []auth.Need) rule { return rule{class: classData, needs: needs} }
func admin(what string) rule                    { return rule{class: classAdmin, what: what} }
func internal(what string) rule                 { return rule{class: classInternal, what: what} }

var (
	read   = rule{class: classRead}
	stream = rule{class: classStream}
)

// topicGroupSub: the topic and the group, both SUB (a consumer's request).
func topicGroupSub(topic, group string) []auth.Need {
	return []auth.Need{auth.TopicNeed(topic, auth.Sub), auth.GroupNeed(group, auth.Sub)}
}

// readSub: what a read of a queue needs. With a group it is a consumer's
// pull (topicGroupSub); without one (a browse: msg at, msg range, the
// console's message views) it commits nothing for any group and starts no
// session, so SUB on the topic is the whole need — the core commits an
// offset only for a named group.
func readSub(topic, group string) []auth.Need {
	if group == "" {
		return []auth.Need{auth.TopicNeed(topic, auth.Sub)}
	}
	return topicGroupSub(topic, group)
}

// groupQueues: the group SUB and each distinct topic of its queues SUB.
func groupQueues(group string, topics func(yield func(string))) []auth.Need {
	needs := []auth.Need{auth.GroupNeed(group, auth.Sub)}
	seen := map[string]bool{}
	topics(func(t string) {
		if !seen[t] {
			seen[t] = true
			needs = append(needs, auth.TopicNeed(t, auth.Sub))
		}
	})
	return needs
}

// methods classifies every bolide.v1 method the broker serves; a method
// missing from it is refused while ACL is on (TestMethodTable keeps it
// complete).
var methods = map[string]rule{
	// Broker: the data path.
	pb.Broker_Send_FullMethodName: data(func(r any) []auth.Need {
		return v1wire.SendNeeds(r.(*pb.SendRequest))
	}),
	pb.Broker_SendStream_FullMethodName: stream,
	pb.Broker_Pull_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.PullRequest)
		return readSub(req.Topic, req.Group)
	}),
	pb.Broker_Connect_FullMethodName: stream,
	pb.Broker_GetConsumerList_FullMethodName: data(func(r any) []auth.Need {
		return []auth.Need{auth.GroupNeed(r.(*pb.GetConsumerListRequest).Group, auth.Sub)}
	}),
	pb.Broker_CheckSubscription_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.CheckSubscriptionRequest)
		return topicGroupSub(req.GetSubscription().GetTopic(), req.Group)
	}),
	pb.Broker_CommitOffsets_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.CommitOffsetsRequest)
		return groupQueues(req.Group, func(yield func(string)) {
			for _, o := range req.Offsets {
				yield(o.GetTopic())
			}
		})
	}),
	pb.Broker_QueryOffset_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.QueryOffsetRequest)
		return readSub(req.Topic, req.Group)
	}),
	pb.Broker_GetQueueOffsets_FullMethodName: data(func(r any) []auth.Need {
		return []auth.Need{auth.TopicNeed(r.(*pb.GetQueueOffsetsRequest).Topic, auth.Any)}
	}),
	pb.Broker_SearchOffset_FullMethodName: data(func(r any) []auth.Need {
		return []auth.Need{auth.TopicNeed(r.(*pb.SearchOffsetRequest).Topic, auth.Any)}
	}),
	pb.Broker_LockQueues_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.LockQueuesRequest)
		return groupQueues(req.Group, func(yield func(string)) {
			for _, q := range req.Queues {
				yield(q.GetTopic())
			}
		})
	}),
	pb.Broker_UnlockQueues_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.UnlockQueuesRequest)
		return groupQueues(req.Group, func(yield func(string)) {
			for _, q := range req.Queues {
				yield(q.GetTopic())
			}
		})
	}),
	// ViewMessage names no topic: the handler checks the found message's
	// topic (SUB) before answering.
	pb.Broker_ViewMessage_FullMethodName: read,
	pb.Broker_QueryMessage_FullMethodName: data(func(r any) []auth.Need {
		return []auth.Need{auth.TopicNeed(r.(*pb.QueryMessageRequest).Topic, auth.Sub)}
	}),
	pb.Broker_Receive_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.ReceiveRequest)
		return topicGroupSub(req.Topic, req.Group)
	}),
	pb.Broker_Ack_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.AckRequest)
		return topicGroupSub(req.Topic, req.Group)
	}),
	pb.Broker_ChangeInvisible_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.ChangeInvisibleRequest)
		return topicGroupSub(req.Topic, req.Group)
	}),
	pb.Broker_Nack_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.NackRequest)
		return topicGroupSub(req.Topic, req.Group)
	}),
	pb.Broker_GetConsumeStats_FullMethodName: data(func(r any) []auth.Need {
		req := r.(*pb.GetConsumeStatsRequest)
		if req.Topic == "" {
			return []auth.Need{auth.GroupNeed(req.Group, auth.Sub)}
		}
		return topicGroupSub(req.Topic, req.Group)
	}),
	// Broker: reads of the broker's configuration and state.
	pb.Broker_GetTopicConfigs_FullMethodName:        read,
	pb.Broker_GetBrokerInfo_FullMethodName:          read,
	pb.Broker_ListConsumerGroups_FullMethodName:     read,
	pb.Broker_GetSubscriptionGroup_FullMethodName:   read,
	pb.Broker_ListSubscriptionGroups_FullMethodName: read,
	// GetGroupConnections is a read, like ListConsumerGroups (which names
	// the same clients and subscriptions) and remoting's
	// GET_CONSUMER_CONNECTION_LIST: what a console's read-only operator
	// looks at when a group lags; it changes nothing.
	pb.Broker_GetGroupConnections_FullMethodName: read,
	// Broker: administration.
	pb.Broker_CreateTopic_FullMethodName:             admin("CreateTopic"),
	pb.Broker_DeleteTopic_FullMethodName:             admin("DeleteTopic"),
	pb.Broker_ResetOffset_FullMethodName:             admin("ResetOffset"),
	pb.Broker_PutSubscriptionGroup_FullMethodName:    admin("PutSubscriptionGroup"),
	pb.Broker_DeleteSubscriptionGroup_FullMethodName: admin("DeleteSubscriptionGroup"),

	// Broker: running figures, topic stats and configuration are cluster
	// status (the configuration holds no secret: paths and addresses
	// that cluster list and topic route show too); changing the
	// configuration, write permission included, is administration.
	pb.Broker_GetBrokerRuntime_FullMethodName:   read,
	pb.Broker_GetTopicStats_FullMethodName:      read,
	pb.Broker_GetBrokerConfig_FullMethodName:    read,
	pb.Broker_UpdateBrokerConfig_FullMethodName: admin("UpdateBrokerConfig"),

	// Delay: a producer cancels its own delayed message.
	pb.Delay_Cancel_FullMethodName: data(func(r any) []auth.Need {
		return []auth.Need{auth.TopicNeed(r.(*pb.CancelDelayedRequest).Topic, auth.Pub)}
	}),
	pb.Delay_Status_FullMethodName: read,

	// BrokerHA: metadata between master and slaves; promotion.
	pb.BrokerHA_GetMetadata_FullMethodName:       internal("GetMetadata"),
	pb.BrokerHA_PushMetadata_FullMethodName:      internal("PushMetadata"),
	pb.BrokerHA_Promote_FullMethodName:           admin("Promote"),
	pb.BrokerHA_ReplicationStatus_FullMethodName: read,

	// Transaction: a producer ends its transactions; the listings expose
	// every producer's messages.
	pb.Transaction_EndTransaction_FullMethodName: data(func(r any) []auth.Need {
		return []auth.Need{auth.TopicNeed(r.(*pb.EndTransactionRequest).Topic, auth.Pub)}
	}),
	pb.Transaction_ListDiscarded_FullMethodName: admin("ListDiscarded"),
	pb.Transaction_ListPending_FullMethodName:   admin("ListPending"),
	pb.Transaction_Stats_FullMethodName:         read,

	// DeadLetter: a consumer sends a failed message back (its group's
	// retry topic: SUB, as RocketMQ); the group's dead letters are its own
	// to read; replay marks are administration.
	pb.DeadLetter_SendBack_FullMethodName: data(func(r any) []auth.Need {
		return []auth.Need{auth.GroupNeed(r.(*pb.SendBackRequest).Group, auth.Sub)}
	}),
	pb.DeadLetter_ListDeadLetters_FullMethodName: data(func(r any) []auth.Need {
		return []auth.Need{auth.GroupNeed(r.(*pb.ListDeadLettersRequest).Group, auth.Sub)}
	}),
	pb.DeadLetter_MarkReplayed_FullMethodName: admin("MarkReplayed"),

	// Acl: user management.
	pb.Acl_ListUsers_FullMethodName:  admin("ListUsers"),
	pb.Acl_PutUser_FullMethodName:    admin("PutUser"),
	pb.Acl_DeleteUser_FullMethodName: admin("DeleteUser"),
}

// v1Prefix starts the full names of the methods this file guards.
const v1Prefix = "/bolide.v1."

// authorizer applies the method table with the broker's guard.
type authorizer struct {
	g *auth.Guard
}

// check authenticates a call to method and applies its rule to req (nil
// for a stream). It returns the context the handler runs with.
func (a *authorizer) check(ctx context.Context, method string, req any) (context.Context, error) {
	r, known := methods[method]
	if !a.g.Enabled() {
		// ACL off: only administration is checked (loopback callers).
		if known && r.class == classAdmin {
			return ctx, a.g.Admin(nil, wire.CallPeer(ctx), r.what)
		}
		return ctx, nil
	}
	p, peerAddr, err := wire.Authenticate(ctx, a.g)
	if err != nil {
		return ctx, err
	}
	ctx = auth.WithPrincipal(ctx, p)
	if !known {
		return ctx, wire.Errorf(pb.Code_NO_PERMISSION, "%s is not classified for access control: refused while ACL is on", method)
	}
	switch r.class {
	case classData:
		if req == nil {
			return ctx, a.g.Authenticated(p, peerAddr)
		}
		return ctx, a.g.Authorize(p, peerAddr, r.needs(req)...)
	case classAdmin:
		return ctx, a.g.Admin(p, peerAddr, r.what)
	case classInternal:
		return ctx, a.g.Internal(p, peerAddr, r.what)
	default: // classRead, classStream
		return ctx, a.g.Authenticated(p, peerAddr)
	}
}

func (a *authorizer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !strings.HasPrefix(info.FullMethod, v1Prefix) {
		return handler(ctx, req)
	}
	ctx, err := a.check(ctx, info.FullMethod, req)
	if err != nil {
		return nil, wire.GRPCError(err)
	}
	return handler(ctx, req)
}

func (a *authorizer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !strings.HasPrefix(info.FullMethod, v1Prefix) {
		return handler(srv, ss)
	}
	ctx, err := a.check(ss.Context(), info.FullMethod, nil)
	if err != nil {
		return wire.GRPCError(err)
	}
	return handler(srv, wire.StreamWithContext(ss, ctx))
}

// authorizeSend checks one request of a SendStream.
func (a *authorizer) authorizeSend(ctx context.Context, req *pb.SendRequest) error {
	if !a.g.Enabled() {
		return nil
	}
	return v1wire.AuthorizeSend(a.g, auth.FromContext(ctx), wire.CallPeer(ctx), req)
}

// authorizeHeartbeat checks a Connect heartbeat: each consumer group SUB
// and each topic it subscribes to SUB (RocketMQ's HEART_BEAT).
func (a *authorizer) authorizeHeartbeat(ctx context.Context, hb *pb.Heartbeat) error {
	if !a.g.Enabled() {
		return nil
	}
	var needs []auth.Need
	for _, c := range hb.GetConsumers() {
		needs = append(needs, auth.GroupNeed(c.GetGroup(), auth.Sub))
		for _, s := range c.GetSubscriptions() {
			needs = append(needs, auth.TopicNeed(s.GetTopic(), auth.Sub))
		}
	}
	return a.g.Authorize(auth.FromContext(ctx), wire.CallPeer(ctx), needs...)
}

// authorizeCheck checks that the caller may be sent a transaction check
// of topic: it carries the half message, and only a producer that may
// publish to the topic can end the transaction (EndTransaction: PUB).
func (a *authorizer) authorizeCheck(ctx context.Context, topic string) error {
	if !a.g.Enabled() {
		return nil
	}
	return a.g.Authorize(auth.FromContext(ctx), wire.CallPeer(ctx), auth.TopicNeed(topic, auth.Pub))
}

// authorizeRead checks, after the fact, that the caller may read a message
// of topic (ViewMessage finds the topic only with the message).
func (a *authorizer) authorizeRead(ctx context.Context, topic string) error {
	if !a.g.Enabled() {
		return nil
	}
	return a.g.Authorize(auth.FromContext(ctx), wire.CallPeer(ctx), auth.TopicNeed(topic, auth.Sub))
}
