package cluster

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
)

// TestDuplicateBrokerIdentityRefused: a second broker started with the
// same broker name and id as a live one, on another address, is refused by
// the NameServer; it logs the NameServer's message at ERROR once, counts
// the refusal and is not ready; the routes keep the first broker, which
// keeps serving. Once the first stops, the second registers.
func TestDuplicateBrokerIdentityRefused(t *testing.T) {
	c := Start(t, Options{})
	c.CreateTopic("ident", 2)
	first := c.Broker(0)
	routes := c.NameServers[0].Routes()

	opts := first.Options()
	opts.ListenAddr = "127.0.0.1:0"
	dir := filepath.Join(t.TempDir(), "second")
	opts.StoreDir = dir
	opts.Store = broker.DefaultOptions(dir).Store
	opts.Replication.HAListenAddr = "127.0.0.1:0"
	core, logs := observer.New(zapcore.InfoLevel)
	second, err := server.New(opts, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	if second.Addr() == first.Addr() {
		t.Fatal("same address")
	}

	// Several registration rounds (500 ms each): the second is refused
	// every time, the routes keep the first.
	time.Sleep(2 * time.Second)
	err = second.Ready()
	if err == nil || !strings.Contains(err.Error(), "held by a live broker at "+first.Addr()) ||
		!strings.Contains(err.Error(), second.Addr()) {
		t.Fatalf("second broker's readiness: %v", err)
	}
	if lb, ok := routes.Holder("broker-a", 0); !ok || lb.Addr != first.Addr() {
		t.Fatalf("holder after the refusals: %+v %v", lb, ok)
	}
	rt, err := routes.Route("ident")
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.Brokers[0].Addrs; len(got) != 1 || got[0] != first.Addr() {
		t.Fatalf("route of ident: %v", got)
	}
	if err := first.Ready(); err != nil {
		t.Fatalf("first broker not ready: %v", err)
	}
	if _, err := sendOne(brokerClient(t, first.Addr()), "ident", 0, "still serving"); err != nil {
		t.Fatalf("first broker does not serve: %v", err)
	}
	refusals := logs.FilterMessage("name server refused the registration").All()
	if len(refusals) != 1 || refusals[0].Level != zapcore.ErrorLevel {
		t.Fatalf("refusal logged %d times (want once, at ERROR)", len(refusals))
	}
	if msg := fmt.Sprint(refusals[0].ContextMap()["error"]); !strings.Contains(msg, first.Addr()) ||
		!strings.Contains(msg, "--broker-id") {
		t.Fatalf("logged refusal %q", msg)
	}
	if n := countMetric(t, second, "bolide_broker_register_refused_total"); n < 2 {
		t.Fatalf("refusals counted: %v", n)
	}

	// The first stops: the second takes the identity over.
	c.StopBroker(0)
	if err := Poll(10*time.Second, func() error {
		if lb, ok := routes.Holder("broker-a", 0); !ok || lb.Addr != second.Addr() {
			return fmt.Errorf("holder %+v %v", lb, ok)
		}
		return second.Ready()
	}); err != nil {
		t.Fatalf("second broker after the first stopped: %v", err)
	}
}

// countMetric reads an unlabelled metric from a broker's collector.
func countMetric(t *testing.T, s *server.Server, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
