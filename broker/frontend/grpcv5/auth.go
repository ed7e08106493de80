package grpcv5

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/wire"
)

// Access control (the broker's --acl). With ACL on, every call of the
// service is first authenticated by its authorization and x-mq-date-time
// headers (auth.Guard.Header: the HMAC of the date under the access key's
// secret, the date's distance from the clock, a header replayed from
// another connection), then authorized by what the request names, per
// rpcRules below (Apache's DefaultAuthorizationContextBuilder, with every
// RPC of the service listed: one missing is refused):
//
//	SendMessage, RecallMessage, EndTransaction   topic PUB
//	QueryRoute                                   topic PUB or SUB
//	Heartbeat (naming a group, not a producer's) group SUB
//	ReceiveMessage, AckMessage,                  group SUB + topic SUB
//	ForwardMessageToDeadLetterQueue,
//	QueryAssignment, PullMessage, UpdateOffset,
//	GetOffset, SyncLiteSubscription
//	ChangeInvisibleDuration,                     group SUB
//	NotifyClientTermination (with a group)
//	QueryOffset                                  topic SUB
//	Telemetry                                    authenticated when the
//	                                             stream opens; each Settings
//	                                             by its content: a
//	                                             producer's topics PUB, a
//	                                             consumer's group SUB and
//	                                             topics SUB
//
// Names are the namespace-folded ones the handlers use. A refusal is the
// RPC's own response with Status UNAUTHORIZED (40100) when the caller is
// not authenticated, FORBIDDEN (40300) when it lacks the permission, and
// the guard's message; the handler does not run, so nothing is stored,
// acknowledged or changed. A Telemetry stream writes the refusal as a
// command's Status, then ends with gRPC UNAUTHENTICATED or
// PERMISSION_DENIED (the clients fail their start on it instead of
// waiting for Settings). The Go client (5.1.4) signs with empty keys when
// it has no credentials (Credential=//Rocketmq): with ACL on that is
// refused (no access key).
//
// A client id belongs to the access key whose call first named it: another
// (not an admin) naming it is refused FORBIDDEN, so that nobody attaches to
// another's Telemetry stream or terminates it. A transaction check-back
// goes out on a stream only while its caller may still publish to the
// topic (telemetry.go). A heartbeat without a client id or a group is a
// liveness probe (the Go client's, when its Telemetry stream recovers) and
// is answered without credentials: it records nothing.
//
// With ACL off the service is registered as generated: nothing is read or
// checked per call.

// rpcRule is how one RPC is authorized.
type rpcRule struct {
	// probe reports whether the request is a liveness probe answered
	// without credentials (it records and reveals nothing); nil: none is.
	probe func(m callMeta, req any) bool
	// needs is what the request needs; none: authenticated is enough. An
	// error (an illegal name) is answered as the handler would answer it.
	needs func(m callMeta, req any) ([]auth.Need, error)
	// refused is the RPC's response to req carrying st (unary RPCs).
	refused func(req any, st *v2.Status) any
}

// consumeNeeds is group SUB + topic SUB.
func consumeNeeds(m callMeta, group, topic *v2.Resource) ([]auth.Need, error) {
	g, err := m.groupName(group)
	if err != nil {
		return nil, err
	}
	t, err := m.topicName(topic)
	if err != nil {
		return nil, err
	}
	return []auth.Need{auth.GroupNeed(g, auth.Sub), auth.TopicNeed(t, auth.Sub)}, nil
}

// topicNeeds is perm on a topic.
func topicNeeds(m callMeta, topic *v2.Resource, perm auth.Perm) ([]auth.Need, error) {
	t, err := m.topicName(topic)
	if err != nil {
		return nil, err
	}
	return []auth.Need{auth.TopicNeed(t, perm)}, nil
}

// groupNeeds is group SUB.
func groupNeeds(m callMeta, group *v2.Resource) ([]auth.Need, error) {
	g, err := m.groupName(group)
	if err != nil {
		return nil, err
	}
	return []auth.Need{auth.GroupNeed(g, auth.Sub)}, nil
}

// rpcRules is the table of the service's RPCs, by method name.
var rpcRules = map[string]rpcRule{
	"QueryRoute": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			return topicNeeds(m, req.(*v2.QueryRouteRequest).GetTopic(), auth.Any)
		},
		refused: func(_ any, st *v2.Status) any { return &v2.QueryRouteResponse{Status: st} },
	},
	"Heartbeat": {
		// The Go client (5.1.4) probes a broker with an empty heartbeat,
		// neither signed nor carrying its client id, when its Telemetry
		// stream recovers from an error, and drops the stream unless the
		// answer is OK. Such a heartbeat changes nothing (heartbeat.go).
		probe: func(m callMeta, req any) bool {
			return m.clientID == "" && req.(*v2.HeartbeatRequest).GetGroup().GetName() == ""
		},
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			r := req.(*v2.HeartbeatRequest)
			if r.GetClientType() == v2.ClientType_PRODUCER || r.GetGroup().GetName() == "" {
				return nil, nil
			}
			return groupNeeds(m, r.GetGroup())
		},
		refused: func(_ any, st *v2.Status) any { return &v2.HeartbeatResponse{Status: st} },
	},
	"SendMessage": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			var out []auth.Need
			for _, pm := range req.(*v2.SendMessageRequest).GetMessages() {
				n, err := topicNeeds(m, pm.GetTopic(), auth.Pub)
				if err != nil {
					return nil, err
				}
				if len(out) == 0 || out[len(out)-1] != n[0] {
					out = append(out, n[0])
				}
			}
			return out, nil
		},
		refused: func(req any, st *v2.Status) any {
			resp := &v2.SendMessageResponse{Status: st}
			for _, pm := range req.(*v2.SendMessageRequest).GetMessages() {
				resp.Entries = append(resp.Entries, &v2.SendResultEntry{Status: st, MessageId: pm.GetSystemProperties().GetMessageId()})
			}
			return resp
		},
	},
	"QueryAssignment": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			r := req.(*v2.QueryAssignmentRequest)
			return consumeNeeds(m, r.GetGroup(), r.GetTopic())
		},
		refused: func(_ any, st *v2.Status) any { return &v2.QueryAssignmentResponse{Status: st} },
	},
	"AckMessage": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			r := req.(*v2.AckMessageRequest)
			return consumeNeeds(m, r.GetGroup(), r.GetTopic())
		},
		refused: func(req any, st *v2.Status) any {
			resp := &v2.AckMessageResponse{Status: st}
			for _, e := range req.(*v2.AckMessageRequest).GetEntries() {
				resp.Entries = append(resp.Entries, &v2.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: st})
			}
			return resp
		},
	},
	"ForwardMessageToDeadLetterQueue": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			r := req.(*v2.ForwardMessageToDeadLetterQueueRequest)
			return consumeNeeds(m, r.GetGroup(), r.GetTopic())
		},
		refused: func(_ any, st *v2.Status) any { return &v2.ForwardMessageToDeadLetterQueueResponse{Status: st} },
	},
	"UpdateOffset": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			r := req.(*v2.UpdateOffsetRequest)
			return consumeNeeds(m, r.GetGroup(), r.GetMessageQueue().GetTopic())
		},
		refused: func(_ any, st *v2.Status) any { return &v2.UpdateOffsetResponse{Status: st} },
	},
	"GetOffset": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			r := req.(*v2.GetOffsetRequest)
			return consumeNeeds(m, r.GetGroup(), r.GetMessageQueue().GetTopic())
		},
		refused: func(_ any, st *v2.Status) any { return &v2.GetOffsetResponse{Status: st} },
	},
	"QueryOffset": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			return topicNeeds(m, req.(*v2.QueryOffsetRequest).GetMessageQueue().GetTopic(), auth.Sub)
		},
		refused: func(_ any, st *v2.Status) any { return &v2.QueryOffsetResponse{Status: st} },
	},
	"EndTransaction": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			return topicNeeds(m, req.(*v2.EndTransactionRequest).GetTopic(), auth.Pub)
		},
		refused: func(_ any, st *v2.Status) any { return &v2.EndTransactionResponse{Status: st} },
	},
	"NotifyClientTermination": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			r := req.(*v2.NotifyClientTerminationRequest)
			if r.GetGroup().GetName() == "" {
				return nil, nil
			}
			return groupNeeds(m, r.GetGroup())
		},
		refused: func(_ any, st *v2.Status) any { return &v2.NotifyClientTerminationResponse{Status: st} },
	},
	"ChangeInvisibleDuration": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			return groupNeeds(m, req.(*v2.ChangeInvisibleDurationRequest).GetGroup())
		},
		refused: func(_ any, st *v2.Status) any { return &v2.ChangeInvisibleDurationResponse{Status: st} },
	},
	"RecallMessage": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			return topicNeeds(m, req.(*v2.RecallMessageRequest).GetTopic(), auth.Pub)
		},
		refused: func(_ any, st *v2.Status) any { return &v2.RecallMessageResponse{Status: st} },
	},
	"SyncLiteSubscription": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			r := req.(*v2.SyncLiteSubscriptionRequest)
			return consumeNeeds(m, r.GetGroup(), r.GetTopic())
		},
		refused: func(_ any, st *v2.Status) any { return &v2.SyncLiteSubscriptionResponse{Status: st} },
	},
	// Streams: the request is read by the stream's guard (guardedStream).
	"ReceiveMessage": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			r := req.(*v2.ReceiveMessageRequest)
			return consumeNeeds(m, r.GetGroup(), r.GetMessageQueue().GetTopic())
		},
	},
	"PullMessage": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			r := req.(*v2.PullMessageRequest)
			return consumeNeeds(m, r.GetGroup(), r.GetMessageQueue().GetTopic())
		},
	},
	"Telemetry": {
		needs: func(m callMeta, req any) ([]auth.Need, error) {
			return settingsNeeds(m, req.(*v2.Settings))
		},
	},
}

// settingsNeeds is what a client's Settings need: a producer's topics
// PUB, a consumer's group SUB and subscribed topics SUB. Settings of
// neither kind need nothing (the handler refuses them).
func settingsNeeds(m callMeta, st *v2.Settings) ([]auth.Need, error) {
	var out []auth.Need
	switch ps := st.GetPubSub().(type) {
	case *v2.Settings_Publishing:
		for _, r := range ps.Publishing.GetTopics() {
			n, err := topicNeeds(m, r, auth.Pub)
			if err != nil {
				return nil, err
			}
			out = append(out, n...)
		}
	case *v2.Settings_Subscription:
		n, err := groupNeeds(m, ps.Subscription.GetGroup())
		if err != nil {
			return nil, err
		}
		out = append(out, n...)
		for _, e := range ps.Subscription.GetSubscriptions() {
			n, err := topicNeeds(m, e.GetTopic(), auth.Sub)
			if err != nil {
				return nil, err
			}
			out = append(out, n...)
		}
	}
	return out, nil
}

// authenticate checks a call's credentials and returns the context
// carrying the caller (auth.FromContext) and its connection's address.
func (s *Service) authenticate(ctx context.Context) (context.Context, string, error) {
	p, from, err := wire.Authenticate(ctx, s.guard)
	if err != nil {
		return ctx, from, err
	}
	return auth.WithPrincipal(ctx, p), from, nil
}

// authorize checks that the caller of ctx (authenticated) may make the
// request rule describes.
func (s *Service) authorize(ctx context.Context, from string, rule rpcRule, req any) error {
	p := auth.FromContext(ctx)
	needs, err := rule.needs(readMeta(ctx), req)
	if err != nil {
		return err
	}
	if len(needs) == 0 {
		return s.guard.Authenticated(p, from)
	}
	return s.guard.Authorize(p, from, needs...)
}

// check authenticates and authorizes one request: a non-nil status is the
// refusal to answer.
func (s *Service) check(ctx context.Context, rule rpcRule, req any) (context.Context, *v2.Status) {
	if rule.probe != nil && rule.probe(readMeta(ctx), req) {
		return ctx, nil
	}
	ctx, from, err := s.authenticate(ctx)
	if err != nil {
		return ctx, statusOf(err)
	}
	if err := s.ownsClient(ctx); err != nil {
		return ctx, statusOf(err)
	}
	if err := s.authorize(ctx, from, rule, req); err != nil {
		return ctx, statusOf(err)
	}
	return ctx, nil
}

// ownsClient refuses (FORBIDDEN) a call naming a client id that another
// access key's calls created: a client's Telemetry stream carries its
// transaction check-backs, its termination releases its messages. An
// admin may act for any client.
func (s *Service) ownsClient(ctx context.Context) error {
	p := auth.FromContext(ctx)
	m := readMeta(ctx)
	if p == nil || p.Admin || m.clientID == "" {
		return nil
	}
	c := s.clients.get(m.clientID)
	if c == nil || c.owner == "" || c.owner == p.AccessKey {
		return nil
	}
	return errorf(v2.Code_FORBIDDEN, "client id %s is in use by another access key than %s", m.clientID, p.AccessKey)
}

// register adds the service to srv: as generated with ACL off, else with
// every RPC guarded.
func (s *Service) register(srv grpc.ServiceRegistrar) {
	if !s.guard.Enabled() {
		v2.RegisterMessagingServiceServer(srv, s)
		return
	}
	srv.RegisterService(s.guardedDesc(), s)
}

// guardedDesc is the service's description with each handler guarded.
func (s *Service) guardedDesc() *grpc.ServiceDesc {
	d := v2.MessagingService_ServiceDesc
	d.Methods = append([]grpc.MethodDesc(nil), d.Methods...)
	d.Streams = append([]grpc.StreamDesc(nil), d.Streams...)
	for i := range d.Methods {
		rule, ok := rpcRules[d.Methods[i].MethodName]
		orig := d.Methods[i].Handler
		name := d.Methods[i].MethodName
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, outer grpc.UnaryServerInterceptor) (any, error) {
			if !ok || rule.refused == nil {
				return nil, status.Errorf(codes.PermissionDenied, "%s is not in the broker's access-control table: refused while ACL is on", name)
			}
			return orig(srv, ctx, dec, s.guardUnary(rule, outer))
		}
	}
	for i := range d.Streams {
		switch d.Streams[i].StreamName {
		case "ReceiveMessage":
			d.Streams[i].Handler = s.guardReceive
		case "PullMessage":
			d.Streams[i].Handler = s.guardPull
		case "Telemetry":
			d.Streams[i].Handler = s.guardTelemetry
		default:
			name := d.Streams[i].StreamName
			d.Streams[i].Handler = func(any, grpc.ServerStream) error {
				return status.Errorf(codes.PermissionDenied, "%s is not in the broker's access-control table: refused while ACL is on", name)
			}
		}
	}
	return &d
}

// guardUnary is the interceptor a unary handler runs with: the server's
// own (outer, if any) around the check, which answers a refusal without
// calling the handler.
func (s *Service) guardUnary(rule rpcRule, outer grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		inner := func(ctx context.Context, req any) (any, error) {
			ctx, st := s.check(ctx, rule, req)
			if st != nil {
				return rule.refused(req, st), nil
			}
			return handler(ctx, req)
		}
		if outer == nil {
			return inner(ctx, req)
		}
		return outer(ctx, req, info, inner)
	}
}

// guardReceive reads a ReceiveMessage request, checks it, and answers a
// refusal as a receive answers any failure (a status, then the delivery
// timestamp) or hands it to the handler.
func (s *Service) guardReceive(_ any, stream grpc.ServerStream) error {
	req := new(v2.ReceiveMessageRequest)
	if err := stream.RecvMsg(req); err != nil {
		return err
	}
	ctx, st := s.check(stream.Context(), rpcRules["ReceiveMessage"], req)
	out := &grpc.GenericServerStream[v2.ReceiveMessageRequest, v2.ReceiveMessageResponse]{
		ServerStream: wire.StreamWithContext(stream, ctx)}
	if st != nil {
		s.endReceive(out, st)
		return nil
	}
	return s.ReceiveMessage(req, out)
}

// guardPull is guardReceive for PullMessage.
func (s *Service) guardPull(_ any, stream grpc.ServerStream) error {
	req := new(v2.PullMessageRequest)
	if err := stream.RecvMsg(req); err != nil {
		return err
	}
	ctx, st := s.check(stream.Context(), rpcRules["PullMessage"], req)
	out := &grpc.GenericServerStream[v2.PullMessageRequest, v2.PullMessageResponse]{
		ServerStream: wire.StreamWithContext(stream, ctx)}
	if st != nil {
		return out.Send(&v2.PullMessageResponse{Content: &v2.PullMessageResponse_Status{Status: st}})
	}
	return s.PullMessage(req, out)
}

// guardTelemetry authenticates a Telemetry stream when it opens (its
// headers come once); its Settings are authorized one by one
// (telemetryCommand). A refusal is written as a command's status, then
// the stream ends with the matching gRPC code.
func (s *Service) guardTelemetry(_ any, stream grpc.ServerStream) error {
	ctx, _, err := s.authenticate(stream.Context())
	if err == nil {
		err = s.ownsClient(ctx)
	}
	out := &grpc.GenericServerStream[v2.TelemetryCommand, v2.TelemetryCommand]{
		ServerStream: wire.StreamWithContext(stream, ctx)}
	if err != nil {
		return refuseTelemetry(out, err)
	}
	return s.Telemetry(out)
}

// refuseTelemetry writes err as a command's status and returns the error
// that ends the stream.
func refuseTelemetry(stream v2.MessagingService_TelemetryServer, err error) error {
	reply, end := refusal(err)
	_ = stream.Send(reply)
	return end
}

// refusal is the command carrying a Telemetry refusal's status and the
// error that ends the stream: UNAUTHENTICATED for UNAUTHORIZED,
// PERMISSION_DENIED for FORBIDDEN, INVALID_ARGUMENT for an illegal name.
func refusal(err error) (*v2.TelemetryCommand, error) {
	st := statusOf(err)
	var c codes.Code
	switch st.GetCode() {
	case v2.Code_UNAUTHORIZED:
		c = codes.Unauthenticated
	case v2.Code_FORBIDDEN:
		c = codes.PermissionDenied
	default:
		c = grpcCodeOf(err)
	}
	return &v2.TelemetryCommand{Status: st}, status.Errorf(c, "%s: %s", st.GetCode(), st.GetMessage())
}

// authorizeSettings checks a Telemetry stream's Settings against the
// stream's caller (nil with ACL off).
func (s *Service) authorizeSettings(ctx context.Context, st *v2.Settings) error {
	if !s.guard.Enabled() {
		return nil
	}
	return s.authorize(ctx, wire.CallPeer(ctx), rpcRules["Telemetry"], st)
}
