package nameserver

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func TestMetricsAndReadiness(t *testing.T) {
	o := DefaultOptions()
	o.ListenAddr = "127.0.0.1:0"
	o.GossipAddr = "off"
	s, err := New(o, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err == nil {
		t.Fatal("ready before Start")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err != nil {
		t.Fatalf("not ready after Start: %v", err)
	}
	c := dial(t, s.Addr())
	resp, err := c.RegisterBroker(ctx(t), registerReq("broker-a", 0, "127.0.0.1:10911", "TopicA", "TopicB"))
	if err != nil || wire.FromStatus(resp.Status) != nil {
		t.Fatalf("register: %v %v", err, resp.GetStatus())
	}
	if _, err := c.GetRoute(ctx(t), &pb.GetRouteRequest{Topic: "NoSuchTopic"}); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	gauge := func(name string) float64 {
		var v float64
		for _, m := range byName[name].GetMetric() {
			v += m.GetGauge().GetValue()
		}
		return v
	}
	if gauge("bolide_nameserver_brokers") != 1 || gauge("bolide_nameserver_broker_groups") != 1 || gauge("bolide_nameserver_topics") != 2 {
		t.Errorf("route gauges: brokers %v groups %v topics %v", gauge("bolide_nameserver_brokers"),
			gauge("bolide_nameserver_broker_groups"), gauge("bolide_nameserver_topics"))
	}
	calls := map[string]uint64{}
	for _, m := range byName["rocketmq_rpc_latency"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		calls[l["request_code"]+" "+l["response_code"]] += m.GetHistogram().GetSampleCount()
	}
	if calls["RegisterBroker OK"] != 1 || calls["GetRoute TOPIC_NOT_EXIST"] != 1 {
		t.Errorf("rpc latency samples %v", calls)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err == nil {
		t.Fatal("ready after Close")
	}
}
