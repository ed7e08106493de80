package grpcv5

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/filter"
)

func TestPollTime(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name      string
		deadline  time.Duration // 0: none
		requested *durationpb.Duration
		want      time.Duration
		ok        bool
	}{
		{"push consumer: 20s asked, 23s left", 23 * time.Second, durationpb.New(20 * time.Second), 20 * time.Second, true},
		{"asked above the cap", 60 * time.Second, durationpb.New(40 * time.Second), maxPollTime, true},
		{"asked beyond the deadline", 5 * time.Second, durationpb.New(20 * time.Second), 3500 * time.Millisecond, true},
		{"simple consumer: await 5s + 3s", 8 * time.Second, nil, 6500 * time.Millisecond, true},
		{"simple consumer: await 1s + 3s", 4 * time.Second, nil, 2500 * time.Millisecond, true},
		{"little left: half of it", 1200 * time.Millisecond, nil, 600 * time.Millisecond, true},
		{"zero asked: at once", 10 * time.Second, durationpb.New(0), 0, true},
		{"negative asked: at once", 10 * time.Second, durationpb.New(-time.Second), 0, true},
		{"no deadline, nothing asked", 0, nil, maxPollTime, true},
		{"no deadline, 3s asked", 0, durationpb.New(3 * time.Second), 3 * time.Second, true},
		{"under 1s left", 900 * time.Millisecond, nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(tc.deadline))
				defer cancel()
			}
			got, ok := pollTime(ctx, tc.requested, now)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("pollTime = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestReceiveFilter(t *testing.T) {
	check := func(typ, expr string) error {
		if typ != broker.ExprSQL92 {
			t.Fatalf("the broker was asked to check a %s expression", typ)
		}
		_, err := filter.Compile(expr)
		return err
	}
	for _, tc := range []struct {
		f    *v2.FilterExpression
		want string
		code v2.Code
	}{
		{nil, "*", v2.Code_OK},
		{&v2.FilterExpression{Type: v2.FilterType_TAG, Expression: ""}, "*", v2.Code_OK},
		{&v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"}, "*", v2.Code_OK},
		{&v2.FilterExpression{Type: v2.FilterType_TAG, Expression: " a || b "}, "a||b", v2.Code_OK},
		{&v2.FilterExpression{Type: v2.FilterType_FILTER_TYPE_UNSPECIFIED, Expression: "a"}, "a", v2.Code_OK},
		{&v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "a | b"}, "", v2.Code_ILLEGAL_FILTER_EXPRESSION},
		{&v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "* || a"}, "", v2.Code_ILLEGAL_FILTER_EXPRESSION},
		{&v2.FilterExpression{Type: v2.FilterType_SQL, Expression: "a > 1 AND region = 'eu'"}, "a > 1 AND region = 'eu'", v2.Code_OK},
		{&v2.FilterExpression{Type: v2.FilterType_SQL, Expression: "a >"}, "", v2.Code_ILLEGAL_FILTER_EXPRESSION},
		{&v2.FilterExpression{Type: 99, Expression: "a"}, "", v2.Code_ILLEGAL_FILTER_EXPRESSION},
	} {
		typ, got, st := receiveFilter(tc.f, check)
		code := v2.Code_OK
		if st != nil {
			code = st.GetCode()
		}
		wantType := broker.ExprTag
		if tc.f.GetType() == v2.FilterType_SQL {
			wantType = broker.ExprSQL92
		}
		if got != tc.want || code != tc.code || (code == v2.Code_OK && typ != wantType) {
			t.Errorf("receiveFilter(%v) = %s %q, %v; want %q, %v", tc.f, typ, got, code, tc.want, tc.code)
		}
	}
}

func TestReceiveInvisible(t *testing.T) {
	for _, tc := range []struct {
		d  *durationpb.Duration
		ok bool
	}{
		{nil, false},
		{durationpb.New(9 * time.Second), false},
		{durationpb.New(10 * time.Second), true},
		{durationpb.New(12 * time.Hour), true},
		{durationpb.New(12*time.Hour + time.Second), false},
		{&durationpb.Duration{Seconds: 30, Nanos: -5}, false},
	} {
		_, st := receiveInvisible(&v2.ReceiveMessageRequest{InvisibleDuration: tc.d})
		if (st == nil) != tc.ok {
			t.Errorf("invisible %v: status %v, want ok=%v", tc.d, st, tc.ok)
		}
		if st != nil && st.GetCode() != v2.Code_ILLEGAL_INVISIBLE_TIME {
			t.Errorf("invisible %v: code %v", tc.d, st.GetCode())
		}
	}
}
