package v1wire

import (
	"reflect"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/offsets"
	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/broker/topic"
)

func TestMetadataRoundTrip(t *testing.T) {
	md := replication.Metadata{
		Topics:      []topic.Config{{Name: "orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: topic.PermReadWrite, Attributes: map[string]string{"a": "b"}}},
		DataVersion: topic.DataVersion{Timestamp: 1700000000000, Counter: 7},
		Offsets:     offsets.Map{offsets.Key("orders", "g"): {0: 10, 3: 12}},
		Epoch:       2,
		Delay:       &delay.MasterProgress{Levels: map[int]int64{1: 5, 2: 0}, Timer: &delay.Progress{Location: 99, DueBeforeMS: 1234}, Need: 4096},
		Groups: []subgroup.Config{subgroup.Default("plain"), {GroupName: "fifo", ConsumeMessageOrderly: true, RetryMaxTimes: 2,
			Attributes: map[string]string{"k": "v"}, GroupRetryPolicy: subgroup.Customized([]time.Duration{time.Second, time.Minute})},
			{GroupName: "exp", GroupRetryPolicy: &subgroup.RetryPolicy{Type: subgroup.PolicyExponential,
				Exponential: &subgroup.ExponentialPolicy{Initial: 1000, Max: 60000, Multiplier: 3}}}},
		GroupVersion: topic.DataVersion{Timestamp: 1700000000001, Counter: 3},
	}
	if got := MetadataFromProto(MetadataToProto(md)); !reflect.DeepEqual(got, md) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, md)
	}
	// A master that does not deliver sends no delay progress.
	md.Delay = nil
	if got := MetadataFromProto(MetadataToProto(md)); got.Delay != nil {
		t.Fatalf("delay progress from nothing: %+v", got.Delay)
	}
	// A master that sends no group table: the slave keeps its own.
	md.Groups, md.GroupVersion = nil, topic.DataVersion{}
	if got := MetadataFromProto(MetadataToProto(md)); got.Groups != nil || got.GroupVersion != (topic.DataVersion{}) {
		t.Fatalf("groups from nothing: %+v %+v", got.Groups, got.GroupVersion)
	}
	req := replication.MetadataRequest{BrokerName: "broker-a", BrokerID: 1, LocalOffsets: offsets.Map{offsets.Key("orders", "g"): {1: 3}}}
	if got := MetadataRequestFromProto(MetadataRequestToProto(req)); !reflect.DeepEqual(got, req) {
		t.Fatalf("request round trip: %+v", got)
	}
}
