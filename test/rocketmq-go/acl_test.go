package rocketmqgo_test

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/proccluster"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// The users of the ACL test's broker: an admin, a producer that may
// publish to aclTopic, a consumer that may subscribe to it as aclGroup.
var (
	aclAdminKeys    = primitive.Credentials{AccessKey: "rmqAdmin", SecretKey: "rmqAdminSecret"}
	aclProducerKeys = primitive.Credentials{AccessKey: "rmqProducer", SecretKey: "rmqProducerSecret"}
	aclConsumerKeys = primitive.Credentials{AccessKey: "rmqConsumer", SecretKey: "rmqConsumerSecret"}
)

const (
	aclTopic = "acl-go-orders"
	aclGroup = "acl-go-group"
)

// writeGoACL writes the ACL file of the users above.
func writeGoACL(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	err := auth.WriteFile(path, &auth.File{Accounts: []auth.Account{
		{AccessKey: aclAdminKeys.AccessKey, SecretKey: aclAdminKeys.SecretKey, Admin: true},
		{AccessKey: aclProducerKeys.AccessKey, SecretKey: aclProducerKeys.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{aclTopic + "=PUB"}},
		{AccessKey: aclConsumerKeys.AccessKey, SecretKey: aclConsumerKeys.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{aclTopic + "=SUB"}, GroupPerms: []string{aclGroup + "=SUB"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// aclCluster starts a private cluster whose broker runs with ACL on (the
// NameServer with it off: its own checks are tested in package
// nameserver).
func aclCluster(t *testing.T) *cluster {
	t.Helper()
	path := writeGoACL(t)
	o := harness.Options()
	o.Name = "rocketmq-go-acl"
	o.BrokerArgs = append(append([]string{}, o.BrokerArgs...), "--acl", "--acl-file", path,
		"--access-key", aclAdminKeys.AccessKey, "--secret-key", aclAdminKeys.SecretKey)
	c, err := proccluster.New(o).Start(proccluster.Layout{Name: "acl", Brokers: []string{"broker-a"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs(60))
		}
		c.Close(false)
	})
	return c
}

// brokerCall sends one remoting request to a broker (or a NameServer)
// signed by the admin (Bolide's own codec: what the daemon holds, seen
// past the client).
func brokerCall(t *testing.T, addr string, code int32, ext map[string]string) *rmq.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := rmq.Dial(ctx, addr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ext = maps.Clone(ext)
	ext[auth.FieldAccessKey] = aclAdminKeys.AccessKey
	ext[auth.FieldSignature] = auth.SignRemoting(ext, nil, aclAdminKeys.SecretKey)
	resp, err := conn.Invoke(ctx, rmq.NewRequest(code, ext, nil))
	if err != nil {
		t.Fatalf("request %d: %v", code, err)
	}
	return resp
}

func topicExists(t *testing.T, addr, topic string) bool {
	t.Helper()
	resp := brokerCall(t, addr, rmq.GetTopicConfig, map[string]string{"topic": topic})
	switch resp.Code {
	case rmq.Success:
		return true
	case rmq.TopicNotExist:
		return false
	}
	t.Fatalf("GET_TOPIC_CONFIG %s: %d %q", topic, resp.Code, resp.Remark)
	return false
}

// aclStored is the number of messages in queue 0 of topic.
func aclStored(t *testing.T, addr, topic string) int64 {
	t.Helper()
	resp := brokerCall(t, addr, rmq.GetMaxOffset, map[string]string{"topic": topic, "queueId": "0"})
	if resp.Code != rmq.Success {
		t.Fatalf("GET_MAX_OFFSET %s: %d %q", topic, resp.Code, resp.Remark)
	}
	n, err := strconv.ParseInt(resp.String("offset"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rmqAdmin runs f with a RocketMQ admin client signing with keys. The
// client signs its broker requests only once GetAllSubscriptionGroup has
// registered its ACL hook (admin.go of rocketmq-client-go), so f gets it
// after that call.
func rmqAdmin(t *testing.T, c *cluster, keys primitive.Credentials, f func(ctx context.Context, adm admin.Admin)) {
	t.Helper()
	rmqAdminAt(t, c.NameSrv, c.Brokers[0].Addr, keys, f)
}

// rmqAdminAt is rmqAdmin for a NameServer and a broker address.
func rmqAdminAt(t *testing.T, ns, brokerAddr string, keys primitive.Credentials, f func(ctx context.Context, adm admin.Admin)) {
	t.Helper()
	adminMu.Lock()
	defer adminMu.Unlock()
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns})), admin.WithCredentials(keys))
	if err != nil {
		t.Fatalf("new admin: %v", err)
	}
	defer func() { _ = adm.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.GetAllSubscriptionGroup(ctx, brokerAddr, 5*time.Second); err != nil {
		t.Fatalf("GetAllSubscriptionGroup (an authenticated read) as %s: %v", keys.AccessKey, err)
	}
	f(ctx, adm)
}

// TestACLGoClient: rocketmq-client-go against a broker with ACL on. Only
// an admin creates a topic; the right keys send and consume; a producer
// without keys, with a wrong secret or without permission is refused with
// NO_PERMISSION (16) and nothing is stored; a consumer without
// permission gets nothing.
func TestACLGoClient(t *testing.T) {
	c := aclCluster(t)
	addr := c.Brokers[0].Addr

	// A normal user's CreateTopic: the client does not report the refusal
	// (it ignores the response code), but the topic does not exist.
	rmqAdmin(t, c, aclProducerKeys, func(ctx context.Context, adm admin.Admin) {
		_ = adm.CreateTopic(ctx, admin.WithTopicCreate(aclTopic), admin.WithBrokerAddrCreate(addr),
			admin.WithReadQueueNums(1), admin.WithWriteQueueNums(1))
	})
	if topicExists(t, addr, aclTopic) {
		t.Fatal("a normal user's CreateTopic created the topic")
	}
	rmqAdmin(t, c, aclAdminKeys, func(ctx context.Context, adm admin.Admin) {
		if err := adm.CreateTopic(ctx, admin.WithTopicCreate(aclTopic), admin.WithBrokerAddrCreate(addr),
			admin.WithReadQueueNums(1), admin.WithWriteQueueNums(1)); err != nil {
			t.Fatalf("admin CreateTopic: %v", err)
		}
	})
	if !topicExists(t, addr, aclTopic) {
		t.Fatal("the admin's CreateTopic created no topic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitRouted(ctx, aclTopic); err != nil {
		t.Fatal(err)
	}

	// Refused producers: 16 with the broker's reason, nothing stored.
	for _, tc := range []struct {
		name string
		opts []producer.Option
		want string
	}{
		{"no keys", nil, "no credentials"},
		{"wrong secret", []producer.Option{producer.WithCredentials(primitive.Credentials{AccessKey: aclProducerKeys.AccessKey, SecretKey: "notTheSecret"})}, "signature check failed"},
		{"no permission", []producer.Option{producer.WithCredentials(aclConsumerKeys)}, "may not publish to topic " + aclTopic},
	} {
		p := newProducer(t, c, tc.opts...)
		_, err := p.SendSync(ctx, primitive.NewMessage(aclTopic, []byte("refused")))
		if err == nil || !strings.Contains(err.Error(), "16") || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: SendSync error %v, want code 16 and %q", tc.name, err, tc.want)
		}
		_ = p.Shutdown()
	}
	if n := aclStored(t, addr, aclTopic); n != 0 {
		t.Fatalf("%d messages stored by refused producers", n)
	}

	// The right keys: stored.
	p := newProducer(t, c, producer.WithCredentials(aclProducerKeys))
	const n = 5
	for i := range n {
		res, err := p.SendSync(ctx, testMessage(aclTopic, i, "TagA"))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %d with the right keys: %v %v", i, res, err)
		}
	}
	// The queue's offset follows the log's dispatch: wait for it, then
	// check that no refused send got in before them.
	waitFor(10*time.Second, func() bool { return aclStored(t, addr, aclTopic) >= n })
	if got := aclStored(t, addr, aclTopic); got != n {
		t.Fatalf("%d messages stored, want %d", got, n)
	}

	// Consumers: the one with SUB on the topic and the group gets every
	// message; one whose keys lack SUB (the producer's) gets none.
	var allowed, refused atomic.Int64
	count := func(n *atomic.Int64) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			n.Add(int64(len(msgs)))
			return consumer.ConsumeSuccess, nil
		}
	}
	startACLConsumer(t, c, aclGroup, count(&allowed), consumer.WithCredentials(aclConsumerKeys))
	startACLConsumer(t, c, aclGroup+"-other", count(&refused), consumer.WithCredentials(aclProducerKeys))
	if !waitFor(30*time.Second, func() bool { return allowed.Load() >= n }) {
		t.Fatalf("the permitted consumer got %d of %d messages", allowed.Load(), n)
	}
	time.Sleep(3 * time.Second) // the refused one pulls meanwhile, and is refused
	if got := refused.Load(); got != 0 {
		t.Fatalf("a consumer without SUB permission got %d messages", got)
	}
}

// startACLConsumer starts a push consumer of aclTopic; a refused start
// (its heartbeat is refused) is not a failure here, what it receives is.
func startACLConsumer(t *testing.T, c *cluster, group string, f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error), opts ...consumer.Option) {
	t.Helper()
	pc, err := rocketmq.NewPushConsumer(consumerOpts(c, group, opts...)...)
	if err != nil {
		t.Fatalf("new push consumer: %v", err)
	}
	if err := pc.Subscribe(aclTopic, consumer.MessageSelector{}, f); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := pc.Start(); err != nil {
		t.Logf("push consumer of %s did not start: %v", group, err)
		return
	}
	t.Cleanup(func() { _ = pc.Shutdown() })
}

// TestACLGoClientNameServer: rocketmq-client-go's NameServer requests
// against a NameServer with ACL on: without keys or with a wrong secret a
// route lookup is refused with NO_PERMISSION (16); with a user's keys it
// is served (here: the topic does not exist).
func TestACLGoClientNameServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(path, &auth.File{Accounts: []auth.Account{
		{AccessKey: aclAdminKeys.AccessKey, SecretKey: aclAdminKeys.SecretKey, Admin: true},
		{AccessKey: aclConsumerKeys.AccessKey, SecretKey: aclConsumerKeys.SecretKey, DefaultTopicPerm: "SUB"},
	}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	port, err := proccluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ns := &proccluster.Proc{Bin: filepath.Join(harness.Options().BinDir, "bolide-nameserver"),
		LogPath: filepath.Join(dir, "nameserver.log"), AddrFile: filepath.Join(dir, "nameserver.addr"),
		Args: []string{"--listen", "127.0.0.1:" + strconv.Itoa(port), "--gossip", "off", "--admin-listen", "off",
			"--acl", "--acl-file", path}}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(ns.LogTail(40))
		}
		ns.Stop(10 * time.Second)
	})

	lookup := func(keys primitive.Credentials) error {
		adminMu.Lock()
		defer adminMu.Unlock()
		opts := []admin.AdminOption{admin.WithResolver(primitive.NewPassthroughResolver([]string{ns.Addr()}))}
		if !keys.IsEmpty() {
			opts = append(opts, admin.WithCredentials(keys))
		}
		adm, err := admin.NewAdmin(opts...)
		if err != nil {
			t.Fatalf("new admin: %v", err)
		}
		defer func() { _ = adm.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = adm.FetchPublishMessageQueues(ctx, uniq("acl-ns"))
		return err
	}
	for _, tc := range []struct {
		name string
		keys primitive.Credentials
		want string
	}{
		{"no keys", primitive.Credentials{}, "no credentials"},
		{"wrong secret", primitive.Credentials{AccessKey: aclConsumerKeys.AccessKey, SecretKey: "notTheSecret"}, "signature check failed"},
	} {
		if err := lookup(tc.keys); err == nil || !strings.Contains(err.Error(), "CODE: 16") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: route lookup error %v, want code 16 and %q", tc.name, err, tc.want)
		}
	}
	if err := lookup(aclConsumerKeys); !errors.Is(err, rmqerrors.ErrTopicNotExist) {
		t.Errorf("route lookup with a user's keys: %v, want %v", err, rmqerrors.ErrTopicNotExist)
	}
}

// startProc starts a daemon of the harness's binaries with args.
func startProc(t *testing.T, dir, bin string, args ...string) *proccluster.Proc {
	t.Helper()
	p := &proccluster.Proc{Bin: filepath.Join(harness.Options().BinDir, bin),
		LogPath: filepath.Join(dir, bin+".log"), AddrFile: filepath.Join(dir, bin+".addr"), Args: args}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log:\n%s", bin, p.LogTail(40))
		}
		p.Stop(10 * time.Second)
	})
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := proccluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// TestACLGoClientBothDaemons: a NameServer and a broker both with ACL on
// (the broker registers with the admin's keys): rocketmq-client-go with
// the right keys looks up routes, sends and consumes; a producer without
// keys gets no route (the client reports the NameServer's 16 as "route
// info not found") and stores nothing.
func TestACLGoClientBothDaemons(t *testing.T) {
	path := writeGoACL(t)
	dir := t.TempDir()
	ns := freeAddr(t)
	startProc(t, dir, "bolide-nameserver", "--listen", ns, "--gossip", "off", "--admin-listen", "off",
		"--acl", "--acl-file", path)
	addr := freeAddr(t)
	startProc(t, dir, "bolide-broker", "--namesrv", ns, "--listen", addr, "--store-dir", filepath.Join(dir, "broker-a"),
		"--broker-name", "broker-a", "--broker-id", "0", "--cluster", clusterName, "--segment-size", strconv.Itoa(16<<20),
		"--ha-listen", "127.0.0.1:0", "--gossip", "off", "--admin-listen", "off", "--register-interval", "1s",
		"--acl", "--acl-file", path, "--access-key", aclAdminKeys.AccessKey, "--secret-key", aclAdminKeys.SecretKey)

	rmqAdminAt(t, ns, addr, aclAdminKeys, func(ctx context.Context, adm admin.Admin) {
		if err := adm.CreateTopic(ctx, admin.WithTopicCreate(aclTopic), admin.WithBrokerAddrCreate(addr),
			admin.WithReadQueueNums(1), admin.WithWriteQueueNums(1)); err != nil {
			t.Fatalf("admin CreateTopic: %v", err)
		}
	})
	// The broker registered (signed) and its topic is routed.
	if !waitFor(30*time.Second, func() bool {
		return brokerCall(t, ns, rmq.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}).Code == rmq.Success
	}) {
		t.Fatalf("%s not routed by the NameServer with ACL on", aclTopic)
	}
	c := &cluster{NameSrv: ns}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	unsigned := newProducer(t, c)
	_, err := unsigned.SendSync(ctx, primitive.NewMessage(aclTopic, []byte("refused")))
	t.Logf("send without keys: %v", err)
	if err == nil {
		t.Fatal("a producer without keys sent through a NameServer and a broker with ACL on")
	}
	p := newProducer(t, c, producer.WithCredentials(aclProducerKeys))
	const n = 3
	for i := range n {
		if res, err := p.SendSync(ctx, testMessage(aclTopic, i, "TagA")); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %d with the right keys: %v %v", i, res, err)
		}
	}
	var got atomic.Int64
	startACLConsumer(t, c, aclGroup, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		got.Add(int64(len(msgs)))
		return consumer.ConsumeSuccess, nil
	}, consumer.WithCredentials(aclConsumerKeys))
	if !waitFor(30*time.Second, func() bool { return got.Load() >= n }) {
		t.Fatalf("the consumer got %d of %d messages", got.Load(), n)
	}
	if stored := aclStored(t, addr, aclTopic); stored != n {
		t.Fatalf("%d messages stored, want %d", stored, n)
	}
}
