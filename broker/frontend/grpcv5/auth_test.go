package grpcv5_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/tlsconf"
	"github.com/bolide-mq/bolide/nameserver"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// The users of the ACL tests' broker.
var (
	adminKey    = auth.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	producerKey = auth.Credentials{AccessKey: "producer-key", SecretKey: "producer-secret"}
	consumerKey = auth.Credentials{AccessKey: "consumer-key", SecretKey: "consumer-secret"}
	nobodyKey   = auth.Credentials{AccessKey: "nobody-key", SecretKey: "nobody-secret"}
)

// startACLBroker starts a broker with ACL on: an admin, a producer
// allowed to publish to "orders" only, a consumer allowed to subscribe to
// "orders" as group "g1" only, and a user allowed nothing. The skew limit
// is the default's.
func startACLBroker(t *testing.T) *server.Server {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: adminKey.AccessKey, SecretKey: adminKey.SecretKey, Admin: true},
		{AccessKey: producerKey.AccessKey, SecretKey: producerKey.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{"orders=PUB"}},
		{AccessKey: consumerKey.AccessKey, SecretKey: consumerKey.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{"orders=SUB"}, GroupPerms: []string{"g1=SUB"}},
		{AccessKey: nobodyKey.AccessKey, SecretKey: nobodyKey.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, func(o *broker.Options) {
		o.Auth = auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}
	})
	createTopic(t, b, "orders", "")
	createTopic(t, b, "audit", "")
	return b
}

// headerCtx is a call context with a Go client's headers and the given
// authorization and date ("" leaves a header out).
func headerCtx(t testing.TB, clientID, authorization, date string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	kv := []string{"x-mq-language", "GO", "x-mq-protocol", "v2", "x-mq-client-version", "5.1.4", "x-mq-request-id", "req"}
	if clientID != "" {
		kv = append(kv, "x-mq-client-id", clientID)
	}
	if authorization != "" {
		kv = append(kv, auth.HeaderAuthorization, authorization)
	}
	if date != "" {
		kv = append(kv, auth.HeaderDate, date)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// signed is a call context signed now with c, as a client signs each call.
func signed(t testing.TB, clientID string, c auth.Credentials) context.Context {
	t.Helper()
	a, d := auth.NewHeader(c, time.Now())
	return headerCtx(t, clientID, a, d)
}

// written is the end of the broker's commit log: unchanged when nothing
// was stored.
func written(b *server.Server) int64 { return b.Store().CommitLog().MaxOffset() }

// badCredentials are calls that must not be authenticated, each as a
// function making the call's context.
func badCredentials(t *testing.T) map[string]func() context.Context {
	now := time.Now()
	date := now.UTC().Format(auth.DateLayout)
	goEmpty := auth.Scheme + " Credential=//Rocketmq, SignedHeaders=x-mq-date-time, Signature=" + auth.SignDate(date, "")
	wrong := auth.Credentials{AccessKey: producerKey.AccessKey, SecretKey: "not-the-secret"}
	otherDate := now.Add(-time.Second).UTC().Format(auth.DateLayout)
	signedOther, _ := auth.NewHeader(producerKey, now.Add(-time.Second))
	expired, expiredDate := auth.NewHeader(producerKey, now.Add(-20*time.Minute))
	future, futureDate := auth.NewHeader(producerKey, now.Add(20*time.Minute))
	return map[string]func() context.Context{
		"no header": func() context.Context { return headerCtx(t, newClientID(), "", date) },
		"no date": func() context.Context {
			a, _ := auth.NewHeader(producerKey, now)
			return headerCtx(t, newClientID(), a, "")
		},
		"go empty keys": func() context.Context { return headerCtx(t, newClientID(), goEmpty, date) },
		"unknown key": func() context.Context {
			return signed(t, newClientID(), auth.Credentials{AccessKey: "stranger", SecretKey: "whatever"})
		},
		"wrong secret": func() context.Context { return signed(t, newClientID(), wrong) },
		"other date":   func() context.Context { return headerCtx(t, newClientID(), signedOther, date) },
		"expired date": func() context.Context { return headerCtx(t, newClientID(), expired, expiredDate) },
		"future date":  func() context.Context { return headerCtx(t, newClientID(), future, futureDate) },
		"malformed":    func() context.Context { return headerCtx(t, newClientID(), "Basic cHJvZHVjZXI6c2VjcmV0", date) },
		"bad scheme case": func() context.Context {
			return headerCtx(t, newClientID(), strings.Replace(signedOther, auth.Scheme, "HMAC", 1), otherDate)
		},
	}
}

// TestACLSendRefused: a send without valid credentials is answered
// UNAUTHORIZED (40100), one by a user without PUB on the topic FORBIDDEN
// (40300), in the response's status and every entry's, and nothing is
// written; the producer's own send is stored.
func TestACLSendRefused(t *testing.T) {
	b := startACLBroker(t)
	c := dial(t, b)
	for name, ctx := range badCredentials(t) {
		t.Run(name, func(t *testing.T) {
			before := written(b)
			resp := send(t, c, ctx(), newMessage("orders", "forged"))
			wantCode(t, "send", resp.GetStatus(), v2.Code_UNAUTHORIZED)
			if len(resp.GetEntries()) != 1 {
				t.Fatalf("entries: %v", resp.GetEntries())
			}
			wantCode(t, "entry", resp.GetEntries()[0].GetStatus(), v2.Code_UNAUTHORIZED)
			if got := written(b); got != before {
				t.Fatalf("commit log grew from %d to %d on a refused send", before, got)
			}
		})
	}
	for name, tc := range map[string]struct {
		creds auth.Credentials
		topic string
	}{
		"subscriber only":   {consumerKey, "orders"},
		"no permission":     {nobodyKey, "orders"},
		"other topic":       {producerKey, "audit"},
		"retry topic":       {producerKey, "%RETRY%g1"},
		"dead letter topic": {producerKey, "%DLQ%g1"},
	} {
		t.Run(name, func(t *testing.T) {
			before := written(b)
			resp := send(t, c, signed(t, newClientID(), tc.creds), newMessage(tc.topic, "forbidden"))
			wantCode(t, "send", resp.GetStatus(), v2.Code_FORBIDDEN)
			wantCode(t, "entry", resp.GetEntries()[0].GetStatus(), v2.Code_FORBIDDEN)
			if !strings.Contains(resp.GetStatus().GetMessage(), tc.creds.AccessKey) {
				t.Errorf("message %q does not name the access key", resp.GetStatus().GetMessage())
			}
			if got := written(b); got != before {
				t.Fatalf("commit log grew from %d to %d on a refused send", before, got)
			}
		})
	}
	t.Run("allowed", func(t *testing.T) {
		for _, creds := range []auth.Credentials{producerKey, adminKey} {
			before := written(b)
			m := newMessage("orders", "paid by "+creds.AccessKey)
			mustSend(t, c, signed(t, newClientID(), creds), m)
			if written(b) <= before {
				t.Fatalf("send of %s stored nothing", creds.AccessKey)
			}
			findStored(t, b, "orders", m.SystemProperties.MessageId)
		}
	})
	t.Run("batch with a forbidden topic", func(t *testing.T) {
		before := written(b)
		resp, err := c.SendMessage(signed(t, newClientID(), producerKey), &v2.SendMessageRequest{Messages: []*v2.Message{
			newMessage("orders", "one"), newMessage("audit", "two")}})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "send", resp.GetStatus(), v2.Code_FORBIDDEN)
		if len(resp.GetEntries()) != 2 {
			t.Fatalf("entries: %v", resp.GetEntries())
		}
		if got := written(b); got != before {
			t.Fatalf("commit log grew from %d to %d on a refused send", before, got)
		}
	})
}

// TestACLReplayedHeader: a signed header used by one connection is
// refused on another once auth.ReplayGrace has passed, and still accepted
// on its own connection.
func TestACLReplayedHeader(t *testing.T) {
	b := startACLBroker(t)
	first, second := dial(t, b), dial(t, b)
	a, d := auth.NewHeader(producerKey, time.Now())
	id := newClientID()
	mustSend(t, first, headerCtx(t, id, a, d), newMessage("orders", "original"))

	time.Sleep(auth.ReplayGrace + 500*time.Millisecond)
	before := written(b)
	resp := send(t, second, headerCtx(t, id, a, d), newMessage("orders", "replayed"))
	wantCode(t, "replayed send", resp.GetStatus(), v2.Code_UNAUTHORIZED)
	if !strings.Contains(resp.GetStatus().GetMessage(), "replayed") {
		t.Errorf("message %q does not say replayed", resp.GetStatus().GetMessage())
	}
	if got := written(b); got != before {
		t.Fatalf("commit log grew from %d to %d on a replayed send", before, got)
	}
	mustSend(t, first, headerCtx(t, id, a, d), newMessage("orders", "same connection"))
}

// TestACLOff: with ACL off credentials are not looked at, not even the Go
// client's empty ones or a malformed header.
func TestACLOff(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "orders", "")
	c := dial(t, b)
	date := time.Now().UTC().Format(auth.DateLayout)
	for _, a := range []string{"", "MQv2-HMAC-SHA1 Credential=//Rocketmq, SignedHeaders=x-mq-date-time, Signature=00", "garbage"} {
		mustSend(t, c, headerCtx(t, newClientID(), a, date), newMessage("orders", "open"))
	}
}

// TestACLConsume: receive, ack and change of invisibility need SUB on the
// group and the topic; a refused call pops, acknowledges or changes
// nothing (the message is then received, and its handle used, by the
// consumer).
func TestACLConsume(t *testing.T) {
	b := startACLBroker(t)
	c := dial(t, b)
	mustSend(t, c, signed(t, newClientID(), producerKey), newMessage("orders", "to consume"))

	recv := func(ctx context.Context, group string) received {
		t.Helper()
		req := receiveReq(group, "orders", 8, time.Minute)
		req.LongPollingTimeout = durationpb.New(2 * time.Second)
		r, err := receiveStream(ctx, c, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for name, ctx := range badCredentials(t) {
		r := recv(ctx(), "g1")
		wantCode(t, "receive with "+name, r.status, v2.Code_UNAUTHORIZED)
	}
	for name, tc := range map[string]struct {
		creds auth.Credentials
		group string
	}{
		"publisher":   {producerKey, "g1"},
		"nobody":      {nobodyKey, "g1"},
		"other group": {consumerKey, "g2"},
	} {
		r := recv(signed(t, newClientID(), tc.creds), tc.group)
		wantCode(t, "receive by "+name, r.status, v2.Code_FORBIDDEN)
	}

	r := recv(signed(t, newClientID(), consumerKey), "g1")
	wantCode(t, "receive by the consumer", r.status, v2.Code_OK)
	if len(r.msgs) != 1 || string(r.msgs[0].GetBody()) != "to consume" {
		t.Fatalf("received %v, want the message (a refused receive popped it?)", r.msgs)
	}
	handle := r.msgs[0].GetSystemProperties().GetReceiptHandle()
	ackReq := func(group string) *v2.AckMessageRequest {
		return &v2.AckMessageRequest{Group: &v2.Resource{Name: group}, Topic: &v2.Resource{Name: "orders"},
			Entries: []*v2.AckMessageEntry{{MessageId: r.msgs[0].GetSystemProperties().GetMessageId(), ReceiptHandle: handle}}}
	}

	for name, ctx := range map[string]context.Context{
		"no header": headerCtx(t, newClientID(), "", time.Now().UTC().Format(auth.DateLayout)),
		"publisher": signed(t, newClientID(), producerKey),
	} {
		inv, err := c.ChangeInvisibleDuration(ctx, &v2.ChangeInvisibleDurationRequest{Group: &v2.Resource{Name: "g1"},
			Topic: &v2.Resource{Name: "orders"}, ReceiptHandle: handle, InvisibleDuration: durationpb.New(0),
			MessageId: r.msgs[0].GetSystemProperties().GetMessageId()})
		if err != nil {
			t.Fatal(err)
		}
		if inv.GetStatus().GetCode() != v2.Code_UNAUTHORIZED && inv.GetStatus().GetCode() != v2.Code_FORBIDDEN {
			t.Fatalf("change invisible duration by %s: %v", name, inv.GetStatus())
		}
		ack, err := c.AckMessage(ctx, ackReq("g1"))
		if err != nil {
			t.Fatal(err)
		}
		if ack.GetStatus().GetCode() != v2.Code_UNAUTHORIZED && ack.GetStatus().GetCode() != v2.Code_FORBIDDEN {
			t.Fatalf("ack by %s: %v", name, ack.GetStatus())
		}
		if len(ack.GetEntries()) != 1 || ack.GetEntries()[0].GetStatus().GetCode() != ack.GetStatus().GetCode() {
			t.Fatalf("ack entries by %s: %v", name, ack.GetEntries())
		}
		dlq, err := c.ForwardMessageToDeadLetterQueue(ctx, &v2.ForwardMessageToDeadLetterQueueRequest{Group: &v2.Resource{Name: "g1"},
			Topic: &v2.Resource{Name: "orders"}, ReceiptHandle: handle, MessageId: r.msgs[0].GetSystemProperties().GetMessageId()})
		if err != nil {
			t.Fatal(err)
		}
		if dlq.GetStatus().GetCode() != v2.Code_UNAUTHORIZED && dlq.GetStatus().GetCode() != v2.Code_FORBIDDEN {
			t.Fatalf("dead letter by %s: %v", name, dlq.GetStatus())
		}
	}
	// The handle is the one received: the refused calls changed nothing.
	ack, err := c.AckMessage(signed(t, newClientID(), consumerKey), ackReq("g1"))
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "ack by the consumer", ack.GetStatus(), v2.Code_OK)
}

// TestACLTelemetry: a Telemetry stream without valid credentials is
// answered a command with status UNAUTHORIZED and ends with gRPC
// UNAUTHENTICATED; Settings naming a topic or group the caller may not
// use are answered FORBIDDEN and end it with PERMISSION_DENIED; allowed
// Settings are answered as usual.
func TestACLTelemetry(t *testing.T) {
	b := startACLBroker(t)
	c := dial(t, b)

	refused := func(t *testing.T, ctx context.Context, s *v2.Settings, code v2.Code, grpcCode codes.Code) {
		t.Helper()
		stream, err := c.Telemetry(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: s}})
		reply, err := stream.Recv()
		if err != nil {
			t.Fatalf("no refusal command: %v", err)
		}
		wantCode(t, "telemetry reply", reply.GetStatus(), code)
		if reply.GetSettings() != nil {
			t.Fatalf("refused stream answered Settings: %v", reply)
		}
		_, err = stream.Recv()
		if errors.Is(err, io.EOF) || status.Code(err) != grpcCode {
			t.Fatalf("stream ended with %v, want %v", err, grpcCode)
		}
	}
	for name, ctx := range badCredentials(t) {
		t.Run(name, func(t *testing.T) {
			refused(t, ctx(), producerSettings("orders"), v2.Code_UNAUTHORIZED, codes.Unauthenticated)
		})
	}
	t.Run("producer of another topic", func(t *testing.T) {
		refused(t, signed(t, newClientID(), producerKey), producerSettings("orders", "audit"), v2.Code_FORBIDDEN, codes.PermissionDenied)
	})
	t.Run("consumer of another group", func(t *testing.T) {
		refused(t, signed(t, newClientID(), consumerKey), consumerSettings(v2.ClientType_SIMPLE_CONSUMER, "g2", "orders", "*"),
			v2.Code_FORBIDDEN, codes.PermissionDenied)
	})
	t.Run("consumer of another topic", func(t *testing.T) {
		refused(t, signed(t, newClientID(), consumerKey), consumerSettings(v2.ClientType_PUSH_CONSUMER, "g1", "audit", "*"),
			v2.Code_FORBIDDEN, codes.PermissionDenied)
	})
	t.Run("publisher as consumer", func(t *testing.T) {
		refused(t, signed(t, newClientID(), producerKey), consumerSettings(v2.ClientType_PUSH_CONSUMER, "g1", "orders", "*"),
			v2.Code_FORBIDDEN, codes.PermissionDenied)
	})
	t.Run("allowed", func(t *testing.T) {
		for _, tc := range []struct {
			creds auth.Credentials
			s     *v2.Settings
		}{
			{producerKey, producerSettings("orders")},
			{consumerKey, consumerSettings(v2.ClientType_SIMPLE_CONSUMER, "g1", "orders", "*")},
			{adminKey, consumerSettings(v2.ClientType_PUSH_CONSUMER, "g2", "audit", "*")},
		} {
			stream, err := c.Telemetry(signed(t, newClientID(), tc.creds))
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: tc.s}}); err != nil {
				t.Fatal(err)
			}
			reply, err := stream.Recv()
			if err != nil {
				t.Fatalf("%s: %v", tc.creds.AccessKey, err)
			}
			wantCode(t, tc.creds.AccessKey+" settings", reply.GetStatus(), v2.Code_OK)
			if reply.GetSettings() == nil {
				t.Fatalf("%s: reply is not Settings: %v", tc.creds.AccessKey, reply)
			}
			_ = stream.CloseSend()
		}
	})
}

// TestACLOtherRPCs: the remaining RPCs are refused by the table, and
// allowed with the permission.
func TestACLOtherRPCs(t *testing.T) {
	b := startACLBroker(t)
	c := dial(t, b)
	type call struct {
		name string
		do   func(ctx context.Context) (*v2.Status, error)
	}
	orders, g1 := &v2.Resource{Name: "orders"}, &v2.Resource{Name: "g1"}
	simple := v2.ClientType_SIMPLE_CONSUMER
	calls := []struct {
		call
		allowed, forbidden auth.Credentials
		allowedCode        v2.Code // what the handler answers once allowed
	}{
		{call{"QueryRoute", func(ctx context.Context) (*v2.Status, error) {
			r, err := c.QueryRoute(ctx, &v2.QueryRouteRequest{Topic: orders})
			return r.GetStatus(), err
		}}, consumerKey, nobodyKey, v2.Code_OK},
		{call{"QueryAssignment", func(ctx context.Context) (*v2.Status, error) {
			r, err := c.QueryAssignment(ctx, &v2.QueryAssignmentRequest{Topic: orders, Group: g1})
			return r.GetStatus(), err
		}}, consumerKey, producerKey, v2.Code_OK},
		{call{"Heartbeat", func(ctx context.Context) (*v2.Status, error) {
			r, err := c.Heartbeat(ctx, &v2.HeartbeatRequest{Group: g1, ClientType: simple})
			return r.GetStatus(), err
		}}, consumerKey, producerKey, v2.Code_OK},
		{call{"NotifyClientTermination", func(ctx context.Context) (*v2.Status, error) {
			r, err := c.NotifyClientTermination(ctx, &v2.NotifyClientTerminationRequest{Group: g1})
			return r.GetStatus(), err
		}}, consumerKey, producerKey, v2.Code_OK},
		{call{"EndTransaction", func(ctx context.Context) (*v2.Status, error) {
			r, err := c.EndTransaction(ctx, &v2.EndTransactionRequest{Topic: orders, MessageId: "x", TransactionId: "bad",
				Resolution: v2.TransactionResolution_ROLLBACK})
			return r.GetStatus(), err
		}}, producerKey, consumerKey, v2.Code_INVALID_TRANSACTION_ID},
		{call{"RecallMessage", func(ctx context.Context) (*v2.Status, error) {
			r, err := c.RecallMessage(ctx, &v2.RecallMessageRequest{Topic: orders, RecallHandle: "bad"})
			return r.GetStatus(), err
		}}, producerKey, consumerKey, v2.Code_BAD_REQUEST},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			st, err := tc.do(headerCtx(t, newClientID(), "", time.Now().UTC().Format(auth.DateLayout)))
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, "without credentials", st, v2.Code_UNAUTHORIZED)
			st, err = tc.do(signed(t, newClientID(), tc.forbidden))
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, tc.forbidden.AccessKey, st, v2.Code_FORBIDDEN)
			st, err = tc.do(signed(t, newClientID(), tc.allowed))
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, tc.allowed.AccessKey, st, tc.allowedCode)
		})
	}
	t.Run("liveness probe", func(t *testing.T) {
		// The Go client's recovery probe: no headers at all, no group.
		r, err := c.Heartbeat(context.Background(), &v2.HeartbeatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "probe", r.GetStatus(), v2.Code_OK)
		// With a client id it is a client's heartbeat: credentials needed.
		r, err = c.Heartbeat(headerCtx(t, newClientID(), "", ""), &v2.HeartbeatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "unsigned heartbeat of a client", r.GetStatus(), v2.Code_UNAUTHORIZED)
		r, err = c.Heartbeat(context.Background(), &v2.HeartbeatRequest{Group: &v2.Resource{Name: "g1"}})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "unsigned heartbeat of a group", r.GetStatus(), v2.Code_UNAUTHORIZED)
	})
	t.Run("producer heartbeat", func(t *testing.T) {
		r, err := c.Heartbeat(signed(t, newClientID(), producerKey), &v2.HeartbeatRequest{ClientType: v2.ClientType_PRODUCER})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "producer heartbeat", r.GetStatus(), v2.Code_OK)
	})
	t.Run("unimplemented after the check", func(t *testing.T) {
		r, err := c.UpdateOffset(signed(t, newClientID(), producerKey), &v2.UpdateOffsetRequest{Group: g1,
			MessageQueue: &v2.MessageQueue{Topic: orders}})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "update offset by the producer", r.GetStatus(), v2.Code_FORBIDDEN)
		_, err = c.UpdateOffset(signed(t, newClientID(), consumerKey), &v2.UpdateOffsetRequest{Group: g1,
			MessageQueue: &v2.MessageQueue{Topic: orders}})
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("update offset by the consumer: %v, want Unimplemented", err)
		}
	})
}

// TestACLRouteRelay: a broker relays a client's QueryRoute to its
// NameServer (ACL on, the same users) signed with the broker's own keys,
// after authorizing the client itself: the answer is the NameServer's,
// with a broker group the broker does not know. A broker whose keys the
// NameServer refuses answers from its own topics instead.
func TestACLRouteRelay(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: adminKey.AccessKey, SecretKey: adminKey.SecretKey, Admin: true},
		{AccessKey: consumerKey.AccessKey, SecretKey: consumerKey.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{"orders=SUB"}, GroupPerms: []string{"g1=SUB"}},
		{AccessKey: nobodyKey.AccessKey, SecretKey: nobodyKey.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY"},
	}}); err != nil {
		t.Fatal(err)
	}
	acl := auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}
	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = nameserver.GossipOff
	no.Auth = acl
	ns, err := nameserver.New(no, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })

	// broker-b, known to the NameServer only, serves "orders" too.
	nsConn, err := grpc.NewClient(ns.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsConn.Close() })
	reg, err := pb.NewNameServerClient(nsConn).RegisterBroker(signed(t, "", adminKey), &pb.RegisterBrokerRequest{
		Cluster: "DefaultCluster", BrokerName: "broker-b", BrokerId: 0, BrokerAddr: "127.0.0.1:1", Version: "test",
		Topics:      []*pb.TopicConfig{{Name: "orders", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}},
		DataVersion: &pb.DataVersion{Timestamp: 1, Counter: 1}})
	if err != nil || reg.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("register broker-b: %v %v", reg.GetStatus(), err)
	}

	start := func(creds auth.Credentials) *server.Server {
		return startBroker(t, func(o *broker.Options) {
			o.Auth = acl
			o.NameServers = []string{ns.Addr()}
			o.Credentials = creds
		})
	}
	brokersOf := func(r *v2.QueryRouteResponse) map[string]bool {
		out := map[string]bool{}
		for _, mq := range r.GetMessageQueues() {
			out[mq.GetBroker().GetName()] = true
		}
		return out
	}
	query := func(c v2.MessagingServiceClient, creds auth.Credentials) *v2.QueryRouteResponse {
		r, err := c.QueryRoute(signed(t, newClientID(), creds), &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "orders"}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	b := start(adminKey)
	createTopic(t, b, "orders", "")
	c := dial(t, b)
	r := query(c, consumerKey)
	wantCode(t, "relayed route", r.GetStatus(), v2.Code_OK)
	if got := brokersOf(r); !got["broker-b"] {
		t.Fatalf("route via the broker names %v: not the NameServer's", got)
	}
	wantCode(t, "route for nobody", query(c, nobodyKey).GetStatus(), v2.Code_FORBIDDEN)

	// Without keys the NameServer refuses the relay: the broker answers alone.
	lone := start(auth.Credentials{})
	createTopic(t, lone, "orders", "")
	r = query(dial(t, lone), consumerKey)
	wantCode(t, "local route", r.GetStatus(), v2.Code_OK)
	if got := brokersOf(r); got["broker-b"] || len(got) != 1 {
		t.Fatalf("route of a broker the NameServer refuses names %v, want its own queues only", got)
	}
}

// TestRouteRelayTLS: against a NameServer that serves TLS only, a broker
// that dials with TLS (--tls-dial) relays QueryRoute there: the answer
// names a broker group only the NameServer knows.
func TestRouteRelayTLS(t *testing.T) {
	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = nameserver.GossipOff
	no.TLS = tlsconf.Config{Mode: tlsconf.Enforcing}
	ns, err := nameserver.New(no, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	nsConn, err := grpc.NewClient(ns.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsConn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := pb.NewNameServerClient(nsConn).RegisterBroker(ctx, &pb.RegisterBrokerRequest{
		Cluster: "DefaultCluster", BrokerName: "broker-b", BrokerId: 0, BrokerAddr: "127.0.0.1:1", Version: "test",
		Topics:      []*pb.TopicConfig{{Name: "orders", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}},
		DataVersion: &pb.DataVersion{Timestamp: 1, Counter: 1}})
	if err != nil || reg.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("register broker-b: %v %v", reg.GetStatus(), err)
	}
	b := startBroker(t, func(o *broker.Options) {
		o.NameServers = []string{ns.Addr()}
		o.TLS.Dial = true
	})
	createTopic(t, b, "orders", "")
	r, err := dial(t, b).QueryRoute(asClient(t, newClientID()), &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "orders"}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "relayed route", r.GetStatus(), v2.Code_OK)
	for _, mq := range r.GetMessageQueues() {
		if mq.GetBroker().GetName() == "broker-b" {
			return
		}
	}
	t.Fatalf("route via the broker is not the NameServer's: %v", r.GetMessageQueues())
}

// TestACLClientID: a client id belongs to the access key that first used
// it: another key may not open a Telemetry stream with it, beat for it or
// terminate it (FORBIDDEN), and the owner's stream stays open until the
// owner terminates it.
func TestACLClientID(t *testing.T) {
	b := startACLBroker(t)
	c := dial(t, b)
	id := newClientID()
	stream, err := c.Telemetry(signed(t, id, producerKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: producerSettings("orders")}}); err != nil {
		t.Fatal(err)
	}
	reply, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "owner's settings", reply.GetStatus(), v2.Code_OK)
	ended := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		ended <- err
	}()

	other, err := c.Telemetry(signed(t, id, consumerKey))
	if err != nil {
		t.Fatal(err)
	}
	_ = other.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: consumerSettings(v2.ClientType_SIMPLE_CONSUMER, "g1", "orders", "*")}})
	r, err := other.Recv()
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "telemetry of another's client id", r.GetStatus(), v2.Code_FORBIDDEN)
	if _, err := other.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("stream of another's client id ended with %v", err)
	}
	hb, err := c.Heartbeat(signed(t, id, consumerKey), &v2.HeartbeatRequest{ClientType: v2.ClientType_SIMPLE_CONSUMER, Group: &v2.Resource{Name: "g1"}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "heartbeat for another's client id", hb.GetStatus(), v2.Code_FORBIDDEN)
	term, err := c.NotifyClientTermination(signed(t, id, consumerKey), &v2.NotifyClientTerminationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "termination of another's client", term.GetStatus(), v2.Code_FORBIDDEN)
	select {
	case err := <-ended:
		t.Fatalf("the owner's stream ended after a refused termination: %v", err)
	case <-time.After(300 * time.Millisecond):
	}

	term, err = c.NotifyClientTermination(signed(t, id, producerKey), &v2.NotifyClientTerminationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "the owner's termination", term.GetStatus(), v2.Code_OK)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's stream did not end at its termination")
	}
}

// TestACLCheckBackAfterRevocation: a transaction check-back (it carries the
// message) goes to a producer's open Telemetry stream only while its
// access key may publish to the topic: revoked after the stream opened, no
// check-back comes; restored, it comes.
func TestACLCheckBackAfterRevocation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	writeUsers := func(perm string) {
		t.Helper()
		if err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
			{AccessKey: producerKey.AccessKey, SecretKey: producerKey.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
				TopicPerms: []string{"txorders=" + perm}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	writeUsers("PUB")
	b := startBroker(t, func(o *broker.Options) {
		o.Auth = auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}
		o.Transaction.Timeout = 3 * time.Second
		o.Transaction.CheckInterval = 300 * time.Millisecond
	})
	createTopic(t, b, "txorders", "TRANSACTION")
	c := dial(t, b)
	id := newClientID()
	stream, err := c.Telemetry(signed(t, id, producerKey))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: producerSettings("txorders")}}); err != nil {
		t.Fatal(err)
	}
	if reply, err := stream.Recv(); err != nil || reply.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("settings: %v %v", reply, err)
	}
	checks := make(chan *v2.RecoverOrphanedTransactionCommand, 16)
	go func() {
		for {
			cmd, err := stream.Recv()
			if err != nil {
				close(checks)
				return
			}
			if rc := cmd.GetRecoverOrphanedTransactionCommand(); rc != nil {
				checks <- rc
			}
		}
	}()
	m := halfMessage("txorders", "orphan")
	mustSend(t, c, signed(t, id, producerKey), m)

	// Revoke PUB; the guard sees the file at its next look (at most a
	// second apart): a send is then refused.
	writeUsers("SUB")
	waitFor(t, "the revocation applied", func() bool {
		return send(t, c, signed(t, id, producerKey), newMessage("txorders", "probe")).GetStatus().GetCode() == v2.Code_FORBIDDEN
	})
	select {
	case rc, ok := <-checks:
		t.Fatalf("check-back sent after the revocation: %v (stream open: %v)", rc, ok)
	case <-time.After(4 * time.Second): // past the transaction timeout, many check intervals
	}

	writeUsers("PUB")
	select {
	case rc, ok := <-checks:
		if !ok {
			t.Fatal("stream ended")
		}
		if got := rc.GetMessage().GetSystemProperties().GetMessageId(); got != m.SystemProperties.MessageId {
			t.Fatalf("check-back of %s, want %s", got, m.SystemProperties.MessageId)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no check-back once the permission was restored")
	}
}
