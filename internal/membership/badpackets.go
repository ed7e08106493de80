package membership

import (
	"bytes"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// badKind is a kind of packet (UDP) or stream (TCP) memberlist refused.
type badKind int

const (
	badUDPShort badKind = iota
	badUDPType
	badUDPDecode
	badUDPLabel
	badUDPCrypto
	badUDPChecksum
	badTCPType
	badTCPDecode
	badTCPLabel
	numBadKinds
)

// badKinds names each kind (the metric's kind label) and lists the
// beginnings of the lines memberlist v0.7 logs for it, after
// "memberlist: " (net.go, net_transport.go).
var badKinds = [numBadKinds]struct {
	name     string
	prefixes []string
}{
	badUDPShort: {"udp_short", []string{"UDP packet too short", "missing message type byte"}},
	badUDPType:  {"udp_type", []string{"msg type (", "Message type ("}},
	badUDPDecode: {"udp_decode", []string{"Failed to decode ping request:", "Failed to decode indirect ping request:",
		"Failed to decode ack response:", "Failed to decode nack response:", "Failed to decode suspect message:",
		"Failed to decode alive message:", "Failed to decode dead message:", "Failed to decode compound request:",
		"Compound request had", "Failed to decompress payload:"}},
	badUDPLabel: {"udp_label", []string{"discarding packet with unacceptable label", "unexpected double packet label header",
		"cannot decode label; packet has been truncated", "label header cannot be empty when present"}},
	badUDPCrypto:   {"udp_crypto", []string{"Decrypt packet failed:"}},
	badUDPChecksum: {"udp_checksum", []string{"Got invalid checksum for UDP packet"}},
	badTCPType:     {"tcp_type", []string{"Received invalid msgType"}},
	badTCPDecode: {"tcp_decode", []string{"failed to receive:", "Failed to decode ping:", "Failed to read remote state:",
		"Failed to receive user message:"}},
	badTCPLabel: {"tcp_label", []string{"failed to receive and remove the stream label header:", "unexpected double stream label header",
		"discarding stream with unacceptable label"}},
}

// badKindOf reports the kind of bad packet a memberlist line (without its
// level and "memberlist: ") is about, if it is about one.
func badKindOf(line []byte) (badKind, bool) {
	for k := range badKinds {
		for _, p := range badKinds[k].prefixes {
			if bytes.HasPrefix(line, []byte(p)) {
				return badKind(k), true
			}
		}
	}
	return 0, false
}

// badPackets counts the bad packets of every node of this process (a
// daemon has one): the counter BadPacketsCollector reports.
var badPackets [numBadKinds]atomic.Int64

var badPacketsDesc = prometheus.NewDesc("bolide_gossip_bad_packets_total",
	"Packets (UDP) and streams (TCP) the gossip port refused as malformed, by kind.", []string{"kind"}, nil)

type badPacketsCollector struct{}

// BadPacketsCollector reports bolide_gossip_bad_packets_total{kind}: the
// packets and streams this process's gossip port refused, counted whether
// or not their log line was suppressed. Every kind is reported, from 0.
func BadPacketsCollector() prometheus.Collector { return badPacketsCollector{} }

func (badPacketsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- badPacketsDesc }

func (badPacketsCollector) Collect(ch chan<- prometheus.Metric) {
	for k := range badKinds {
		ch <- prometheus.MustNewConstMetric(badPacketsDesc, prometheus.CounterValue, float64(badPackets[k].Load()), badKinds[k].name)
	}
}
