package nameserver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/wire"
)

// v5Signed is a call context signed now with c ("" keys: no credentials).
func v5Signed(t *testing.T, c auth.Credentials) context.Context {
	t.Helper()
	if c.Empty() {
		return ctx(t)
	}
	a, d := auth.NewHeader(c, time.Now())
	return metadata.AppendToOutgoingContext(ctx(t), auth.HeaderAuthorization, a, auth.HeaderDate, d)
}

// TestV5AccessPointACL: with ACL on, QueryRoute needs PUB or SUB on the
// topic and QueryAssignment SUB on the group and the topic; refusals are
// UNAUTHORIZED (40100) or FORBIDDEN (40300) in the response; the other
// RPCs stay Unimplemented.
func TestV5AccessPointACL(t *testing.T) {
	admin := auth.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	pub := auth.Credentials{AccessKey: "pub-key", SecretKey: "pub-secret"}
	sub := auth.Credentials{AccessKey: "sub-key", SecretKey: "sub-secret"}
	nobody := auth.Credentials{AccessKey: "nobody-key", SecretKey: "nobody-secret"}
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: admin.AccessKey, SecretKey: admin.SecretKey, Admin: true},
		{AccessKey: pub.AccessKey, SecretKey: pub.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY", TopicPerms: []string{"orders=PUB"}},
		{AccessKey: sub.AccessKey, SecretKey: sub.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{"orders=SUB"}, GroupPerms: []string{"g1=SUB"}},
		{AccessKey: nobody.AccessKey, SecretKey: nobody.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY"},
	}}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, func(o *Options) {
		o.Auth = auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}
	})
	req := registerReq("broker-a", 0, "127.0.0.1:10911")
	req.Topics = pbTopics("orders")
	// Registration is the broker's (an admin's) call.
	resp, err := dial(t, s.Addr()).RegisterBroker(v5Signed(t, admin), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.FromStatus(resp.Status); err != nil {
		t.Fatal(err)
	}
	c := dialV5(t, s.Addr(), false)
	route := func(cctx context.Context) *v2.Status {
		r, err := c.QueryRoute(cctx, &v2.QueryRouteRequest{Topic: res("orders")})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetStatus().GetCode() != v2.Code_OK && len(r.GetMessageQueues()) != 0 {
			t.Fatalf("refused route lists queues: %v", r)
		}
		return r.GetStatus()
	}
	assign := func(cctx context.Context) *v2.Status {
		r, err := c.QueryAssignment(cctx, &v2.QueryAssignmentRequest{Topic: res("orders"), Group: res("g1")})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetStatus().GetCode() != v2.Code_OK && len(r.GetAssignments()) != 0 {
			t.Fatalf("refused assignment lists queues: %v", r)
		}
		return r.GetStatus()
	}
	date := time.Now().UTC().Format(auth.DateLayout)
	wrong, _ := auth.NewHeader(auth.Credentials{AccessKey: sub.AccessKey, SecretKey: "wrong-secret"}, time.Now())
	expired, expiredDate := auth.NewHeader(sub, time.Now().Add(-time.Hour))
	other, _ := auth.NewHeader(sub, time.Now().Add(-2*time.Second))
	goEmpty := auth.Scheme + " Credential=//Rocketmq, SignedHeaders=x-mq-date-time, Signature=" + auth.SignDate(date, "")
	for name, cctx := range map[string]context.Context{
		"no header":     ctx(t),
		"go empty keys": metadata.AppendToOutgoingContext(ctx(t), auth.HeaderAuthorization, goEmpty, auth.HeaderDate, date),
		"wrong secret":  metadata.AppendToOutgoingContext(ctx(t), auth.HeaderAuthorization, wrong, auth.HeaderDate, date),
		"other date":    metadata.AppendToOutgoingContext(ctx(t), auth.HeaderAuthorization, other, auth.HeaderDate, date),
		"expired":       metadata.AppendToOutgoingContext(ctx(t), auth.HeaderAuthorization, expired, auth.HeaderDate, expiredDate),
	} {
		if st := route(cctx); st.GetCode() != v2.Code_UNAUTHORIZED {
			t.Errorf("route with %s: %v", name, st)
		}
		if st := assign(cctx); st.GetCode() != v2.Code_UNAUTHORIZED {
			t.Errorf("assignment with %s: %v", name, st)
		}
	}
	if st := route(v5Signed(t, nobody)); st.GetCode() != v2.Code_FORBIDDEN {
		t.Errorf("route by nobody: %v", st)
	}
	if st := assign(v5Signed(t, pub)); st.GetCode() != v2.Code_FORBIDDEN {
		t.Errorf("assignment by the publisher: %v", st)
	}
	for _, who := range []auth.Credentials{pub, sub, admin} {
		if st := route(v5Signed(t, who)); st.GetCode() != v2.Code_OK {
			t.Errorf("route by %s: %v", who.AccessKey, st)
		}
	}
	for _, who := range []auth.Credentials{sub, admin} {
		if st := assign(v5Signed(t, who)); st.GetCode() != v2.Code_OK {
			t.Errorf("assignment by %s: %v", who.AccessKey, st)
		}
	}
	// Not served here, with or without credentials.
	if _, err := c.SendMessage(v5Signed(t, admin), &v2.SendMessageRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("send to the access point: %v", err)
	}
	if _, err := c.Heartbeat(ctx(t), &v2.HeartbeatRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("heartbeat to the access point: %v", err)
	}
}
