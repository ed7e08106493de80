package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// gather collects a broker's metrics through a pedantic registry, which
// fails on a metric that was not described or is inconsistent.
func gather(t *testing.T, b *server.Server) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(b.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// value is the sample of a family whose labels include want: the counter,
// gauge or histogram count.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum, found
}

func TestMetricsMasterAndSlave(t *testing.T) {
	master, mc := testBroker(t, haOpts(broker.ReplicationAsync))
	slave, _ := testBroker(t, haOpts(broker.ReplicationAsync), slaveOf(master, 1))
	createTopic(t, mc, "MetricsTopic", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		if err := send(ctx, mc, "MetricsTopic", 1, strings.Repeat("x", 10+i)); err != nil {
			t.Fatal(err)
		}
	}
	// An update replaces the topic's entry in the table; its sends are
	// counted in the same series.
	if resp, err := mc.CreateTopic(ctx, &pb.CreateTopicRequest{Update: true,
		Topic: &pb.TopicConfig{Name: "MetricsTopic", ReadQueueNums: 4, WriteQueueNums: 4}}); err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("update topic: %v %v", err, resp.GetStatus())
	}
	if err := send(ctx, mc, "MetricsTopic", 3, strings.Repeat("x", 13)); err != nil {
		t.Fatal(err)
	}
	// A second topic is counted on its own, and a refused send under its
	// code.
	createTopic(t, mc, "MetricsOther", 1)
	for range 2 {
		if err := send(ctx, mc, "MetricsOther", 0, "other"); err != nil {
			t.Fatal(err)
		}
	}
	if err := send(ctx, mc, "MetricsNoSuchTopic", 0, "lost"); err == nil {
		t.Fatal("a send to a topic that does not exist was taken")
	}
	waitQueue(t, mc, "MetricsTopic", 1, 3)
	resp, err := mc.Pull(ctx, &pb.PullRequest{Group: "metrics-group", Topic: "MetricsTopic", QueueId: 1, MaxMessages: 2, CommitOffset: 1})
	if err != nil || wire.FromStatus(resp.Status) != nil || len(resp.Records) != 2 {
		t.Fatalf("pull: %v %v %d", err, resp.GetStatus(), len(resp.GetRecords()))
	}
	waitCaughtUp(t, master, slave)
	if err := master.Store().Flush(); err != nil {
		t.Fatal(err)
	}

	m := gather(t, master)
	if v, ok := value(t, m, "bolide_storage_flush_seconds", nil); !ok || v < 1 {
		t.Errorf("flush latency histogram has %v samples (found %v)", v, ok)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"rocketmq_messages_in_total", map[string]string{"topic": "MetricsTopic"}, 4},
		{"rocketmq_throughput_in_total", map[string]string{"topic": "MetricsTopic"}, 10 + 11 + 12 + 13},
		{"rocketmq_messages_out_total", map[string]string{"topic": "MetricsTopic", "consumer_group": "metrics-group"}, 2},
		{"rocketmq_messages_in_total", map[string]string{"topic": "MetricsOther"}, 2},
		{"rocketmq_throughput_in_total", map[string]string{"topic": "MetricsOther"}, 2 * 5},
		{"rocketmq_rpc_latency", map[string]string{"request_code": "send", "response_code": "OK"}, 6},
		{"rocketmq_rpc_latency", map[string]string{"request_code": "send", "response_code": "TOPIC_NOT_EXIST"}, 1},
		{"rocketmq_rpc_latency", map[string]string{"request_code": "pull", "is_long_polling": "false"}, 1},
		{"rocketmq_message_size", nil, 6},
		{"rocketmq_consumer_lag_messages", map[string]string{"topic": "MetricsTopic", "consumer_group": "metrics-group"}, 2},
		{"rocketmq_consumer_group_number", nil, 1},
		{"bolide_broker_role", map[string]string{"role": "MASTER"}, 1},
		{"bolide_broker_ready", nil, 0}, // no NameServer
	} {
		if v, ok := value(t, m, c.name, c.labels); !ok || v != c.want {
			t.Errorf("master %s%v = %v (found %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if v, ok := value(t, m, "rocketmq_storage_size", nil); !ok || v <= 0 {
		t.Errorf("storage size %v %v", v, ok)
	}
	if _, ok := value(t, m, "bolide_replication_lag_bytes", map[string]string{"slave_id": "1"}); !ok {
		t.Error("master reports no lag for slave 1")
	}
	if _, ok := value(t, m, "bolide_delay_level_pending_messages", map[string]string{"level": "3"}); !ok {
		t.Error("no delay level gauge")
	}

	s := gather(t, slave)
	if v, ok := value(t, s, "bolide_broker_role", map[string]string{"role": "SLAVE"}); !ok || v != 1 {
		t.Errorf("slave role %v %v", v, ok)
	}
	if _, ok := value(t, s, "bolide_replication_lag_bytes", map[string]string{"slave_id": "1"}); !ok {
		t.Error("slave reports no lag")
	}
	if err := master.Ready(); err == nil || !strings.Contains(err.Error(), "name server") {
		t.Errorf("master without a NameServer: ready %v", err)
	}
}
