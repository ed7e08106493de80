package broker

import (
	"testing"
	"time"
)

func TestClientRegistrySubscription(t *testing.T) {
	r := newClientRegistry()
	if _, ok := r.subscription("g", "T"); ok {
		t.Fatal("an unknown group has a subscription")
	}
	s := &Session{notices: make(chan Notice, noticeBuffer)}
	r.heartbeat(s, Heartbeat{ClientID: "c1", Consumers: []ConsumerData{{Group: "g",
		Subscriptions: []Subscription{{Topic: "T", Expression: "a||b"}, {Topic: "%RETRY%g", Expression: "*"}}}}}, time.Now())
	if sub, ok := r.subscription("g", "T"); !ok || sub.Expression != "a||b" {
		t.Fatalf("subscription of T: %+v %v", sub, ok)
	}
	if _, ok := r.subscription("g", "U"); ok {
		t.Fatal("a topic the group does not subscribe to has a subscription")
	}
	// A later heartbeat replaces the expression, and its type.
	r.heartbeat(s, Heartbeat{ClientID: "c1", Consumers: []ConsumerData{{Group: "g",
		Subscriptions: []Subscription{{Topic: "T", Expression: "a > 1", Type: ExprSQL92}}}}}, time.Now())
	if sub, _ := r.subscription("g", "T"); sub.Expression != "a > 1" || sub.Type != ExprSQL92 {
		t.Fatalf("subscription of T after the second heartbeat: %+v", sub)
	}
}
