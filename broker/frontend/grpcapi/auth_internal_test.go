package grpcapi

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/errcode"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// services are the bolide.v1 services New registers.
var services = []grpc.ServiceDesc{
	pb.Broker_ServiceDesc, pb.Delay_ServiceDesc, pb.BrokerHA_ServiceDesc,
	pb.Transaction_ServiceDesc, pb.DeadLetter_ServiceDesc, pb.Acl_ServiceDesc,
}

// TestMethodTable: every method of every bolide.v1 service the broker
// serves is classified, streams as streams, and the table names nothing
// else; a data rule yields needs for an empty request.
func TestMethodTable(t *testing.T) {
	seen := map[string]bool{}
	for _, sd := range services {
		for _, m := range sd.Methods {
			full := "/" + sd.ServiceName + "/" + m.MethodName
			seen[full] = true
			r, ok := methods[full]
			if !ok {
				t.Errorf("%s is not in the method table", full)
				continue
			}
			if r.class == classStream || r.class == 0 {
				t.Errorf("%s: unary method with class %v", full, r.class)
			}
			if r.class == classData && r.needs == nil {
				t.Errorf("%s: data without needs", full)
			}
			if (r.class == classAdmin || r.class == classInternal) && r.what == "" {
				t.Errorf("%s: %v without a name", full, r.class)
			}
		}
		for _, s := range sd.Streams {
			full := "/" + sd.ServiceName + "/" + s.StreamName
			seen[full] = true
			if r := methods[full]; r.class != classStream {
				t.Errorf("%s: stream with class %v", full, r.class)
			}
		}
	}
	for m := range methods {
		if !seen[m] {
			t.Errorf("the table names %s, which the broker does not serve", m)
		}
	}
}

// fakePeer is ctx of a call from addr.
func fakePeer(addr string) context.Context {
	a, _ := net.ResolveTCPAddr("tcp", addr)
	return peer.NewContext(context.Background(), &peer.Peer{Addr: a})
}

// TestACLOffClassification: with ACL off (the guard's zero config), every
// administrative method is refused from a remote address and allowed from
// loopback; the others are allowed from anywhere without credentials.
func TestACLOffClassification(t *testing.T) {
	g, err := auth.New(auth.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &authorizer{g: g}
	for m, r := range methods {
		_, err := a.check(fakePeer("192.0.2.7:4000"), m, nil)
		if r.class == classAdmin {
			if errcode.Of(err) != errcode.NoPermission {
				t.Errorf("%s from a remote address with ACL off: %v, want NO_PERMISSION", m, err)
			}
		} else if err != nil {
			t.Errorf("%s (%v) from a remote address with ACL off: %v", m, r.class, err)
		}
		if _, err := a.check(fakePeer("127.0.0.1:4000"), m, nil); err != nil {
			t.Errorf("%s from loopback with ACL off: %v", m, err)
		}
	}
	g, err = auth.New(auth.Config{AllowRemoteAdmin: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a = &authorizer{g: g}
	if _, err := a.check(fakePeer("192.0.2.7:4000"), pb.Broker_CreateTopic_FullMethodName, nil); err != nil {
		t.Errorf("CreateTopic from a remote address with --allow-remote-admin: %v", err)
	}
}

// TestDataNeeds: each data method asks for the permissions its request
// names (topic t, group g).
func TestDataNeeds(t *testing.T) {
	tp, gp := func(p auth.Perm) auth.Need { return auth.TopicNeed("t", p) }, auth.GroupNeed("g", auth.Sub)
	q := []*pb.QueueRef{{Topic: "t"}, {Topic: "t"}}
	cases := map[string]struct {
		req  any
		want []auth.Need
	}{
		pb.Broker_Send_FullMethodName:            {&pb.SendRequest{Messages: []*pb.Message{{Topic: "t"}, {Topic: "t"}}}, []auth.Need{tp(auth.Pub)}},
		pb.Broker_Pull_FullMethodName:            {&pb.PullRequest{Topic: "t", Group: "g"}, []auth.Need{tp(auth.Sub), gp}},
		pb.Broker_GetConsumerList_FullMethodName: {&pb.GetConsumerListRequest{Group: "g"}, []auth.Need{gp}},
		pb.Broker_CheckSubscription_FullMethodName: {&pb.CheckSubscriptionRequest{Group: "g", Subscription: &pb.Subscription{Topic: "t"}},
			[]auth.Need{tp(auth.Sub), gp}},
		pb.Broker_CommitOffsets_FullMethodName: {&pb.CommitOffsetsRequest{Group: "g", Offsets: []*pb.QueueOffset{{Topic: "t"}, {Topic: "t"}}},
			[]auth.Need{gp, tp(auth.Sub)}},
		pb.Broker_QueryOffset_FullMethodName:     {&pb.QueryOffsetRequest{Group: "g", Topic: "t"}, []auth.Need{tp(auth.Sub), gp}},
		pb.Broker_GetQueueOffsets_FullMethodName: {&pb.GetQueueOffsetsRequest{Topic: "t"}, []auth.Need{tp(auth.Any)}},
		pb.Broker_SearchOffset_FullMethodName:    {&pb.SearchOffsetRequest{Topic: "t"}, []auth.Need{tp(auth.Any)}},
		pb.Broker_LockQueues_FullMethodName:      {&pb.LockQueuesRequest{Group: "g", Queues: q}, []auth.Need{gp, tp(auth.Sub)}},
		pb.Broker_UnlockQueues_FullMethodName:    {&pb.UnlockQueuesRequest{Group: "g", Queues: q}, []auth.Need{gp, tp(auth.Sub)}},
		pb.Broker_QueryMessage_FullMethodName:    {&pb.QueryMessageRequest{Topic: "t"}, []auth.Need{tp(auth.Sub)}},
		pb.Broker_Receive_FullMethodName:         {&pb.ReceiveRequest{Topic: "t", Group: "g"}, []auth.Need{tp(auth.Sub), gp}},
		pb.Broker_Ack_FullMethodName:             {&pb.AckRequest{Topic: "t", Group: "g"}, []auth.Need{tp(auth.Sub), gp}},
		pb.Broker_ChangeInvisible_FullMethodName: {&pb.ChangeInvisibleRequest{Topic: "t", Group: "g"}, []auth.Need{tp(auth.Sub), gp}},
		pb.Broker_Nack_FullMethodName:            {&pb.NackRequest{Topic: "t", Group: "g"}, []auth.Need{tp(auth.Sub), gp}},
		pb.Broker_GetConsumeStats_FullMethodName: {&pb.GetConsumeStatsRequest{Group: "g"}, []auth.Need{gp}},
		pb.Delay_Cancel_FullMethodName:           {&pb.CancelDelayedRequest{Topic: "t"}, []auth.Need{tp(auth.Pub)}},
		pb.Transaction_EndTransaction_FullMethodName: {&pb.EndTransactionRequest{Topic: "t", ProducerGroup: "p"},
			[]auth.Need{tp(auth.Pub)}},
		pb.DeadLetter_SendBack_FullMethodName:        {&pb.SendBackRequest{Group: "g"}, []auth.Need{gp}},
		pb.DeadLetter_ListDeadLetters_FullMethodName: {&pb.ListDeadLettersRequest{Group: "g"}, []auth.Need{gp}},
	}
	for m, tc := range cases {
		r := methods[m]
		if r.class != classData {
			t.Errorf("%s: class %v, want data", m, r.class)
			continue
		}
		got := r.needs(tc.req)
		if len(got) != len(tc.want) {
			t.Errorf("%s: needs %v, want %v", m, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: needs %v, want %v", m, got, tc.want)
				break
			}
		}
	}
	// Every data method is in the cases above.
	for m, r := range methods {
		if _, ok := cases[m]; r.class == classData && !ok {
			t.Errorf("data method %s has no case in TestDataNeeds", m)
		}
	}
	// A read without a group (a browse) commits nothing: SUB on the topic
	// alone.
	for m, req := range map[string]any{
		pb.Broker_Pull_FullMethodName:        &pb.PullRequest{Topic: "t", CommitOffset: -1},
		pb.Broker_QueryOffset_FullMethodName: &pb.QueryOffsetRequest{Topic: "t"},
	} {
		if got := methods[m].needs(req); len(got) != 1 || got[0] != tp(auth.Sub) {
			t.Errorf("%s without a group: needs %v, want SUB on the topic", m, got)
		}
	}
	// A retry topic needs its group's SUB, as in RocketMQ.
	got := methods[pb.Broker_Send_FullMethodName].needs(&pb.SendRequest{Messages: []*pb.Message{{Topic: "%RETRY%g"}}})
	if len(got) != 1 || got[0] != gp {
		t.Errorf("send to a retry topic needs %v, want %v", got, gp)
	}
}

// TestACLOffNoAllocation: with ACL off the interceptor lets a send
// through without allocating (the hot path pays a map lookup).
func TestACLOffNoAllocation(t *testing.T) {
	g, err := auth.New(auth.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &authorizer{g: g}
	ctx := fakePeer("192.0.2.7:4000")
	req := &pb.SendRequest{Messages: []*pb.Message{{Topic: "t"}}}
	info := &grpc.UnaryServerInfo{FullMethod: pb.Broker_Send_FullMethodName}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	if n := testing.AllocsPerRun(1000, func() { _, _ = a.unary(ctx, req, info, handler) }); n != 0 {
		t.Fatalf("%v allocations per send with ACL off, want 0", n)
	}
}

// TestACLOnClassification: with ACL on, for every method of the table, a
// call without credentials is refused UNAUTHENTICATED; an admin-class or
// internal-class method is refused NO_PERMISSION to a plain user whose
// defaults grant every topic and group, and allowed to an admin; a read
// or stream is allowed to the plain user.
func TestACLOnClassification(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	admin := auth.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	user := auth.Credentials{AccessKey: "user-key", SecretKey: "user-secret"}
	if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: admin.AccessKey, SecretKey: admin.SecretKey, Admin: true},
		{AccessKey: user.AccessKey, SecretKey: user.SecretKey, DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "PUB|SUB"},
	}}); err != nil {
		t.Fatal(err)
	}
	g, err := auth.New(auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &authorizer{g: g}
	as := func(c auth.Credentials) context.Context {
		ctx := fakePeer("192.0.2.7:4000")
		if c.Empty() {
			return ctx
		}
		h, d := auth.NewHeader(c, time.Now())
		return metadata.NewIncomingContext(ctx, metadata.Pairs(auth.HeaderAuthorization, h, auth.HeaderDate, d))
	}
	for m, r := range methods {
		var req any
		if r.class == classData {
			req = emptyRequest(t, m)
		}
		if _, err := a.check(as(auth.Credentials{}), m, req); errcode.Of(err) != errcode.Unauthenticated {
			t.Errorf("%s without credentials: %v, want UNAUTHENTICATED", m, err)
		}
		_, err := a.check(as(user), m, req)
		switch r.class {
		case classAdmin, classInternal:
			if errcode.Of(err) != errcode.NoPermission {
				t.Errorf("%s (%v) by a plain user: %v, want NO_PERMISSION", m, r.class, err)
			}
		default:
			if err != nil {
				t.Errorf("%s (%v) by a user with every permission: %v", m, r.class, err)
			}
		}
		if _, err := a.check(as(admin), m, req); err != nil {
			t.Errorf("%s by an admin: %v", m, err)
		}
	}
	// A bolide.v1 method outside the table is refused.
	if _, err := a.check(as(admin), "/bolide.v1.Broker/Unheard", nil); errcode.Of(err) != errcode.NoPermission {
		t.Errorf("an unclassified method: %v, want NO_PERMISSION", err)
	}
}

// emptyRequest is an empty request message of unary method m.
func emptyRequest(t *testing.T, m string) any {
	t.Helper()
	for _, sd := range services {
		for _, md := range sd.Methods {
			if "/"+sd.ServiceName+"/"+md.MethodName != m {
				continue
			}
			var req any
			_, _ = md.Handler(nil, context.Background(), func(v any) error { req = v; return errStop }, nil)
			return req
		}
	}
	t.Fatalf("no method %s", m)
	return nil
}

var errStop = errors.New("stop")
