package v1wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// A group's configuration without consume_enable consumes (RocketMQ's
// default); only an explicit false stops it, and the value survives the
// round trip.
func TestGroupConsumeEnable(t *testing.T) {
	for _, tc := range []struct {
		in   *bool
		want bool
	}{{nil, true}, {proto.Bool(true), true}, {proto.Bool(false), false}} {
		c := GroupFromProto(&pb.SubscriptionGroupConfig{Group: "g", ConsumeEnable: tc.in})
		if c.ConsumeEnable != tc.want {
			t.Errorf("consume_enable %v: ConsumeEnable %v, want %v", tc.in, c.ConsumeEnable, tc.want)
		}
		if back := GroupToProto(c); back.ConsumeEnable == nil || *back.ConsumeEnable != tc.want {
			t.Errorf("consume_enable %v: back to proto %v", tc.in, back.ConsumeEnable)
		}
	}
}
