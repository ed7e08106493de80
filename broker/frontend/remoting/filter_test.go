package remoting_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// sqlHeartbeat is a Go client's HEART_BEAT of a push consumer subscribed
// with an SQL92 selector (its subscription data keeps no tags).
func sqlHeartbeat(clientID, group, topic, cond string) []byte {
	return fmt.Appendf(nil, `{"clientID":%q,"consumerDataSet":[{"groupName":%q,"consumeType":"CONSUME_PASSIVELY",`+
		`"messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"topic":%q,"subString":%q,`+
		`"tagsSet":null,"codeSet":null,"subVersion":1795993978200681467,"expressionType":"SQL92"}]}]}`,
		clientID, group, topic, cond)
}

// TestPullSQL92: a pull filters by an SQL92 condition over the properties
// (TAGS the tag), whether the request carries it (the Java client's lite
// pull consumer, the Go pull consumer), only its heartbeat does (the push
// consumers: Java names the type, Go always says TAG) or the Go push
// consumer posts it labelled TAG; the next offset passes the messages that
// do not match.
func TestPullSQL92(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	for i := range 10 {
		region := "us"
		if i%2 == 0 {
			region = "eu"
		}
		cb.send(t, "T", 0, "m"+strconv.Itoa(i), "tag"+strconv.Itoa(i%3), "region", region, "amount", strconv.Itoa(i*10))
	}
	cb.waitQueue(t, "T", 0, 10)
	const cond = "region = 'eu' AND amount >= 20 AND TAGS <> 'tag2'"
	want := []string{"m4", "m6"} // m2 and m8 have tag2, m0 amount 0

	bodies := func(name string, resp *rmq.Command) []string {
		t.Helper()
		if resp.Code != rmq.Success {
			t.Fatalf("%s: code %d %s", name, resp.Code, resp.Remark)
		}
		if got := resp.String("nextBeginOffset"); got != "10" {
			t.Errorf("%s: nextBeginOffset %s, want 10", name, got)
		}
		var out []string
		for _, m := range decodePullBody(t, resp.Body) {
			out = append(out, string(m.body))
		}
		return out
	}
	check := func(name string, resp *rmq.Command) {
		t.Helper()
		if got := bodies(name, resp); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	check("request's SQL92", cb.invoke(t, rmq.PullMessage,
		pullExt("CG", "T", 0, 0, "sysFlag", "6", "subscription", cond, "expressionType", "SQL92"), nil))
	check("lower-case type", cb.invoke(t, rmq.PullMessage,
		pullExt("CG", "T", 0, 0, "sysFlag", "6", "subscription", cond, "expressionType", "sql92"), nil))

	if resp := cb.invoke(t, rmq.HeartBeat, nil, sqlHeartbeat("10.0.0.9@1", "CG", "T", cond)); resp.Code != rmq.Success {
		t.Fatalf("heartbeat: %d %s", resp.Code, resp.Remark)
	}
	check("registered, Java (SQL92, no subscription)", cb.invoke(t, rmq.PullMessage,
		pullExt("CG", "T", 0, 0, "sysFlag", "2", "subscription", "", "expressionType", "SQL92"), nil))
	check("registered, Go (TAG, no subscription)", cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 0, "sysFlag", "2", "subscription", ""), nil))
	check("posted by Go labelled TAG", cb.invoke(t, rmq.PullMessage,
		pullExt("CG", "T", 0, 0, "sysFlag", "6", "subscription", cond), nil))

	// The consumer group's admin view names the type.
	resp := cb.invoke(t, rmq.GetConsumerConnectionList, map[string]string{"consumerGroup": "CG"}, nil)
	if resp.Code != rmq.Success || !strings.Contains(string(resp.Body), `"expressionType":"SQL92"`) {
		t.Errorf("consumer connection list: %d %s", resp.Code, resp.Body)
	}

	// Nothing matches: the pull moves past every message at once.
	resp = cb.invoke(t, rmq.PullMessage, pullExt("CG2", "T", 0, 0, "sysFlag", "6", "subscription", "region = 'nowhere'", "expressionType", "SQL92"), nil)
	if resp.Code != rmq.PullRetryImmediately || resp.String("nextBeginOffset") != "10" {
		t.Errorf("no match: code %d %s, next %s", resp.Code, resp.Remark, resp.String("nextBeginOffset"))
	}
	// A Java push consumer whose heartbeat this broker has not seen.
	resp = cb.invoke(t, rmq.PullMessage, pullExt("CG3", "T", 0, 0, "sysFlag", "2", "subscription", "", "expressionType", "SQL92"), nil)
	if resp.Code != rmq.SubscriptionParseFailed || resp.String("nextBeginOffset") != "0" {
		t.Errorf("unregistered SQL92: code %d %s", resp.Code, resp.Remark)
	}
}

// TestPullSQL92Disabled: a broker with enable-property-filter off refuses
// SQL92 pulls (NO_PERMISSION, as the core) and CHECK_CLIENT_CONFIG with
// SYSTEM_ERROR (as RocketMQ's broker); tag pulls go on.
func TestPullSQL92Disabled(t *testing.T) {
	srv := startBroker(t, func(o *broker.Options) { o.EnablePropertyFilter = false })
	cb := &consumerBroker{b: srv.Broker, conn: dialBroker(t, srv.Addr(), nil), addr: srv.Addr()}
	cb.createTopic(t, "T", 1)
	cb.send(t, "T", 0, "x", "a", "region", "eu")
	cb.waitQueue(t, "T", 0, 1)
	resp := cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 0, "sysFlag", "6", "subscription", "region = 'eu'", "expressionType", "SQL92"), nil)
	if resp.Code != rmq.NoPermission {
		t.Errorf("SQL92 pull: code %d %s", resp.Code, resp.Remark)
	}
	if resp := cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 0, "sysFlag", "6", "subscription", "a"), nil); resp.Code != rmq.Success {
		t.Errorf("tag pull: code %d %s", resp.Code, resp.Remark)
	}
	resp = cb.invoke(t, rmq.CheckClientConfig, nil, checkClientBody("SQL92", "region = 'eu'"))
	if resp.Code != rmq.SystemError {
		t.Errorf("check client config: code %d %s", resp.Code, resp.Remark)
	}
}

func checkClientBody(exprType, expr string) []byte {
	return fmt.Appendf(nil, `{"clientId":"10.0.0.9@1","group":"CG","subscriptionData":{"classFilterMode":false,`+
		`"codeSet":[],"expressionType":%q,"subString":%q,"subVersion":1733050000000,"tagsSet":[],"topic":"T"}}`, exprType, expr)
}

// TestCheckClientConfig: what a Java push consumer asks before it
// subscribes with SQL92.
func TestCheckClientConfig(t *testing.T) {
	cb := startConsumerBroker(t)
	for _, tc := range []struct {
		name string
		body []byte
		code int32
		in   string // in the remark
	}{
		{"no body", nil, rmq.Success, ""},
		{"no subscription", []byte(`{"clientId":"c","group":"CG"}`), rmq.Success, ""},
		{"tag", checkClientBody("TAG", "a || b"), rmq.Success, ""},
		{"SQL92", checkClientBody("SQL92", "region = 'eu' AND amount > 100"), rmq.Success, ""},
		{"SQL92 that does not parse", checkClientBody("SQL92", "region = 'eu' AND"), rmq.SubscriptionParseFailed, "offset 17"},
		{"SQL92 not a condition", checkClientBody("SQL92", "'eu'"), rmq.SubscriptionParseFailed, "offset 0"},
		{"unknown type", checkClientBody("XPATH", "/a"), rmq.SubscriptionParseFailed, "XPATH"},
		{"not JSON", []byte("{"), rmq.InvalidParameter, ""},
	} {
		resp := cb.invoke(t, rmq.CheckClientConfig, nil, tc.body)
		if resp.Code != tc.code || !strings.Contains(resp.Remark, tc.in) {
			t.Errorf("%s: code %d %q, want %d with %q", tc.name, resp.Code, resp.Remark, tc.code, tc.in)
		}
	}
}
