package grpcapi_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// The users of the access-control tests: one per kind of rule.
var (
	admin    = auth.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	pubOnly  = auth.Credentials{AccessKey: "pub-user", SecretKey: "pub-secret"}
	subOnly  = auth.Credentials{AccessKey: "sub-user", SecretKey: "sub-secret"}
	pubSub   = auth.Credentials{AccessKey: "pubsub-user", SecretKey: "pubsub-secret"}
	denied   = auth.Credentials{AccessKey: "deny-user", SecretKey: "deny-secret"}
	defaults = auth.Credentials{AccessKey: "default-user", SecretKey: "default-secret"}
	prefix   = auth.Credentials{AccessKey: "prefix-user", SecretKey: "prefix-secret"}
)

func aclFile() *auth.File {
	return &auth.File{Accounts: []auth.Account{
		{AccessKey: admin.AccessKey, SecretKey: admin.SecretKey, Admin: true},
		{AccessKey: pubOnly.AccessKey, SecretKey: pubOnly.SecretKey, TopicPerms: []string{"t1=PUB"}, GroupPerms: []string{"g1=SUB"}},
		{AccessKey: subOnly.AccessKey, SecretKey: subOnly.SecretKey, TopicPerms: []string{"t1=SUB"}, GroupPerms: []string{"g1=SUB"}},
		{AccessKey: pubSub.AccessKey, SecretKey: pubSub.SecretKey, TopicPerms: []string{"t1=PUB|SUB"}, GroupPerms: []string{"g1=SUB"}},
		// DENY on t1 beats a default of PUB|SUB; the group is allowed.
		{AccessKey: denied.AccessKey, SecretKey: denied.SecretKey, DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB", TopicPerms: []string{"t1=DENY"}},
		// No rule: the defaults decide (SUB on topics and groups).
		{AccessKey: defaults.AccessKey, SecretKey: defaults.SecretKey, DefaultTopicPerm: "SUB", DefaultGroupPerm: "SUB"},
		// A prefix rule: orders-* may be published to, nothing else.
		{AccessKey: prefix.AccessKey, SecretKey: prefix.SecretKey, TopicPerms: []string{"orders-*=PUB"}, GroupPerms: []string{"g1=SUB"}},
	}}
}

// aclBroker starts a broker on listen with ACL as given (the file above)
// and returns it.
func aclBroker(t *testing.T, listen string, enabled bool) *server.Server {
	t.Helper()
	return aclBrokerWith(t, listen, enabled, nil)
}

// aclBrokerWith is aclBroker with options changed by mod.
func aclBrokerWith(t *testing.T, listen string, enabled bool, mod func(*broker.Options)) *server.Server {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	if err := auth.WriteFile(file, aclFile()); err != nil {
		t.Fatal(err)
	}
	opts := broker.DefaultOptions(filepath.Join(dir, "store"))
	opts.ListenAddr = listen
	opts.NameServers = nil
	opts.GossipAddr = "off"
	opts.Store.CommitLog.SegmentSize = 4 << 20
	opts.Store.ConsumeQueue.UnitsPerFile = 1000
	opts.Store.Index.SlotCount = 1000
	opts.Store.Index.MaxEntries = 4000
	opts.MaxMessageSize = 1 << 20
	opts.Auth = auth.Config{Enabled: enabled, File: file, MaxSkew: auth.DefaultMaxSkew}
	if mod != nil {
		mod(&opts)
	}
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
	return b
}

// dial opens a new connection (its own client port) to addr.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// signed is ctx carrying c's header signed now (no credentials when c is
// empty).
func signed(c auth.Credentials) context.Context {
	if c.Empty() {
		return context.Background()
	}
	a, d := auth.NewHeader(c, time.Now())
	return metadata.AppendToOutgoingContext(context.Background(), auth.HeaderAuthorization, a, auth.HeaderDate, d)
}

func withHeader(a, d string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), auth.HeaderAuthorization, a, auth.HeaderDate, d)
}

// refused checks err is the interceptor's refusal with code want: the
// gRPC code, and the coded error it carries.
func refused(t *testing.T, what string, err error, want errcode.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: served, want refused with %v", what, want)
	}
	wantGRPC := codes.PermissionDenied
	if want == errcode.Unauthenticated {
		wantGRPC = codes.Unauthenticated
	}
	if got := status.Code(err); got != wantGRPC {
		t.Fatalf("%s: gRPC code %v (%v), want %v", what, got, err, wantGRPC)
	}
	if got := errcode.Of(wire.FromGRPCError(err)); got != want {
		t.Fatalf("%s: coded error %v (%v), want %v", what, got, err, want)
	}
}

// allowed checks the access control let the call through: no gRPC error
// and no refusal in its Status.
func allowed(t *testing.T, what string, st *pb.Status, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if c := st.GetCode(); c == pb.Code_NO_PERMISSION || c == pb.Code_UNAUTHENTICATED {
		t.Fatalf("%s: %v %s", what, c, st.GetMessage())
	}
}

func sendReq(topic string) *pb.SendRequest {
	return &pb.SendRequest{ProducerGroup: "p1", Messages: []*pb.Message{{Topic: topic, QueueId: 0, Body: []byte("x")}}}
}

// probe sends one message to queue 0 of topic as admin and returns its
// queue offset: two probes one apart bracket requests that stored
// nothing (the offset is assigned when the send is stored, unlike the
// consume queue's max offset, which follows asynchronously).
func probe(t *testing.T, c pb.BrokerClient, topic string) int64 {
	t.Helper()
	r, err := c.Send(signed(admin), sendReq(topic))
	code(t, "probe send to "+topic, r.GetStatus(), err, pb.Code_OK)
	return r.Results[0].QueueOffset
}

func createTopics(t *testing.T, c pb.BrokerClient, topics ...string) {
	t.Helper()
	for _, name := range topics {
		r, err := c.CreateTopic(signed(admin), &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}})
		code(t, "create "+name, r.GetStatus(), err, pb.Code_OK)
	}
}

// TestAuthRefusals: with ACL on, a send without credentials, with a wrong
// secret, with a signature over another date, with an expired date, with
// a header replayed from another connection, or by a user without PUB is
// refused with its code, and nothing is stored.
func TestAuthRefusals(t *testing.T) {
	b := aclBroker(t, "127.0.0.1:0", true)
	c := pb.NewBrokerClient(dial(t, b.Addr()))
	createTopics(t, c, "t1", "t2")
	before := probe(t, c, "t1")

	goodA, goodD := auth.NewHeader(pubOnly, time.Now())
	otherA, _ := auth.NewHeader(pubOnly, time.Now().Add(-time.Minute))
	oldA, oldD := auth.NewHeader(pubOnly, time.Now().Add(-time.Hour))
	wrong := auth.Credentials{AccessKey: pubOnly.AccessKey, SecretKey: "not-the-secret"}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  *pb.SendRequest
		want errcode.Code
	}{
		{"no credentials", context.Background(), sendReq("t1"), errcode.Unauthenticated},
		{"unknown access key", signed(auth.Credentials{AccessKey: "nobody-key", SecretKey: "nobody-secret"}), sendReq("t1"), errcode.Unauthenticated},
		{"wrong secret", signed(wrong), sendReq("t1"), errcode.Unauthenticated},
		{"signature over another date", withHeader(otherA, goodD), sendReq("t1"), errcode.Unauthenticated},
		{"expired date", withHeader(oldA, oldD), sendReq("t1"), errcode.Unauthenticated},
		{"no permission", signed(subOnly), sendReq("t1"), errcode.NoPermission},
		{"permission on another topic", signed(pubOnly), sendReq("t2"), errcode.NoPermission},
	} {
		_, err := c.Send(tc.ctx, tc.req)
		refused(t, tc.name, err, tc.want)
	}
	if got := probe(t, c, "t1"); got != before+1 {
		t.Fatalf("probe at offset %d after refused sends, want %d: something was stored", got, before+1)
	}

	// The header, used by this connection, is fine here; another
	// connection presenting it after the replay grace is refused.
	r, err := c.Send(withHeader(goodA, goodD), sendReq("t1"))
	code(t, "send with a good header", r.GetStatus(), err, pb.Code_OK)
	time.Sleep(auth.ReplayGrace + 500*time.Millisecond)
	r, err = c.Send(withHeader(goodA, goodD), sendReq("t1"))
	code(t, "the same header on its own connection", r.GetStatus(), err, pb.Code_OK)
	before = r.Results[0].QueueOffset
	other := pb.NewBrokerClient(dial(t, b.Addr()))
	_, err = other.Send(withHeader(goodA, goodD), sendReq("t1"))
	refused(t, "replayed from another connection", err, errcode.Unauthenticated)
	if !strings.Contains(err.Error(), "replayed") {
		t.Fatalf("replay refusal does not say so: %v", err)
	}
	if got := probe(t, c, "t1"); got != before+1 {
		t.Fatalf("probe at offset %d after a replayed send, want %d: it was stored", got, before+1)
	}
}

// op is one request of the permission matrix, made as user u.
type op func(t *testing.T, c pb.BrokerClient, ha pb.BrokerHAClient, u auth.Credentials) (*pb.Status, error)

// TestPermissionMatrix: send, pull, commit offsets, create topic, reset
// offsets and promote, by every kind of user, are allowed or refused as
// their rules say, end to end over gRPC.
func TestPermissionMatrix(t *testing.T) {
	b := aclBroker(t, "127.0.0.1:0", true)
	conn := dial(t, b.Addr())
	c, ha := pb.NewBrokerClient(conn), pb.NewBrokerHAClient(conn)
	createTopics(t, c, "t1", "t2", "orders-1")

	send := func(topic string) op {
		return func(t *testing.T, c pb.BrokerClient, _ pb.BrokerHAClient, u auth.Credentials) (*pb.Status, error) {
			r, err := c.Send(signed(u), sendReq(topic))
			return r.GetStatus(), err
		}
	}
	pull := func(topic string) op {
		return func(t *testing.T, c pb.BrokerClient, _ pb.BrokerHAClient, u auth.Credentials) (*pb.Status, error) {
			r, err := c.Pull(signed(u), &pb.PullRequest{Group: "g1", Topic: topic, MaxMessages: 1, CommitOffset: -1})
			return r.GetStatus(), err
		}
	}
	receive := func(t *testing.T, c pb.BrokerClient, _ pb.BrokerHAClient, u auth.Credentials) (*pb.Status, error) {
		r, err := c.Receive(signed(u), &pb.ReceiveRequest{Group: "g1", Topic: "t1", QueueId: -1, MaxMessages: 1, InvisibleMs: 1000})
		return r.GetStatus(), err
	}
	commit := func(t *testing.T, c pb.BrokerClient, _ pb.BrokerHAClient, u auth.Credentials) (*pb.Status, error) {
		r, err := c.CommitOffsets(signed(u), &pb.CommitOffsetsRequest{Group: "g1", Offsets: []*pb.QueueOffset{{Topic: "t1", Offset: 0}}})
		return r.GetStatus(), err
	}
	create := func(t *testing.T, c pb.BrokerClient, _ pb.BrokerHAClient, u auth.Credentials) (*pb.Status, error) {
		r, err := c.CreateTopic(signed(u), &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: "made-by-" + u.AccessKey, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}})
		return r.GetStatus(), err
	}
	reset := func(t *testing.T, c pb.BrokerClient, _ pb.BrokerHAClient, u auth.Credentials) (*pb.Status, error) {
		r, err := c.ResetOffset(signed(u), &pb.ResetOffsetRequest{Group: "g1", Topic: "t1", ToEarliest: true, DryRun: true})
		return r.GetStatus(), err
	}
	promote := func(t *testing.T, _ pb.BrokerClient, ha pb.BrokerHAClient, u auth.Credentials) (*pb.Status, error) {
		r, err := ha.Promote(signed(u), &pb.PromoteRequest{})
		return r.GetStatus(), err
	}
	ops := []struct {
		name string
		op   op
	}{
		{"send t1", send("t1")}, {"send t2", send("t2")}, {"send orders-1", send("orders-1")},
		{"pull t1", pull("t1")}, {"pull t2", pull("t2")}, {"receive t1", receive}, {"commit t1", commit},
		{"create topic", create}, {"reset offset", reset}, {"promote", promote},
	}
	const (
		ok = iota
		no
	)
	// One row per user, one column per op above.
	matrix := []struct {
		user auth.Credentials
		want []int
	}{
		{admin, []int{ok, ok, ok, ok, ok, ok, ok, ok, ok, ok}},
		{pubOnly, []int{ok, no, no, no, no, no, no, no, no, no}},
		{subOnly, []int{no, no, no, ok, no, ok, ok, no, no, no}},
		{pubSub, []int{ok, no, no, ok, no, ok, ok, no, no, no}},
		{denied, []int{no, ok, ok, no, ok, no, no, no, no, no}},
		{defaults, []int{no, no, no, ok, ok, ok, ok, no, no, no}},
		{prefix, []int{no, no, ok, no, no, no, no, no, no, no}},
	}
	for _, row := range matrix {
		for i, o := range ops {
			what := row.user.AccessKey + ": " + o.name
			st, err := o.op(t, c, ha, row.user)
			if row.want[i] == ok {
				allowed(t, what, st, err)
				continue
			}
			refused(t, what, err, errcode.NoPermission)
		}
	}
	// Every refused send stored nothing: each topic holds the allowed
	// sends only (admin, pub-user, pubsub-user to t1; admin, deny-user to
	// t2; admin, deny-user, prefix-user to orders-1).
	for tp, n := range map[string]int64{"t1": 3, "t2": 2, "orders-1": 3} {
		if got := probe(t, c, tp); got != n {
			t.Fatalf("%s holds %d messages, want %d", tp, got, n)
		}
	}
	// The refused creations made no topic.
	r, err := c.GetTopicConfigs(signed(admin), &pb.GetTopicConfigsRequest{})
	code(t, "topic configs", r.GetStatus(), err, pb.Code_OK)
	for _, tc := range r.Topics {
		if strings.HasPrefix(tc.Name, "made-by-") && tc.Name != "made-by-"+admin.AccessKey {
			t.Fatalf("refused CreateTopic made %s", tc.Name)
		}
	}
}

// TestStreamsAuthorizePerMessage: a SendStream answers each request by
// its own topic's permission (a refused one stores nothing, the stream
// goes on); a Connect heartbeat subscribing to a topic the user may not
// read ends the stream with NO_PERMISSION; an unauthenticated stream is
// refused when it opens.
func TestStreamsAuthorizePerMessage(t *testing.T) {
	b := aclBroker(t, "127.0.0.1:0", true)
	c := pb.NewBrokerClient(dial(t, b.Addr()))
	createTopics(t, c, "t1", "t2")

	ctx, cancel := context.WithCancel(signed(pubOnly))
	defer cancel()
	st, err := c.SendStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, tp := range []string{"t1", "t2", "t1"} {
		req := sendReq(tp)
		req.RequestId = uint64(i + 1)
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		want := pb.Code_OK
		if tp == "t2" {
			want = pb.Code_NO_PERMISSION
		}
		if resp.RequestId != req.RequestId || resp.Status.GetCode() != want {
			t.Fatalf("stream send %d to %s: id %d %v %q, want %v", req.RequestId, tp, resp.RequestId, resp.Status.GetCode(), resp.Status.GetMessage(), want)
		}
	}
	_ = st.CloseSend()
	if got := probe(t, c, "t1"); got != 2 {
		t.Fatalf("t1 holds %d messages, want 2", got)
	}
	if got := probe(t, c, "t2"); got != 0 {
		t.Fatalf("t2 holds %d messages, want 0: a refused stream send was stored", got)
	}

	// An unauthenticated stream is refused at once.
	us, err := c.SendStream(context.Background())
	if err == nil {
		_ = us.Send(sendReq("t1"))
		_, err = us.Recv()
	}
	refused(t, "unauthenticated SendStream", err, errcode.Unauthenticated)

	heartbeat := func(topic string) *pb.ClientMessage {
		return &pb.ClientMessage{Kind: &pb.ClientMessage_Heartbeat{Heartbeat: &pb.Heartbeat{ClientId: "cid-" + topic,
			Consumers: []*pb.ConsumerData{{Group: "g1", Subscriptions: []*pb.Subscription{{Topic: topic, Expression: "*"}}}}}}}
	}
	// sub-user may subscribe to t1 as g1: registered.
	okCtx, okCancel := context.WithCancel(signed(subOnly))
	defer okCancel()
	cs, err := c.Connect(okCtx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Send(heartbeat("t1")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := c.GetConsumerList(signed(admin), &pb.GetConsumerListRequest{Group: "g1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.ClientIds) == 1 && r.ClientIds[0] == "cid-t1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the allowed heartbeat registered %v", r.ClientIds)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// ... but not to t2.
	bad, err := c.Connect(signed(subOnly))
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Send(heartbeat("t2")); err != nil {
		t.Fatal(err)
	}
	_, err = bad.Recv()
	refused(t, "heartbeat subscribing to t2", err, errcode.NoPermission)
	r, err := c.GetConsumerList(signed(admin), &pb.GetConsumerListRequest{Group: "g1"})
	code(t, "consumer list", r.GetStatus(), err, pb.Code_OK)
	for _, id := range r.ClientIds {
		if id == "cid-t2" {
			t.Fatal("the refused heartbeat registered its client")
		}
	}
	okCancel()
}

// TestAclServiceAppliesAtOnce: an admin's PutUser grants a permission the
// next call uses; ListUsers returns no secret; DeleteUser makes the key
// unknown; a non-admin may not call the service.
func TestAclServiceAppliesAtOnce(t *testing.T) {
	b := aclBroker(t, "127.0.0.1:0", true)
	conn := dial(t, b.Addr())
	c, acl := pb.NewBrokerClient(conn), pb.NewAclClient(conn)
	createTopics(t, c, "t1", "t2")

	_, err := c.Send(signed(pubOnly), sendReq("t2"))
	refused(t, "send t2 before the change", err, errcode.NoPermission)
	_, err = acl.PutUser(signed(pubOnly), &pb.PutAclUserRequest{User: &pb.AclUser{AccessKey: pubOnly.AccessKey, Admin: true}})
	refused(t, "a non-admin's PutUser", err, errcode.NoPermission)

	// Without a secret key, PutUser keeps the user's secret.
	pr, err := acl.PutUser(signed(admin), &pb.PutAclUserRequest{User: &pb.AclUser{AccessKey: pubOnly.AccessKey, TopicPerms: []string{"t1=PUB", "t2=PUB"}}})
	code(t, "put user", pr.GetStatus(), err, pb.Code_OK)
	r, err := c.Send(signed(pubOnly), sendReq("t2"))
	code(t, "send t2 after the change", r.GetStatus(), err, pb.Code_OK)

	lr, err := acl.ListUsers(signed(admin), &pb.ListAclUsersRequest{})
	code(t, "list users", lr.GetStatus(), err, pb.Code_OK)
	if !lr.Enabled || lr.File == "" || len(lr.Users) != len(aclFile().Accounts) {
		t.Fatalf("list users: enabled %v file %q, %d users", lr.Enabled, lr.File, len(lr.Users))
	}
	for _, u := range lr.Users {
		if u.SecretKey != "" {
			t.Fatalf("ListUsers returned %s's secret", u.AccessKey)
		}
		if u.AccessKey == pubOnly.AccessKey && len(u.TopicPerms) != 2 {
			t.Fatalf("pub-user's rules %v", u.TopicPerms)
		}
	}

	dr, err := acl.DeleteUser(signed(admin), &pb.DeleteAclUserRequest{AccessKey: pubOnly.AccessKey})
	code(t, "delete user", dr.GetStatus(), err, pb.Code_OK)
	_, err = c.Send(signed(pubOnly), sendReq("t1"))
	refused(t, "send by a deleted user", err, errcode.Unauthenticated)
	// The last admin cannot be removed.
	dr, err = acl.DeleteUser(signed(admin), &pb.DeleteAclUserRequest{AccessKey: admin.AccessKey})
	code(t, "delete the last admin", dr.GetStatus(), err, pb.Code_INVALID_PARAMETER)
}

// nonLoopback is an address of this machine other than loopback, or "".
func nonLoopback() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// TestACLOffAdminLoopbackOnly: with ACL off, data calls are served from
// any address and need no credentials; administrative calls (create
// topic, Acl) only from loopback.
func TestACLOffAdminLoopbackOnly(t *testing.T) {
	ip := nonLoopback()
	if ip == "" {
		t.Skip("no non-loopback address on this machine (the classification is unit-tested in TestMethodTable)")
	}
	b := aclBroker(t, "0.0.0.0:0", false) // loopback and ip both reach it
	_, port, _ := net.SplitHostPort(b.Addr())
	remote := pb.NewBrokerClient(dial(t, net.JoinHostPort(ip, port)))
	local := pb.NewBrokerClient(dial(t, net.JoinHostPort("127.0.0.1", port)))

	_, err := remote.CreateTopic(context.Background(), &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: "t1", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}})
	refused(t, "CreateTopic from "+ip, err, errcode.NoPermission)
	if !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("the refusal does not say why: %v", err)
	}
	_, err = pb.NewAclClient(dial(t, net.JoinHostPort(ip, port))).ListUsers(context.Background(), &pb.ListAclUsersRequest{})
	refused(t, "ListUsers from "+ip, err, errcode.NoPermission)

	r, err := local.CreateTopic(context.Background(), &pb.CreateTopicRequest{Topic: &pb.TopicConfig{Name: "t1", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}})
	code(t, "CreateTopic from loopback", r.GetStatus(), err, pb.Code_OK)
	sr, err := remote.Send(context.Background(), sendReq("t1"))
	code(t, "send from "+ip+" without credentials", sr.GetStatus(), err, pb.Code_OK)
}

// TestTransactionCheckOnlyToPublishers: a transaction check carries the
// half message, so a producer connected with a key that may not publish
// to its topic is never sent one; a producer that may is.
func TestTransactionCheckOnlyToPublishers(t *testing.T) {
	b := aclBrokerWith(t, "127.0.0.1:0", true, func(o *broker.Options) {
		o.Transaction = broker.TransactionOptions{Timeout: 100 * time.Millisecond, CheckInterval: 100 * time.Millisecond, CheckMax: 1000}
	})
	c := pb.NewBrokerClient(dial(t, b.Addr()))
	createTopics(t, c, "t1")

	producer := func(u auth.Credentials, id string) (<-chan *pb.TransactionCheck, func()) {
		ctx, cancel := context.WithCancel(signed(u))
		st, err := c.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&pb.ClientMessage{Kind: &pb.ClientMessage_Heartbeat{Heartbeat: &pb.Heartbeat{ClientId: id, ProducerGroups: []string{"pg"}}}}); err != nil {
			t.Fatal(err)
		}
		checks := make(chan *pb.TransactionCheck, 1024)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				m, err := st.Recv()
				if err != nil {
					return
				}
				if ck := m.GetCheckTransaction(); ck != nil {
					checks <- ck
				}
			}
		}()
		var once sync.Once
		stop := func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(stop)
		return checks, stop
	}
	// The broker registers the producer when its first heartbeat arrives:
	// a few milliseconds; no client call tells when.
	waitProducer := func() { time.Sleep(300 * time.Millisecond) }

	subChecks, stopSub := producer(subOnly, "sub-producer")
	waitProducer()
	half := &pb.Message{Topic: "t1", Body: []byte("secret"), SysFlag: message.SysFlagTransPrepared,
		Properties: map[string]string{message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: "pg",
			message.PropertyUniqueKey: "7F0000010000000100000000000000AA"}}
	r, err := c.Send(signed(admin), &pb.SendRequest{ProducerGroup: "pg", Messages: []*pb.Message{half}})
	code(t, "send a half message", r.GetStatus(), err, pb.Code_OK)
	select {
	case ck := <-subChecks:
		t.Fatalf("a producer without PUB on t1 was sent a check of %s: %q", ck.Topic, ck.Record)
	case <-time.After(time.Second): // about ten check rounds
	}
	stopSub()

	pubChecks, _ := producer(pubOnly, "pub-producer")
	select {
	case ck := <-pubChecks:
		if ck.Topic != "t1" {
			t.Fatalf("check of %s", ck.Topic)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the publishing producer got no check: the checks were not running")
	}
}

// TestViewMessageNeedsSub: ViewMessage names no topic; the message it
// finds is shown only to a key that may subscribe to its topic.
func TestViewMessageNeedsSub(t *testing.T) {
	b := aclBroker(t, "127.0.0.1:0", true)
	c := pb.NewBrokerClient(dial(t, b.Addr()))
	createTopics(t, c, "t1")
	r, err := c.Send(signed(pubOnly), sendReq("t1"))
	code(t, "send", r.GetStatus(), err, pb.Code_OK)
	id := r.Results[0].MsgId

	v, err := c.ViewMessage(signed(subOnly), &pb.ViewMessageRequest{MsgId: id})
	code(t, "view with SUB on t1", v.GetStatus(), err, pb.Code_OK)
	if len(v.Record) == 0 {
		t.Fatal("no record")
	}
	v, err = c.ViewMessage(signed(pubOnly), &pb.ViewMessageRequest{MsgId: id})
	code(t, "view without SUB on t1", v.GetStatus(), err, pb.Code_NO_PERMISSION)
	if len(v.Record) != 0 {
		t.Fatal("a refused view returned the record")
	}
	_, err = c.ViewMessage(context.Background(), &pb.ViewMessageRequest{MsgId: id})
	refused(t, "view without credentials", err, errcode.Unauthenticated)
}
