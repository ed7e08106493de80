package controller

import (
	"strings"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the controller's Prometheus figures, collected through
// Controller.Collector (the NameServer adds it to its own collector).
type metrics struct {
	elections *prometheus.CounterVec // reason
	unclean   prometheus.Counter
	leader    prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		elections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bolide_controller_elections_total",
			Help: "Master elections committed by this controller while leader, by reason (first, master_dead, master_restart, no_master, admin).",
		}, []string{"reason"}),
		unclean: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bolide_controller_unclean_elections_total",
			Help: "Elections of a replica outside the sync state set (acknowledged messages it lacked are lost).",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bolide_controller_leader",
			Help: "1 while this controller is the Raft leader, else 0.",
		}),
	}
}

// Collector is the controller's Prometheus collector.
func (c *Controller) Collector() prometheus.Collector { return c.metrics }

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.elections.Describe(ch)
	m.unclean.Describe(ch)
	m.leader.Describe(ch)
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.elections.Collect(ch)
	m.unclean.Collect(ch)
	m.leader.Collect(ch)
}

// stateName is a Raft state as DescribeController reports it.
func stateName(s raft.RaftState) string {
	switch s {
	case raft.Leader, raft.Follower, raft.Candidate:
		return strings.ToLower(s.String())
	}
	return "unknown"
}
