package remoting_test

import (
	"context"
	"maps"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// The users of the ACL tests.
var (
	aclAdmin    = auth.Credentials{AccessKey: "adminKey", SecretKey: "adminSecret"}
	aclProducer = auth.Credentials{AccessKey: "producerKey", SecretKey: "producerSecret"}
	aclConsumer = auth.Credentials{AccessKey: "consumerKey", SecretKey: "consumerSecret"}
	aclNobody   = auth.Credentials{AccessKey: "nobodyKey", SecretKey: "nobodySecret"}
)

// aclBroker starts a broker with ACL on: an admin, a producer that may
// publish to acl-orders, a consumer that may subscribe to it as acl-group,
// and a user with no permission; mutate may change more options.
func aclBroker(t *testing.T, mutate ...func(*broker.Options)) *server.Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	err := auth.WriteFile(path, &auth.File{Accounts: []auth.Account{
		{AccessKey: aclAdmin.AccessKey, SecretKey: aclAdmin.SecretKey, Admin: true},
		{AccessKey: aclProducer.AccessKey, SecretKey: aclProducer.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{"acl-orders=PUB"}},
		{AccessKey: aclConsumer.AccessKey, SecretKey: aclConsumer.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY",
			TopicPerms: []string{"acl-orders=SUB"}, GroupPerms: []string{"acl-group=SUB"}},
		{AccessKey: aclNobody.AccessKey, SecretKey: aclNobody.SecretKey, DefaultTopicPerm: "DENY", DefaultGroupPerm: "DENY"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return startBroker(t, append([]func(*broker.Options){func(o *broker.Options) {
		o.Auth = auth.Config{Enabled: true, File: path}
	}}, mutate...)...)
}

// signedExt is ext with the ACL 1.0 signature of c over ext and body, as
// RocketMQ's clients sign a request.
func signedExt(c auth.Credentials, ext map[string]string, body []byte) map[string]string {
	out := maps.Clone(ext)
	if out == nil {
		out = map[string]string{}
	}
	out[auth.FieldAccessKey] = c.AccessKey
	out[auth.FieldSignature] = auth.SignRemoting(out, body, c.SecretKey)
	return out
}

// signed sends a request signed by c.
func signed(t *testing.T, conn *rmq.Conn, c auth.Credentials, code int32, ext map[string]string, body []byte) *rmq.Command {
	t.Helper()
	return invoke(t, conn, code, signedExt(c, ext, body), body)
}

// wantRefused requires NO_PERMISSION with a remark containing want.
func wantRefused(t *testing.T, what string, resp *rmq.Command, want string) {
	t.Helper()
	if resp.Code != rmq.NoPermission || !strings.Contains(resp.Remark, want) {
		t.Fatalf("%s: response %d %q, want %d with %q", what, resp.Code, resp.Remark, rmq.NoPermission, want)
	}
}

// stored is the number of messages queue 0 of topic holds.
func stored(t *testing.T, b *server.Server, topic string) int {
	t.Helper()
	res, err := b.Pull(context.Background(), broker.PullRequest{Group: "probe", Topic: topic, QueueID: 0, MaxMessages: 64, CommitOffset: -1})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Records)
}

func createTopicExt(topic string) map[string]string {
	return map[string]string{"topic": topic, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
		"defaultTopic": "TBW102", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
}

// TestACLRemotingSend: with ACL on, a send is stored only when it is
// signed by a user who may publish to its topic; every other one is
// answered NO_PERMISSION with the reason, and nothing is stored.
func TestACLRemotingSend(t *testing.T) {
	b := aclBroker(t)
	newTopic(t, b, "acl-orders", 1)
	newTopic(t, b, "acl-other", 1)
	c := dialBroker(t, b.Addr(), nil)
	body := []byte("hello")
	ext := sendExt("PG", "acl-orders", 0, 0, props("TAGS", "A"))

	wantRefused(t, "no credentials", invoke(t, c, rmq.SendMessage, ext, body), "no credentials")
	wantRefused(t, "wrong secret", signed(t, c, auth.Credentials{AccessKey: aclProducer.AccessKey, SecretKey: "notTheSecret"},
		rmq.SendMessage, ext, body), "signature check failed")
	wantRefused(t, "unknown key", signed(t, c, auth.Credentials{AccessKey: "strangerKey", SecretKey: "whatever"},
		rmq.SendMessage, ext, body), "unknown access key")
	// A signature over another body (the message changed in flight).
	tampered := signedExt(aclProducer, ext, body)
	wantRefused(t, "other body", invoke(t, c, rmq.SendMessage, tampered, []byte("HELLO")), "signature check failed")
	// A signature over other header fields (the topic changed in flight).
	tampered = signedExt(aclProducer, ext, body)
	tampered["topic"] = "acl-other"
	wantRefused(t, "other topic", invoke(t, c, rmq.SendMessage, tampered, body), "signature check failed")
	wantRefused(t, "subscriber sends", signed(t, c, aclConsumer, rmq.SendMessage, ext, body), "may not publish to topic acl-orders")
	wantRefused(t, "no permission", signed(t, c, aclNobody, rmq.SendMessage, ext, body), "may not publish")
	wantRefused(t, "other topic", signed(t, c, aclProducer, rmq.SendMessage,
		sendExt("PG", "acl-other", 0, 0, ""), body), "may not publish to topic acl-other")
	// SEND_MESSAGE_V2's short header names its topic "b".
	v2 := map[string]string{"a": "PG", "b": "acl-other", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0", "i": "", "j": "0", "k": "false", "m": "false"}
	wantRefused(t, "V2 other topic", signed(t, c, aclProducer, rmq.SendMessageV2, v2, body), "acl-other")
	wantOK(t, signed(t, c, aclProducer, rmq.SendMessage, ext, body))
	v2["b"] = "acl-orders"
	wantOK(t, signed(t, c, aclProducer, rmq.SendMessageV2, v2, body))
	wantOK(t, signed(t, c, aclAdmin, rmq.SendMessage, ext, body)) // an admin may do everything
	// Dispatch keeps the order of the log: once the three accepted sends
	// are in their queue, a refused one stored before them would be too.
	waitMessages(t, b, "acl-orders", 0, 3)
	if n, other := stored(t, b, "acl-orders"), stored(t, b, "acl-other"); n != 3 || other != 0 {
		t.Fatalf("%d messages in acl-orders (want 3), %d in acl-other (want 0): refused sends were stored", n, other)
	}
	if f, d := b.Guard().Failures(), b.Guard().Denials(); f != 5 || d != 4 {
		t.Fatalf("counted %d authentication failures (want 5) and %d denials (want 4)", f, d)
	}
}

// TestACLRemotingConsume: pulls, offsets, heartbeats and locks need SUB on
// the topic and the group; a refused offset commit changes nothing.
func TestACLRemotingConsume(t *testing.T) {
	b := aclBroker(t)
	newTopic(t, b, "acl-orders", 1)
	c := dialBroker(t, b.Addr(), nil)
	wantOK(t, signed(t, c, aclProducer, rmq.SendMessage, sendExt("PG", "acl-orders", 0, 0, ""), []byte("m1")))
	waitMessages(t, b, "acl-orders", 0, 1)

	pull := pullExt("acl-group", "acl-orders", 0, 0, "sysFlag", "4", "suspendTimeoutMillis", "0")
	wantRefused(t, "pull without credentials", invoke(t, c, rmq.PullMessage, pull, nil), "no credentials")
	wantRefused(t, "producer pulls", signed(t, c, aclProducer, rmq.PullMessage, pull, nil), "may not subscribe to topic acl-orders")
	wantRefused(t, "other group", signed(t, c, aclConsumer, rmq.PullMessage,
		pullExt("other-group", "acl-orders", 0, 0, "sysFlag", "4", "suspendTimeoutMillis", "0"), nil), "consume as group other-group")
	if resp := signed(t, c, aclConsumer, rmq.PullMessage, pull, nil); resp.Code != rmq.Success {
		t.Fatalf("consumer pull: %d %q", resp.Code, resp.Remark)
	}
	// Long-polled pulls at the queue's end (parked, not on a goroutine)
	// are checked the same way, and refused at once.
	held := pullExt("acl-group", "acl-orders", 0, 1, "suspendTimeoutMillis", "20000")
	wantRefused(t, "held pull without credentials", invoke(t, c, rmq.PullMessage, held, nil), "no credentials")
	wantRefused(t, "producer's held pull", signed(t, c, aclProducer, rmq.PullMessage, held, nil), "may not subscribe to topic acl-orders")

	// Offsets: a refused commit leaves the group's offset as it was.
	commit := offsetReqExt("acl-group", "acl-orders", 0, "commitOffset", "1")
	wantRefused(t, "producer commits", signed(t, c, aclProducer, rmq.UpdateConsumerOffset, commit, nil), "may not subscribe")
	query := offsetReqExt("acl-group", "acl-orders", 0)
	if resp := signed(t, c, aclConsumer, rmq.QueryConsumerOffset, query, nil); resp.Code == rmq.Success && resp.String("offset") == "1" {
		t.Fatal("a refused commit was applied")
	}
	wantOK(t, signed(t, c, aclConsumer, rmq.UpdateConsumerOffset, commit, nil))
	if resp := wantOK(t, signed(t, c, aclConsumer, rmq.QueryConsumerOffset, query, nil)); resp.String("offset") != "1" {
		t.Fatalf("offset %q after the commit", resp.String("offset"))
	}
	// GET_MAX_OFFSET: publish or subscribe will do.
	maxExt := map[string]string{"topic": "acl-orders", "queueId": "0"}
	wantOK(t, signed(t, c, aclProducer, rmq.GetMaxOffset, maxExt, nil))
	wantRefused(t, "max offset without permission", signed(t, c, aclNobody, rmq.GetMaxOffset, maxExt, nil), "acl-orders")

	// A heartbeat subscribing to a topic the user may not read is refused
	// whole: the session is not opened.
	hb := sqlHeartbeat("client-1", "acl-group", "acl-secret", "a > 1")
	wantRefused(t, "heartbeat other topic", signed(t, c, aclConsumer, rmq.HeartBeat, nil, hb), "may not subscribe to topic acl-secret")
	hb = []byte(`{"clientID":"client-1","consumerDataSet":[{"groupName":"acl-group","consumeType":"CONSUME_PASSIVELY",` +
		`"messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"acl-orders","subString":"*","expressionType":"TAG"},` +
		`{"topic":"%RETRY%acl-group","subString":"*","expressionType":"TAG"}]}]}`)
	wantRefused(t, "producer heartbeat as consumer", signed(t, c, aclProducer, rmq.HeartBeat, nil, hb), "acl-group")
	online := map[string]string{"consumerGroup": "acl-group"}
	if resp := signed(t, c, aclConsumer, rmq.GetConsumerConnectionList, online, nil); resp.Code != rmq.ConsumerNotOnline {
		t.Fatalf("after refused heartbeats: %d %q, want the group not online", resp.Code, resp.Remark)
	}
	wantOK(t, signed(t, c, aclConsumer, rmq.HeartBeat, nil, hb))
	wantOK(t, signed(t, c, aclConsumer, rmq.GetConsumerConnectionList, online, nil))

	lock := []byte(`{"consumerGroup":"acl-group","clientId":"client-1","mqSet":[{"topic":"acl-secret","brokerName":"broker-a","queueId":0}]}`)
	wantRefused(t, "lock other topic", signed(t, c, aclConsumer, rmq.LockBatchMQ, nil, lock), "acl-secret")

	// Sending a message back to its retry topic needs SUB on the group.
	back := map[string]string{"group": "acl-group", "offset": "0", "delayLevel": "0", "originMsgId": "x", "originTopic": "acl-orders", "maxReconsumeTimes": "16"}
	wantRefused(t, "producer sends back", signed(t, c, aclProducer, rmq.ConsumerSendMsgBack, back, nil), "consume as group acl-group")
}

// TestACLRemotingAdmin: administrative requests need an admin user; reads
// of the broker's state an authenticated one; codes the broker does not
// serve are refused while ACL is on; configuration stays unchangeable.
func TestACLRemotingAdmin(t *testing.T) {
	b := aclBroker(t)
	c := dialBroker(t, b.Addr(), nil)

	wantRefused(t, "create without credentials", invoke(t, c, rmq.UpdateAndCreateTopic, createTopicExt("acl-new"), nil), "no credentials")
	wantRefused(t, "producer creates", signed(t, c, aclProducer, rmq.UpdateAndCreateTopic, createTopicExt("acl-new"), nil), "is not an admin")
	if _, ok := topicConfig(b, "acl-new"); ok {
		t.Fatal("a refused UPDATE_AND_CREATE_TOPIC created the topic")
	}
	wantOK(t, signed(t, c, aclAdmin, rmq.UpdateAndCreateTopic, createTopicExt("acl-new"), nil))
	if _, ok := topicConfig(b, "acl-new"); !ok {
		t.Fatal("the admin's UPDATE_AND_CREATE_TOPIC created no topic")
	}
	wantRefused(t, "producer deletes", signed(t, c, aclProducer, rmq.DeleteTopicInBroker, map[string]string{"topic": "acl-new"}, nil), "is not an admin")
	if _, ok := topicConfig(b, "acl-new"); !ok {
		t.Fatal("a refused DELETE_TOPIC_IN_BROKER deleted the topic")
	}
	group := []byte(`{"groupName":"acl-new-group"}`)
	wantRefused(t, "consumer creates a group", signed(t, c, aclConsumer, rmq.UpdateAndCreateSubscriptionGroup, nil, group), "is not an admin")
	reset := map[string]string{"group": "acl-group", "topic": "acl-new", "timestamp": "0", "isForce": "true"}
	wantRefused(t, "consumer resets offsets", signed(t, c, aclConsumer, rmq.InvokeBrokerToResetOffset, reset, nil), "is not an admin")

	// Reads: any known user; nobody without credentials.
	wantRefused(t, "runtime info without credentials", invoke(t, c, rmq.GetBrokerRuntimeInfo, nil, nil), "no credentials")
	wantOK(t, signed(t, c, aclNobody, rmq.GetBrokerRuntimeInfo, nil, nil))

	// Configuration: an admin may not change a path either; a non-admin is
	// refused before the keys are looked at.
	conf := []byte("storePathRootDir=/tmp/elsewhere\nbrokerPermission=2\n")
	wantRefused(t, "config by producer", signed(t, c, aclProducer, rmq.UpdateBrokerConfig, nil, conf), "is not an admin")
	wantRefused(t, "config by admin", signed(t, c, aclAdmin, rmq.UpdateBrokerConfig, nil, conf), "storePathRootDir may not be changed at runtime")
	if b.Permission() != 6 {
		t.Fatal("a refused UPDATE_BROKER_CONFIG changed brokerPermission")
	}
	wantRefused(t, "config read without credentials", invoke(t, c, rmq.GetBrokerConfig, nil, nil), "no credentials")
	wantOK(t, signed(t, c, aclNobody, rmq.GetBrokerConfig, nil, nil))

	// VIEW_MESSAGE_BY_ID: only for users who may subscribe to the topic
	// of the message at that offset.
	newTopic(t, b, "acl-orders", 1)
	off := sendN(t, b, "acl-orders", 1, func(int) string { return "k" })[0]
	view := map[string]string{"offset": strconv.FormatInt(off, 10)}
	wantRefused(t, "view without permission", signed(t, c, aclNobody, rmq.ViewMessageByID, view, nil), "may not subscribe to topic acl-orders")
	wantRefused(t, "view by the producer", signed(t, c, aclProducer, rmq.ViewMessageByID, view, nil), "may not subscribe to topic acl-orders")
	if resp := wantOK(t, signed(t, c, aclConsumer, rmq.ViewMessageByID, view, nil)); len(resp.Body) == 0 {
		t.Fatal("VIEW_MESSAGE_BY_ID answered no record")
	}

	// A code nobody serves: refused while ACL is on, even for an admin.
	wantRefused(t, "unknown code", signed(t, c, aclAdmin, 9999, nil, nil), "request code 9999")
	wantRefused(t, "unserved code", signed(t, c, aclAdmin, rmq.WipeWritePermOfBroker, nil, nil), "refused while ACL is on")
}

// topicConfig is a topic's configuration on b.
func topicConfig(b *server.Server, name string) (broker.TopicConfig, bool) {
	for _, tc := range b.TopicConfigs() {
		if tc.Name == name {
			return tc, true
		}
	}
	return broker.TopicConfig{}, false
}

// TestACLOffRemoteAdmin: with ACL off, administrative requests are served
// to loopback callers only (unless --allow-remote-admin); data requests
// and unknown codes are served as before.
func TestACLOffRemoteAdmin(t *testing.T) {
	ip := nonLoopbackIP(t)
	b := startBroker(t, func(o *broker.Options) { o.ListenAddr = net.JoinHostPort(ip, "0") })
	newTopic(t, b, "orders", 1)
	c := dialBroker(t, b.Addr(), nil) // from ip: not loopback
	wantRefused(t, "remote create", invoke(t, c, rmq.UpdateAndCreateTopic, createTopicExt("remote-new"), nil), "accepted only from loopback")
	if _, ok := topicConfig(b, "remote-new"); ok {
		t.Fatal("a refused remote UPDATE_AND_CREATE_TOPIC created the topic")
	}
	wantRefused(t, "remote config", invoke(t, c, rmq.UpdateBrokerConfig, nil, []byte("brokerPermission=2")), "accepted only from loopback")
	wantOK(t, invoke(t, c, rmq.SendMessage, sendExt("PG", "orders", 0, 0, ""), []byte("x")))
	wantOK(t, invoke(t, c, rmq.GetBrokerRuntimeInfo, nil, nil))
	if resp := invoke(t, c, 9999, nil, nil); resp.Code != rmq.RequestCodeNotSupported {
		t.Fatalf("unknown code with ACL off: %d %q", resp.Code, resp.Remark)
	}

	open := startBroker(t, func(o *broker.Options) {
		o.ListenAddr = net.JoinHostPort(ip, "0")
		o.Auth.AllowRemoteAdmin = true
	})
	wantOK(t, invoke(t, dialBroker(t, open.Addr(), nil), rmq.UpdateAndCreateTopic, createTopicExt("remote-new"), nil))
}

// nonLoopbackIP is an address of this machine that is not loopback; the
// test is skipped on a machine without one.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address")
	return ""
}

// TestACLRemotingGoSecurityToken: rocketmq-client-go sends its
// SecurityToken without signing it; such a request is accepted when it
// says it comes from a Go client, and refused from any other language
// (the front end hands the request's language to the guard).
func TestACLRemotingGoSecurityToken(t *testing.T) {
	b := aclBroker(t)
	c := dialBroker(t, b.Addr(), nil)
	ext := map[string]string{auth.FieldAccessKey: aclNobody.AccessKey}
	ext[auth.FieldSignature] = auth.SignRemoting(ext, nil, aclNobody.SecretKey)
	ext[auth.FieldSecurityToken] = "token"
	call := func(lang string) *rmq.Command {
		req := rmq.NewRequest(rmq.GetBrokerRuntimeInfo, maps.Clone(ext), nil)
		req.Language = lang
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	wantOK(t, call("GO"))
	wantRefused(t, "Java client with an unsigned token", call("JAVA"), "signature check failed")
}
