package grpcv5

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"google.golang.org/grpc/metadata"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/auth"
)

// TestRPCRulesCoverService: every RPC of apache.rocketmq.v2.MessagingService
// is in the access-control table, nothing else is, and each unary RPC's
// refusal is its own response type carrying the refusal's status.
func TestRPCRulesCoverService(t *testing.T) {
	d := v2.MessagingService_ServiceDesc
	names := map[string]bool{}
	srv := reflect.TypeOf((*v2.MessagingServiceServer)(nil)).Elem()
	for _, m := range d.Methods {
		names[m.MethodName] = true
		rule, ok := rpcRules[m.MethodName]
		if !ok || rule.needs == nil || rule.refused == nil {
			t.Errorf("unary %s: no complete rule", m.MethodName)
			continue
		}
		meth, ok := srv.MethodByName(m.MethodName)
		if !ok {
			t.Fatalf("%s is not a method of the server interface", m.MethodName)
		}
		req := reflect.New(meth.Type.In(1).Elem()).Interface()
		st := &v2.Status{Code: v2.Code_FORBIDDEN, Message: "no"}
		resp := rule.refused(req, st)
		if got, want := reflect.TypeOf(resp), meth.Type.Out(0); got != want {
			t.Errorf("%s: refusal is a %v, the RPC answers %v", m.MethodName, got, want)
		}
		if r, ok := resp.(interface{ GetStatus() *v2.Status }); !ok || r.GetStatus() != st {
			t.Errorf("%s: refusal does not carry the status", m.MethodName)
		}
		// An empty request names no topic or group: each rule that needs
		// one refuses it as the handler would. (A heartbeat or termination
		// need not name a group; a send without messages stores nothing.)
		if _, err := rule.needs(callMeta{}, req); err == nil && !slices.Contains([]string{"Heartbeat", "NotifyClientTermination", "SendMessage"}, m.MethodName) {
			t.Errorf("%s: an empty request passes the rule's names", m.MethodName)
		}
	}
	for _, s := range d.Streams {
		names[s.StreamName] = true
		if rule, ok := rpcRules[s.StreamName]; !ok || rule.needs == nil {
			t.Errorf("stream %s: no rule", s.StreamName)
		}
	}
	for name := range rpcRules {
		if !names[name] {
			t.Errorf("rule for %s, which the service does not have", name)
		}
	}
	// The guarded description replaces every handler.
	g := (&Service{guard: nil}).guardedDesc()
	if len(g.Methods) != len(d.Methods) || len(g.Streams) != len(d.Streams) {
		t.Fatalf("guarded description lost RPCs")
	}
	for i := range g.Methods {
		if reflect.ValueOf(g.Methods[i].Handler).Pointer() == reflect.ValueOf(d.Methods[i].Handler).Pointer() {
			t.Errorf("%s is not guarded", g.Methods[i].MethodName)
		}
	}
	for i := range g.Streams {
		if reflect.ValueOf(g.Streams[i].Handler).Pointer() == reflect.ValueOf(d.Streams[i].Handler).Pointer() {
			t.Errorf("%s is not guarded", g.Streams[i].StreamName)
		}
	}
}

// TestRPCRuleNeeds: what each kind of request needs, with the names folded
// into the call's namespace as the handlers fold them.
func TestRPCRuleNeeds(t *testing.T) {
	orders, g1 := &v2.Resource{Name: "orders"}, &v2.Resource{Name: "g1"}
	pub := func(n string) auth.Need { return auth.TopicNeed(n, auth.Pub) }
	subT := func(n string) auth.Need { return auth.TopicNeed(n, auth.Sub) }
	subG := func(n string) auth.Need { return auth.GroupNeed(n, auth.Sub) }
	ct := func(c v2.ClientType) *v2.ClientType { return &c }
	for _, tc := range []struct {
		rpc  string
		ns   string
		req  any
		want []auth.Need
	}{
		{"SendMessage", "", &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: orders}, {Topic: orders}}}, []auth.Need{pub("orders")}},
		{"SendMessage", "shop", &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: orders}}}, []auth.Need{pub("shop%orders")}},
		{"SendMessage", "", &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: orders}, {Topic: &v2.Resource{Name: "audit"}}}},
			[]auth.Need{pub("orders"), pub("audit")}},
		{"SendMessage", "", &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: &v2.Resource{Name: "%RETRY%g1"}}}}, []auth.Need{subG("g1")}},
		{"QueryRoute", "", &v2.QueryRouteRequest{Topic: orders}, []auth.Need{auth.TopicNeed("orders", auth.Any)}},
		{"Heartbeat", "", &v2.HeartbeatRequest{ClientType: v2.ClientType_PRODUCER}, nil},
		{"Heartbeat", "", &v2.HeartbeatRequest{}, nil},
		{"Heartbeat", "", &v2.HeartbeatRequest{Group: g1, ClientType: v2.ClientType_PUSH_CONSUMER}, []auth.Need{subG("g1")}},
		{"ReceiveMessage", "shop", &v2.ReceiveMessageRequest{Group: g1, MessageQueue: &v2.MessageQueue{Topic: orders}},
			[]auth.Need{subG("shop%g1"), subT("shop%orders")}},
		{"AckMessage", "", &v2.AckMessageRequest{Group: g1, Topic: orders}, []auth.Need{subG("g1"), subT("orders")}},
		{"ChangeInvisibleDuration", "", &v2.ChangeInvisibleDurationRequest{Group: g1, Topic: orders}, []auth.Need{subG("g1")}},
		{"NotifyClientTermination", "", &v2.NotifyClientTerminationRequest{}, nil},
		{"NotifyClientTermination", "", &v2.NotifyClientTerminationRequest{Group: g1}, []auth.Need{subG("g1")}},
		{"EndTransaction", "", &v2.EndTransactionRequest{Topic: orders}, []auth.Need{pub("orders")}},
		{"RecallMessage", "", &v2.RecallMessageRequest{Topic: orders}, []auth.Need{pub("orders")}},
		{"Telemetry", "", &v2.Settings{PubSub: &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: []*v2.Resource{orders, {Name: "audit"}}}}},
			[]auth.Need{pub("orders"), pub("audit")}},
		{"Telemetry", "", &v2.Settings{ClientType: ct(v2.ClientType_SIMPLE_CONSUMER), PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{
			Group: g1, Subscriptions: []*v2.SubscriptionEntry{{Topic: orders}, {Topic: &v2.Resource{Name: "audit"}}}}}},
			[]auth.Need{subG("g1"), subT("orders"), subT("audit")}},
	} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(headerNamespace, tc.ns))
		got, err := rpcRules[tc.rpc].needs(readMeta(ctx), tc.req)
		if err != nil {
			t.Errorf("%s %v: %v", tc.rpc, tc.req, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: needs %v, want %v", tc.rpc, tc.req, got, tc.want)
		}
	}
	// An illegal name is refused by the rule as by the handler.
	if _, err := rpcRules["SendMessage"].needs(callMeta{}, &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: &v2.Resource{Name: "bad topic!"}}}}); codeOf(err) != v2.Code_ILLEGAL_TOPIC {
		t.Errorf("illegal topic: %v", err)
	}
}

// TestRefusalCodes: the guard's errors map to 40100 and 40300.
func TestRefusalCodes(t *testing.T) {
	g, err := auth.New(auth.Config{Enabled: true, File: writeACL(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Header("127.0.0.1:1", "", "")
	if c := codeOf(err); c != v2.Code_UNAUTHORIZED {
		t.Errorf("no credentials: %v", c)
	}
	err = g.Authorize(&auth.Principal{AccessKey: "user01"}, "127.0.0.1:1", auth.TopicNeed("t", auth.Pub))
	if c := codeOf(err); c != v2.Code_FORBIDDEN {
		t.Errorf("no permission: %v", c)
	}
	cmd, end := refusal(err)
	if cmd.GetStatus().GetCode() != v2.Code_FORBIDDEN || end == nil {
		t.Errorf("telemetry refusal: %v %v", cmd, end)
	}
}

func writeACL(t *testing.T) string {
	f := t.TempDir() + "/acl.yml"
	if err := auth.WriteFile(f, &auth.File{Accounts: []auth.Account{{AccessKey: "user01", SecretKey: "secret01", DefaultTopicPerm: "DENY"}}}); err != nil {
		t.Fatal(err)
	}
	return f
}
