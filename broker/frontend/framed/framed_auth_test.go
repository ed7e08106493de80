package framed_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	admin   = auth.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	pubOnly = auth.Credentials{AccessKey: "pub-user", SecretKey: "pub-secret"}
	subOnly = auth.Credentials{AccessKey: "sub-user", SecretKey: "sub-secret"}
	// DENY on t1 over a PUB|SUB default.
	denied = auth.Credentials{AccessKey: "deny-user", SecretKey: "deny-secret"}
	// No rule: the defaults (SUB).
	defaults = auth.Credentials{AccessKey: "default-user", SecretKey: "default-secret"}
	// orders-* PUB|SUB, nothing else.
	prefix = auth.Credentials{AccessKey: "prefix-user", SecretKey: "prefix-secret"}
	// t1 PUB|SUB but the group g1 denied.
	noGroup = auth.Credentials{AccessKey: "nogroup-user", SecretKey: "nogroup-secret"}
)

// aclBroker starts a broker with ACL on on 127.0.0.1:0 and returns its
// address and an admin-signed gRPC Broker client.
func aclBroker(t *testing.T) (string, pb.BrokerClient) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: admin.AccessKey, SecretKey: admin.SecretKey, Admin: true},
		{AccessKey: pubOnly.AccessKey, SecretKey: pubOnly.SecretKey, TopicPerms: []string{"t1=PUB"}, GroupPerms: []string{"g1=SUB"}},
		{AccessKey: subOnly.AccessKey, SecretKey: subOnly.SecretKey, TopicPerms: []string{"t1=SUB"}, GroupPerms: []string{"g1=SUB"}},
		{AccessKey: denied.AccessKey, SecretKey: denied.SecretKey, DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB", TopicPerms: []string{"t1=DENY"}},
		{AccessKey: defaults.AccessKey, SecretKey: defaults.SecretKey, DefaultTopicPerm: "SUB", DefaultGroupPerm: "SUB"},
		{AccessKey: prefix.AccessKey, SecretKey: prefix.SecretKey, TopicPerms: []string{"orders-*=PUB|SUB"}, GroupPerms: []string{"g1=SUB"}},
		{AccessKey: noGroup.AccessKey, SecretKey: noGroup.SecretKey, TopicPerms: []string{"t1=PUB|SUB"}, GroupPerms: []string{"g1=DENY"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	opts := broker.DefaultOptions(filepath.Join(dir, "store"))
	opts.ListenAddr = "127.0.0.1:0"
	opts.NameServers = nil
	opts.GossipAddr = "off"
	opts.Store.CommitLog.SegmentSize = 4 << 20
	opts.Store.ConsumeQueue.UnitsPerFile = 1000
	opts.Store.Index.SlotCount = 1000
	opts.Store.Index.MaxEntries = 4000
	opts.MaxMessageSize = 1 << 20
	opts.Auth = auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}
	b, err := server.New(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := pb.NewBrokerClient(conn)
	for _, name := range []string{"t1", "t2", "orders-1"} {
		r, err := c.CreateTopic(adminCtx(), &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}})
		if err != nil || r.Status.GetCode() != pb.Code_OK {
			t.Fatalf("create %s: %v %v", name, err, r.GetStatus())
		}
	}
	return b.Addr(), c
}

func adminCtx() context.Context {
	a, d := auth.NewHeader(admin, time.Now())
	return metadata.AppendToOutgoingContext(context.Background(), auth.HeaderAuthorization, a, auth.HeaderDate, d)
}

// probe stores one message in queue 0 of topic over gRPC as admin and
// returns its queue offset: two probes one apart bracket requests that
// stored nothing.
func probe(t *testing.T, c pb.BrokerClient, topic string) int64 {
	t.Helper()
	r, err := c.Send(adminCtx(), sendReq(topic))
	if err != nil || r.Status.GetCode() != pb.Code_OK {
		t.Fatalf("probe send to %s: %v %v", topic, err, r.GetStatus())
	}
	return r.Results[0].QueueOffset
}

func sendReq(topic string) *pb.SendRequest {
	return &pb.SendRequest{RequestId: 7, ProducerGroup: "p1", Messages: []*pb.Message{{Topic: topic, Body: []byte("x")}}}
}

func pullReq(topic string) *pb.PullRequest {
	return &pb.PullRequest{Group: "g1", Topic: topic, MaxMessages: 8, CommitOffset: -1}
}

// raw is a frame connection driven by hand: what a client sends, exactly.
type raw struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
	id uint32
}

func dialRaw(t *testing.T, addr string) *raw {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, frame.Magic); err != nil {
		t.Fatal(err)
	}
	r := &raw{t: t, nc: nc, br: bufio.NewReader(nc)}
	magic := make([]byte, len(frame.Magic))
	if _, err := io.ReadFull(r.br, magic); err != nil || string(magic) != frame.Magic {
		t.Fatalf("magic: %q %v", magic, err)
	}
	return r
}

// call sends req as method m and decodes the response into resp.
func (r *raw) call(m frame.Method, req, resp proto.Message) {
	r.t.Helper()
	r.id++
	b, err := frame.AppendMessage(nil, frame.Header{Kind: frame.KindRequest, Method: m, ID: r.id}, req, frame.DefaultMaxFrame)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
	head := make([]byte, frame.HeaderSize)
	if _, err := io.ReadFull(r.br, head); err != nil {
		r.t.Fatalf("%s response: %v", m, err)
	}
	h, err := frame.ParseHeader(head, frame.DefaultMaxFrame)
	if err != nil {
		r.t.Fatal(err)
	}
	payload := make([]byte, h.Size)
	if _, err := io.ReadFull(r.br, payload); err != nil {
		r.t.Fatal(err)
	}
	if h.Kind != frame.KindResponse || h.ID != r.id || h.Method != m {
		r.t.Fatalf("%s: got a %s frame for %s id %d: %q", m, h.Kind, h.Method, h.ID, payload)
	}
	if err := proto.Unmarshal(payload, resp); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) auth(a, d string) *pb.Status {
	var resp pb.FrameAuthResponse
	r.call(frame.MethodAuth, &pb.FrameAuthRequest{Authorization: a, DateTime: d}, &resp)
	return resp.Status
}

func (r *raw) send(topic string) *pb.Status {
	var resp pb.SendResponse
	r.call(frame.MethodSend, sendReq(topic), &resp)
	if resp.RequestId != 7 {
		r.t.Fatalf("send answered request id %d", resp.RequestId)
	}
	return resp.Status
}

// sendPacked sends one message to topic, packed (SendRequest.packed).
func (r *raw) sendPacked(topic string) *pb.Status {
	entry, err := message.AppendPacked(nil, &message.Ext{Message: message.Message{Body: []byte("x")}})
	if err != nil {
		r.t.Fatal(err)
	}
	var resp pb.SendResponse
	r.call(frame.MethodSend, &pb.SendRequest{RequestId: 7, ProducerGroup: "p1", Packed: entry, PackedTopic: topic}, &resp)
	return resp.Status
}

func (r *raw) pull(topic string) *pb.PullResponse {
	var resp pb.PullResponse
	r.call(frame.MethodPull, pullReq(topic), &resp)
	return &resp
}

func is(t *testing.T, what string, st *pb.Status, want pb.Code) {
	t.Helper()
	if st.GetCode() != want {
		t.Fatalf("%s: %v %q, want %v", what, st.GetCode(), st.GetMessage(), want)
	}
}

// TestFrameAuthRefusals: with ACL on, Send and Pull on a connection
// without Auth, or whose Auth was refused (wrong secret, a signature over
// another date, an expired date, a header replayed from another
// connection, or a good Auth replaced by a bad one), are answered
// UNAUTHENTICATED in their Status and nothing is stored or handed out.
func TestFrameAuthRefusals(t *testing.T) {
	addr, c := aclBroker(t)
	before := probe(t, c, "t1")

	goodA, goodD := auth.NewHeader(pubOnly, time.Now())
	otherA, _ := auth.NewHeader(pubOnly, time.Now().Add(-time.Minute))
	oldA, oldD := auth.NewHeader(pubOnly, time.Now().Add(-time.Hour))
	wrongA, wrongD := auth.NewHeader(auth.Credentials{AccessKey: pubOnly.AccessKey, SecretKey: "not-the-secret"}, time.Now())

	none := dialRaw(t, addr)
	is(t, "send without Auth", none.send("t1"), pb.Code_UNAUTHENTICATED)
	p := none.pull("t1")
	is(t, "pull without Auth", p.Status, pb.Code_UNAUTHENTICATED)
	if len(p.Records) != 0 {
		t.Fatal("an unauthenticated pull got messages")
	}
	for _, tc := range []struct{ name, a, d string }{
		{"wrong secret", wrongA, wrongD},
		{"signature over another date", otherA, goodD},
		{"expired date", oldA, oldD},
		{"no date", goodA, ""},
		{"garbage", "MQv2-HMAC-SHA1 nonsense", goodD},
	} {
		r := dialRaw(t, addr)
		is(t, tc.name+": Auth", r.auth(tc.a, tc.d), pb.Code_UNAUTHENTICATED)
		is(t, tc.name+": send after it", r.send("t1"), pb.Code_UNAUTHENTICATED)
	}

	// A good Auth serves; a bad one after it leaves the connection
	// anonymous.
	good := dialRaw(t, addr)
	is(t, "good Auth", good.auth(goodA, goodD), pb.Code_OK)
	is(t, "send after a good Auth", good.send("t1"), pb.Code_OK)
	is(t, "bad Auth after a good one", good.auth(wrongA, wrongD), pb.Code_UNAUTHENTICATED)
	is(t, "send after the bad Auth", good.send("t1"), pb.Code_UNAUTHENTICATED)
	before++ // the one send served

	// The same header on another connection, after the replay grace.
	time.Sleep(auth.ReplayGrace + 500*time.Millisecond)
	replay := dialRaw(t, addr)
	st := replay.auth(goodA, goodD)
	is(t, "replayed Auth", st, pb.Code_UNAUTHENTICATED)
	is(t, "send after a replayed Auth", replay.send("t1"), pb.Code_UNAUTHENTICATED)

	if got := probe(t, c, "t1"); got != before+1 {
		t.Fatalf("probe at offset %d, want %d: a refused send was stored", got, before+1)
	}
}

// TestFramePermissions: after a good Auth, Send needs PUB on its topic and
// Pull SUB on its topic and group; refusals are NO_PERMISSION and store
// nothing. Through the frame client too: its Auth option authenticates,
// and refused credentials fail the call with an AuthError.
func TestFramePermissions(t *testing.T) {
	addr, c := aclBroker(t)
	t1, t2 := probe(t, c, "t1"), probe(t, c, "t2")

	pub := dialRaw(t, addr)
	is(t, "pub Auth", pub.auth(auth.NewHeader(pubOnly, time.Now())), pb.Code_OK)
	is(t, "pub sends t1", pub.send("t1"), pb.Code_OK)
	is(t, "pub sends t2", pub.send("t2"), pb.Code_NO_PERMISSION)
	is(t, "pub sends t1 packed", pub.sendPacked("t1"), pb.Code_OK)
	is(t, "pub sends t2 packed", pub.sendPacked("t2"), pb.Code_NO_PERMISSION)
	is(t, "pub pulls t1", pub.pull("t1").Status, pb.Code_NO_PERMISSION)

	sub := dialRaw(t, addr)
	is(t, "sub Auth", sub.auth(auth.NewHeader(subOnly, time.Now())), pb.Code_OK)
	is(t, "sub sends t1", sub.send("t1"), pb.Code_NO_PERMISSION)
	is(t, "sub sends t1 packed", sub.sendPacked("t1"), pb.Code_NO_PERMISSION)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// The consume queue follows the CommitLog asynchronously.
		p := sub.pull("t1")
		if p.Status.GetCode() == pb.Code_NO_PERMISSION || p.Status.GetCode() == pb.Code_UNAUTHENTICATED {
			t.Fatalf("sub pulls t1: %v %s", p.Status.GetCode(), p.Status.GetMessage())
		}
		if len(p.Records) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sub pulled nothing from t1")
		}
	}
	is(t, "sub pulls t2", sub.pull("t2").Status, pb.Code_NO_PERMISSION)

	if got := probe(t, c, "t1"); got != t1+3 {
		t.Fatalf("t1 probe at %d, want %d", got, t1+3)
	}
	if got := probe(t, c, "t2"); got != t2+1 {
		t.Fatalf("t2 probe at %d, want %d: a refused send was stored", got, t2+1)
	}

	// The frame client signs its Auth on each new connection.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := frame.NewClient(addr, frame.Options{Auth: func() *pb.FrameAuthRequest {
		a, d := auth.NewHeader(pubOnly, time.Now())
		return &pb.FrameAuthRequest{Authorization: a, DateTime: d}
	}})
	defer cl.Close()
	var resp pb.SendResponse
	if err := cl.Call(ctx, frame.MethodSend, sendReq("t1"), &resp); err != nil || resp.Status.GetCode() != pb.Code_OK {
		t.Fatalf("frame client send: %v %v", err, resp.Status)
	}
	bad := frame.NewClient(addr, frame.Options{Auth: func() *pb.FrameAuthRequest {
		a, d := auth.NewHeader(auth.Credentials{AccessKey: pubOnly.AccessKey, SecretKey: "not-the-secret"}, time.Now())
		return &pb.FrameAuthRequest{Authorization: a, DateTime: d}
	}})
	defer bad.Close()
	err := bad.Call(ctx, frame.MethodSend, sendReq("t1"), &resp)
	var ae *frame.AuthError
	if !errors.As(err, &ae) || errcode.Of(err) != errcode.Unauthenticated {
		t.Fatalf("frame client with a wrong secret: %v, want an AuthError with UNAUTHENTICATED", err)
	}
	if got := probe(t, c, "t1"); got != t1+5 {
		t.Fatalf("t1 probe at %d, want %d", got, t1+5)
	}
}

// TestFrameRules: the permission rules over frames — DENY over a default,
// defaults, a prefix rule, a denied group, an admin — for Send and Pull;
// every refused send stores nothing.
func TestFrameRules(t *testing.T) {
	addr, c := aclBroker(t)
	const ok, no = pb.Code_OK, pb.Code_NO_PERMISSION
	type row struct {
		user                       auth.Credentials
		sendT1, sendOrders, pullT1 pb.Code
		pullOrders                 pb.Code
	}
	stored := map[string]int64{}
	for _, r := range []row{
		{admin, ok, ok, ok, ok},
		{denied, no, ok, no, ok},
		{defaults, no, no, ok, ok},
		{prefix, no, ok, no, ok},
		{noGroup, ok, no, no, no},
	} {
		conn := dialRaw(t, addr)
		is(t, r.user.AccessKey+" Auth", conn.auth(auth.NewHeader(r.user, time.Now())), pb.Code_OK)
		for _, tc := range []struct {
			topic string
			want  pb.Code
		}{{"t1", r.sendT1}, {"orders-1", r.sendOrders}} {
			is(t, r.user.AccessKey+" sends "+tc.topic, conn.send(tc.topic), tc.want)
			if tc.want == ok {
				stored[tc.topic]++
			}
		}
		for _, tc := range []struct {
			topic string
			want  pb.Code
		}{{"t1", r.pullT1}, {"orders-1", r.pullOrders}} {
			got := conn.pull(tc.topic).Status.GetCode()
			if tc.want == no && got != no || tc.want == ok && (got == no || got == pb.Code_UNAUTHENTICATED) {
				t.Fatalf("%s pulls %s: %v, want %v", r.user.AccessKey, tc.topic, got, tc.want)
			}
		}
	}
	for topic, n := range stored {
		if got := probe(t, c, topic); got != n {
			t.Fatalf("%s holds %d messages before the probe, want %d", topic, got, n)
		}
	}
}
