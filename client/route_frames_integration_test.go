package client

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/nameserver"
)

// nsLookups is how many route lookups ns answered over protocol ("frame"
// or "grpc"), from its rocketmq_rpc_latency histogram.
func nsLookups(t *testing.T, ns *nameserver.Server, protocol string) uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(ns.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() != "rocketmq_rpc_latency" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["protocol_type"] == protocol && labels["request_code"] == "GetRoute" {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// TestRouteLookupsOverFrames: a producer asks the NameServer for its
// topic's route over the frame protocol, none over gRPC; against a
// NameServer without it (NoFrames: it closes a frame connection on the
// magic, as one older than the protocol does) it asks over gRPC instead
// and sends all the same.
func TestRouteLookupsOverFrames(t *testing.T) {
	for _, frames := range []bool{true, false} {
		name := "frames"
		if !frames {
			name = "no-frames"
		}
		t.Run(name, func(t *testing.T) {
			e := startEnvWith(t, cluster.Options{NameServer: func(o *nameserver.Options) { o.NoFrames = !frames }})
			topic := e.topic(4)
			ns := e.c.NameServers[0]
			framed0, grpc0 := nsLookups(t, ns, "frame"), nsLookups(t, ns, "grpc")
			p := e.producer()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := p.Send(ctx, &Message{Topic: topic, Body: []byte("x")}); err != nil {
				t.Fatalf("send: %v", err)
			}
			framed, grpc := nsLookups(t, ns, "frame")-framed0, nsLookups(t, ns, "grpc")-grpc0
			if frames && (framed == 0 || grpc != 0) {
				t.Fatalf("lookups over frames %d, over gRPC %d; want frames only", framed, grpc)
			}
			if !frames && (framed != 0 || grpc == 0) {
				t.Fatalf("lookups over frames %d, over gRPC %d; want gRPC only", framed, grpc)
			}
			// A client whose lookups go over frames makes no gRPC
			// connection to the NameServer.
			p.b.pool.mu.Lock()
			_, made := p.b.pool.conns[e.ns[0]]
			p.b.pool.mu.Unlock()
			if made == frames {
				t.Fatalf("gRPC connection to the NameServer made: %v", made)
			}
		})
	}
}
