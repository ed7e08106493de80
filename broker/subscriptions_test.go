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
	if expr, ok := r.subscription("g", "T"); !ok || expr != "a||b" {
		t.Fatalf("subscription of T: %q %v", expr, ok)
	}
	if _, ok := r.subscription("g", "U"); ok {
		t.Fatal("a topic the group does not subscribe to has a subscription")
	}
	// A later heartbeat replaces the expression.
	r.heartbeat(s, Heartbeat{ClientID: "c1", Consumers: []ConsumerData{{Group: "g",
		Subscriptions: []Subscription{{Topic: "T", Expression: "c"}}}}}, time.Now())
	if expr, _ := r.subscription("g", "T"); expr != "c" {
		t.Fatalf("subscription of T after the second heartbeat: %q", expr)
	}
}
