package rocketmqv5

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/proccluster"
	"github.com/bolide-mq/bolide/nameserver"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// The users of the ACL cluster's brokers: an admin, a producer allowed to
// publish to the aclv5-* topics, a consumer allowed to subscribe to them
// as an aclv5g-* group.
var (
	aclAdmin    = auth.Credentials{AccessKey: "v5admin", SecretKey: "v5admin-secret"}
	aclProducer = auth.Credentials{AccessKey: "v5producer", SecretKey: "v5producer-secret"}
	aclConsumer = auth.Credentials{AccessKey: "v5consumer", SecretKey: "v5consumer-secret"}
)

// startACLCluster starts a private cluster of one broker group whose
// broker has ACL on (--acl --acl-file) with the users above; its
// NameServer, the clients' access point, has ACL off.
func startACLCluster(t *testing.T) *cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "rmqv5-acl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	file := filepath.Join(dir, "plain_acl.yml")
	err = auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: aclAdmin.AccessKey, SecretKey: aclAdmin.SecretKey, Admin: true},
		{AccessKey: aclProducer.AccessKey, SecretKey: aclProducer.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{"aclv5-*=PUB"}},
		{AccessKey: aclConsumer.AccessKey, SecretKey: aclConsumer.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{"aclv5-*=SUB"}, GroupPerms: []string{"aclv5g-*=SUB"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	o := harness.Options()
	o.Name = "rocketmq-v5-acl"
	o.BrokerArgs = append(append([]string(nil), o.BrokerArgs...), "--acl", "--acl-file", file)
	h := proccluster.New(o)
	return h.Private(t, proccluster.OneGroup)
}

// createTopicAsAdmin creates topic on every broker with bolide.v1's
// CreateTopic signed by the admin (the SDK's own admin calls are not
// signed), and waits until the NameServer routes it.
func createTopicAsAdmin(t *testing.T, c *cluster, topic string) {
	t.Helper()
	for _, b := range c.Brokers {
		cc, err := grpc.NewClient(b.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		a, d := auth.NewHeader(aclAdmin, time.Now())
		ctx = metadata.AppendToOutgoingContext(ctx, auth.HeaderAuthorization, a, auth.HeaderDate, d)
		resp, err := pb.NewBrokerClient(cc).CreateTopic(ctx, &pb.CreateTopicRequest{Topic: &pb.TopicConfig{
			Name: topic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}})
		cancel()
		_ = cc.Close()
		if err != nil {
			t.Fatalf("create topic %s on %s: %v", topic, b.Addr, err)
		}
		if st := resp.GetStatus(); st.GetCode() != pb.Code_OK {
			t.Fatalf("create topic %s on %s: %v", topic, b.Addr, st)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitRouted(ctx, topic); err != nil {
		t.Fatal(err)
	}
}

// aclConfig is the client configuration of c with these credentials.
func aclConfig(c *cluster, group string, creds auth.Credentials) *rmq.Config {
	return &rmq.Config{Endpoint: c.NameSrv, ConsumerGroup: group,
		Credentials: &credentials.SessionCredentials{AccessKey: creds.AccessKey, AccessSecret: creds.SecretKey}}
}

// startErr runs start and returns its error, failing the test when it
// does not return in 30 s.
func startErr(t *testing.T, start func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- start() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("start did not return in 30 s")
		return nil
	}
}

// rpcCode is the v5 status code of a client error (0 if it carries none).
func rpcCode(err error) v2.Code {
	var e *rmq.ErrRpcStatus
	if errors.As(err, &e) {
		return v2.Code(e.Code)
	}
	return 0
}

// TestACLRealClient: against a broker with ACL on, the official Go client
// with the right keys produces and consumes; a client with a wrong secret,
// with the empty keys the examples use, or with keys lacking the
// permission fails to start or to send, and nothing it sent is stored.
func TestACLRealClient(t *testing.T) {
	c := startACLCluster(t)
	topic := uniq("aclv5")
	other := uniq("aclother")
	group := uniq("aclv5g")
	createTopicAsAdmin(t, c, topic)
	createTopicAsAdmin(t, c, other)

	p, err := rmq.NewProducer(aclConfig(c, "", aclProducer), rmq.WithTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, "producer", p.Start)
	t.Cleanup(func() { _ = p.GracefulStop() })
	want, _ := sendBatch(t, p, topic, 10, "acl")

	// The producer may not publish to the other topic: FORBIDDEN.
	if _, err := p.Send(context.Background(), &rmq.Message{Topic: other, Body: []byte("forbidden")}); err == nil {
		t.Fatal("send to a topic without PUB succeeded")
	} else if rpcCode(err) != v2.Code_FORBIDDEN && !strings.Contains(err.Error(), "FORBIDDEN") {
		t.Fatalf("send to a topic without PUB: %v, want FORBIDDEN", err)
	} else {
		t.Logf("refused: %v", err)
	}

	refusedStart := map[string]struct {
		creds auth.Credentials
		want  string
	}{
		"wrong secret": {auth.Credentials{AccessKey: aclProducer.AccessKey, SecretKey: "not-the-secret"}, "Unauthenticated"},
		"empty keys":   {auth.Credentials{}, "Unauthenticated"},
		"unknown key":  {auth.Credentials{AccessKey: "stranger", SecretKey: "stranger-secret"}, "Unauthenticated"},
		"consumer key": {aclConsumer, "PermissionDenied"},
	}
	for name, tc := range refusedStart {
		t.Run("producer "+name, func(t *testing.T) {
			bad, err := rmq.NewProducer(aclConfig(c, "", tc.creds), rmq.WithTopics(topic))
			if err != nil {
				t.Fatal(err)
			}
			err = startErr(t, bad.Start)
			if err == nil {
				defer bad.GracefulStop()
				_, serr := bad.Send(context.Background(), &rmq.Message{Topic: topic, Body: []byte("forged by " + name)})
				t.Fatalf("producer with %s started; its send: %v", name, serr)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start with %s: %v, want %s", name, err, tc.want)
			}
			t.Logf("refused: %v", err)
			_ = bad.GracefulStop()
		})
	}
	t.Run("consumer with the producer's key", func(t *testing.T) {
		sc, err := rmq.NewSimpleConsumer(aclConfig(c, group, aclProducer), rmq.WithSimpleAwaitDuration(2*time.Second),
			rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
		if err != nil {
			t.Fatal(err)
		}
		err = startErr(t, sc.Start)
		if err == nil {
			defer sc.GracefulStop()
			t.Fatal("consumer with the producer's key started")
		}
		if !strings.Contains(err.Error(), "PermissionDenied") {
			t.Fatalf("start: %v, want PermissionDenied", err)
		}
		_ = sc.GracefulStop()
	})

	// The consumer gets the producer's messages, and nothing else: the
	// refused clients stored nothing.
	sc, err := rmq.NewSimpleConsumer(aclConfig(c, group, aclConsumer), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, "simple consumer", sc.Start)
	t.Cleanup(func() { _ = sc.GracefulStop() })
	got, _ := receiveAll(t, sc, want, 30*time.Second, 60*time.Second, true)
	for id, mv := range got {
		checkView(t, id, want[id], mv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mvs, err := sc.Receive(ctx, 16, 20*time.Second)
	if err != nil && !isNotFound(err) {
		t.Fatalf("receive: %v", err)
	}
	for _, mv := range mvs {
		t.Errorf("message stored besides the producer's: %s %q", mv.GetMessageId(), mv.GetBody())
	}
}

// aclNobody is a user allowed nothing.
var aclNobody = auth.Credentials{AccessKey: "v5nobody", SecretKey: "v5nobody-secret"}

// TestACLAccessPoint: a NameServer and a broker, both with ACL on (one
// ACL file), the broker registering with the admin's keys, in this
// process. The official Go client's QueryRoute at the NameServer is
// authenticated and authorized: with the right keys it produces and
// consumes; a wrong secret or empty keys fail its start with UNAUTHORIZED
// from the NameServer, a user without any permission on the topic with
// FORBIDDEN.
func TestACLAccessPoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: aclAdmin.AccessKey, SecretKey: aclAdmin.SecretKey, Admin: true},
		{AccessKey: aclProducer.AccessKey, SecretKey: aclProducer.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{"aclv5-*=PUB"}},
		{AccessKey: aclConsumer.AccessKey, SecretKey: aclConsumer.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{"aclv5-*=SUB"}, GroupPerms: []string{"aclv5g-*=SUB"}},
		{AccessKey: aclNobody.AccessKey, SecretKey: aclNobody.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	acl := auth.Config{Enabled: true, File: file, MaxSkew: auth.DefaultMaxSkew}

	no := nameserver.DefaultOptions()
	no.ListenAddr = "127.0.0.1:0"
	no.GossipAddr = nameserver.GossipOff
	no.Auth = acl
	ns, err := nameserver.New(no, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })

	bo := broker.DefaultOptions(filepath.Join(dir, "store"))
	bo.ListenAddr = "127.0.0.1:0"
	bo.GossipAddr = "off"
	bo.NameServers = []string{ns.Addr()}
	bo.RegisterInterval = time.Second
	bo.Store.CommitLog.SegmentSize = 16 << 20
	bo.MaxMessageSize = 1 << 20
	bo.Auth = acl
	bo.Credentials = aclAdmin
	b, err := server.New(bo, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	topic, group := uniq("aclv5"), uniq("aclv5g")
	if err := b.CreateTopic(broker.TopicConfig{Name: topic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	// The broker registers the topic with the admin's keys.
	cc, err := grpc.NewClient(ns.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	v5 := v2.NewMessagingServiceClient(cc)
	route := func(creds auth.Credentials) *v2.QueryRouteResponse {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a, d := auth.NewHeader(creds, time.Now())
		r, err := v5.QueryRoute(metadata.AppendToOutgoingContext(ctx, auth.HeaderAuthorization, a, auth.HeaderDate, d),
			&v2.QueryRouteRequest{Topic: &v2.Resource{Name: topic}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if !waitFor(30*time.Second, func() bool { return route(aclAdmin).GetStatus().GetCode() == v2.Code_OK }) {
		t.Fatalf("topic not routed by the NameServer: %v", route(aclAdmin).GetStatus())
	}
	access := &cluster{NameSrv: ns.Addr()}

	p, err := rmq.NewProducer(aclConfig(access, "", aclProducer), rmq.WithTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, "producer", p.Start)
	t.Cleanup(func() { _ = p.GracefulStop() })
	want, _ := sendBatch(t, p, topic, 5, "ns-acl")

	for name, tc := range map[string]struct {
		creds auth.Credentials
		want  string
	}{
		"wrong secret": {auth.Credentials{AccessKey: aclProducer.AccessKey, SecretKey: "not-the-secret"}, "UNAUTHORIZED"},
		"empty keys":   {auth.Credentials{}, "UNAUTHORIZED"},
		"nobody":       {aclNobody, "FORBIDDEN"},
	} {
		t.Run("producer "+name, func(t *testing.T) {
			bad, err := rmq.NewProducer(aclConfig(access, "", tc.creds), rmq.WithTopics(topic))
			if err != nil {
				t.Fatal(err)
			}
			err = startErr(t, bad.Start)
			_ = bad.GracefulStop()
			if err == nil || !strings.Contains(err.Error(), "topic route") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start with %s: %v, want the route refused with %s", name, err, tc.want)
			}
			t.Logf("refused: %v", err)
		})
	}

	sc, err := rmq.NewSimpleConsumer(aclConfig(access, group, aclConsumer), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, "simple consumer", sc.Start)
	t.Cleanup(func() { _ = sc.GracefulStop() })
	got, _ := receiveAll(t, sc, want, 30*time.Second, 60*time.Second, true)
	for id, mv := range got {
		checkView(t, id, want[id], mv)
	}
}
