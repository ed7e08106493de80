package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestPullSQL92: a pull with an SQL92 condition returns exactly the
// matching messages of a mixed stream, in order, and its offsets move past
// the others; a condition that does not parse is refused with where it
// fails; a broker with the property filter off refuses SQL92.
func TestPullSQL92(t *testing.T) {
	b, c := testBroker(t)
	createTopic(t, c, "mixed", 1)
	const n = 600
	var want []string
	for i := range n {
		region := []string{"eu", "us", "ap"}[i%3]
		amount := strconv.Itoa(i % 250)
		m := &pb.Message{Topic: "mixed", Body: []byte(fmt.Sprint("m", i)), Properties: map[string]string{
			"region": region, "amount": amount, message.PropertyTags: []string{"paid", "refund"}[i%2]}}
		if i%7 == 0 {
			delete(m.Properties, "amount") // missing: never matches a comparison
		}
		sendOK(t, c, m)
		if region == "eu" && i%7 != 0 && i%250 > 100 && i%2 == 0 {
			want = append(want, fmt.Sprint("m", i))
		}
	}
	waitQueue(t, c, "mixed", 0, n)
	ctx := context.Background()
	var got []string
	off := int64(0)
	for off < n {
		res, err := b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "mixed", Offset: off, MaxMessages: 32, CommitOffset: -1,
			ExpressionType: "sql92", TagExpression: "region = 'eu' AND amount > 100 AND TAGS IN ('paid')"})
		if err != nil {
			t.Fatal(err)
		}
		if res.NextOffset <= off {
			t.Fatalf("pull at %d did not advance (status %d, next %d)", off, res.Status, res.NextOffset)
		}
		for _, rec := range res.Records {
			m, err := message.Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(m.Body))
		}
		off = res.NextOffset
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("SQL92 pull returned %d messages, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}

	_, err := b.Pull(ctx, broker.PullRequest{Topic: "mixed", CommitOffset: -1, ExpressionType: "SQL92", TagExpression: "region = 'eu' AND"})
	if !errors.Is(err, errcode.ErrSubscriptionParse) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("a broken condition: %v; want SUBSCRIPTION_PARSE_FAILED with the position", err)
	}
	if _, err := b.Pull(ctx, broker.PullRequest{Topic: "mixed", CommitOffset: -1, ExpressionType: "XPATH", TagExpression: "a"}); !errors.Is(err, errcode.ErrSubscriptionParse) {
		t.Fatalf("an unknown expression type: %v", err)
	}

	off2, c2 := testBroker(t, func(o *broker.Options) { o.EnablePropertyFilter = false })
	createTopic(t, c2, "mixed", 1)
	if _, err := off2.Pull(ctx, broker.PullRequest{Topic: "mixed", CommitOffset: -1, ExpressionType: "SQL92", TagExpression: "a = 1"}); !errors.Is(err, errcode.ErrNoPermission) {
		t.Fatalf("SQL92 on a broker with the property filter off: %v", err)
	}
	if err := off2.CheckFilter("TAG", "a || b"); err != nil {
		t.Fatalf("a tag expression on that broker: %v", err)
	}
}
