package nameserver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Metrics. The RPC histogram is RocketMQ's rocketmq_rpc_latency (in
// milliseconds, by request and response code): protocol_type "grpc" labels
// calls with their method and wire code names, "remoting" with RocketMQ's
// numeric codes ("unsupported" for a request code not served), "frame"
// route lookups over the frame protocol (request_code GetRoute). The route
// table figures are bolide_nameserver_* and are read when Prometheus
// scrapes.

var nsLatencyBucketsMS = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000}

// serverMetrics is updated by the RPC interceptor. The zero value is ready.
type serverMetrics struct {
	once       sync.Once
	rpcLatency *prometheus.HistogramVec // protocol_type, request_code, response_code
}

func (m *serverMetrics) init() *serverMetrics {
	m.once.Do(func() {
		m.rpcLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rocketmq_rpc_latency",
			Help:    "Latency of NameServer calls in milliseconds, by request and response code.",
			Buckets: nsLatencyBucketsMS,
		}, []string{"protocol_type", "request_code", "response_code"})
	})
	return m
}

// statusCarrier is every NameServer response: it carries a wire status.
type statusCarrier interface{ GetStatus() *pb.Status }

// v5StatusCarrier is every RocketMQ 5 access-point response (v5.go).
type v5StatusCarrier interface{ GetStatus() *v2.Status }

// observeRPC is a unary interceptor timing every call.
func (s *Server) observeRPC(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	code := wire.CodeOf(err).String()
	if err == nil {
		switch sc := resp.(type) {
		case statusCarrier:
			code = sc.GetStatus().GetCode().String()
		case v5StatusCarrier:
			code = sc.GetStatus().GetCode().String()
		}
	}
	s.observe("grpc", wire.MethodName(info.FullMethod), code, start)
	return resp, err
}

// observe records a call to method over protocol, answered with code,
// that began at start.
func (s *Server) observe(protocol, method, code string, start time.Time) {
	s.metrics.init().rpcLatency.WithLabelValues(protocol, method, code).
		Observe(float64(time.Since(start)) / float64(time.Millisecond))
}

// Ready reports nil while the server serves, else why not.
func (s *Server) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("stopping")
	case !s.started:
		return errors.New("not started")
	}
	return nil
}

// Collector is the NameServer's Prometheus collector.
func (s *Server) Collector() prometheus.Collector { return &collector{s: s} }

type collector struct{ s *Server }

var (
	descBrokers = prometheus.NewDesc("bolide_nameserver_brokers",
		"Live broker instances (masters and slaves) in the route table, by cluster.", []string{"cluster"}, nil)
	descGroups = prometheus.NewDesc("bolide_nameserver_broker_groups",
		"Broker groups (broker names) in the route table.", nil, nil)
	descTopics = prometheus.NewDesc("bolide_nameserver_topics",
		"Topics some broker group serves.", nil, nil)
	descMembers = prometheus.NewDesc("bolide_nameserver_gossip_members",
		"Nodes in the gossip pool, this one included (absent when membership is off).", nil, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.s.metrics.init().rpcLatency.Describe(ch)
	for _, d := range []*prometheus.Desc{descBrokers, descGroups, descTopics, descMembers} {
		ch <- d
	}
	if c.s.ctl != nil {
		c.s.ctl.Collector().Describe(ch)
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.s.metrics.init().rpcLatency.Collect(ch)
	if c.s.ctl != nil {
		c.s.ctl.Collector().Collect(ch)
	}
	ci := c.s.routes.ClusterInfo()
	perCluster := map[string]int{}
	for name := range ci.Clusters {
		perCluster[name] = 0
	}
	for _, lb := range ci.Live {
		perCluster[lb.Cluster]++
	}
	for cl, n := range perCluster {
		ch <- prometheus.MustNewConstMetric(descBrokers, prometheus.GaugeValue, float64(n), cl)
	}
	ch <- prometheus.MustNewConstMetric(descGroups, prometheus.GaugeValue, float64(len(ci.Brokers)))
	ch <- prometheus.MustNewConstMetric(descTopics, prometheus.GaugeValue, float64(len(c.s.routes.Topics())))
	if n := c.s.members.Load(); n != nil {
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(len(n.Members())))
	}
}
