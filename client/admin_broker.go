package client

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// ClusterInfo is what a NameServer knows about brokers.
type ClusterInfo struct {
	// Brokers by broker name; Clusters maps a cluster to its broker names.
	Brokers  map[string]BrokerData
	Clusters map[string][]string
	Live     []BrokerLive
}

// BrokerLive is one registered broker.
type BrokerLive struct {
	Cluster, BrokerName     string
	BrokerID                int64
	Addr, HAAddr, AdminAddr string
	Version                 string
	LastUpdate              time.Time
	TopicCount              int32
}

// targets returns the broker groups a topic is created on.
func (ci *ClusterInfo) targets(cluster string, names []string) ([]BrokerData, error) {
	var out []BrokerData
	switch {
	case len(names) > 0:
		for _, n := range names {
			bd, ok := ci.Brokers[n]
			if !ok {
				return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "broker %q is not registered", n)
			}
			out = append(out, bd)
		}
	case cluster != "":
		bns, ok := ci.Clusters[cluster]
		if !ok {
			return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "cluster %q is not registered", cluster)
		}
		for _, n := range bns {
			if bd, ok := ci.Brokers[n]; ok {
				out = append(out, bd)
			}
		}
	default:
		out = ci.allBrokers()
	}
	if len(out) == 0 {
		return nil, codeErr(pb.Code_BROKER_NOT_EXIST, "no broker registered")
	}
	return out, nil
}

func (ci *ClusterInfo) allBrokers() []BrokerData {
	out := make([]BrokerData, 0, len(ci.Brokers))
	for _, bd := range ci.Brokers {
		out = append(out, bd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BrokerName < out[j].BrokerName })
	return out
}

// brokerName returns the group an address belongs to ("" if unknown).
func (ci *ClusterInfo) brokerName(addr string) string {
	for name, bd := range ci.Brokers {
		for _, a := range bd.Addrs {
			if a == addr {
				return name
			}
		}
	}
	return ""
}

// ClusterInfo returns the brokers and clusters a NameServer knows.
func (a *Admin) ClusterInfo(ctx context.Context) (*ClusterInfo, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var ci *ClusterInfo
	err := a.b.ns.call(ctx, func(ctx context.Context, c pb.NameServerClient) error {
		resp, err := c.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
		if err != nil {
			return err
		}
		if err := wire.FromStatus(resp.GetStatus()); err != nil {
			return err
		}
		ci = &ClusterInfo{Brokers: make(map[string]BrokerData), Clusters: make(map[string][]string)}
		for name, bd := range resp.GetBrokers() {
			d := brokerDataFromProto(bd)
			if d.BrokerName == "" {
				d.BrokerName = name
			}
			ci.Brokers[name] = d
		}
		for name, cb := range resp.GetClusters() {
			names := append([]string(nil), cb.GetBrokerNames()...)
			sort.Strings(names)
			ci.Clusters[name] = names
		}
		for _, l := range resp.GetLive() {
			ci.Live = append(ci.Live, BrokerLive{
				Cluster: l.GetCluster(), BrokerName: l.GetBrokerName(), BrokerID: l.GetBrokerId(),
				Addr: l.GetBrokerAddr(), HAAddr: l.GetHaAddr(), AdminAddr: l.GetAdminAddr(), Version: l.GetVersion(),
				LastUpdate: time.UnixMilli(l.GetLastUpdateMs()), TopicCount: l.GetTopicCount(),
			})
		}
		sort.Slice(ci.Live, func(i, j int) bool {
			x, y := ci.Live[i], ci.Live[j]
			return x.BrokerName < y.BrokerName || x.BrokerName == y.BrokerName && x.BrokerID < y.BrokerID
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	return ci, nil
}

// BrokerInfo describes one broker.
type BrokerInfo struct {
	Cluster, BrokerName string
	BrokerID            int64
	Addr, Version       string
	Role, FlushMode     string
	CommitLogMinOffset  int64
	CommitLogMaxOffset  int64
	DispatchBehindBytes int64
	DiskUsedRatio       float64
	StoreBytes          int64
	StartTime           time.Time
}

// BrokerInfo asks the broker at addr about itself.
func (a *Admin) BrokerInfo(ctx context.Context, addr string) (*BrokerInfo, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var r *pb.GetBrokerInfoResponse
	err := a.brokerCall(ctx, addr, func(ctx context.Context, c pb.BrokerClient) (*pb.Status, error) {
		var err error
		r, err = c.GetBrokerInfo(ctx, &pb.GetBrokerInfoRequest{})
		return r.GetStatus(), err
	})
	if err != nil {
		return nil, err
	}
	return &BrokerInfo{
		Cluster: r.GetCluster(), BrokerName: r.GetBrokerName(), BrokerID: r.GetBrokerId(), Addr: r.GetAddr(),
		Version: r.GetVersion(), Role: r.GetRole(), FlushMode: r.GetFlushMode(),
		CommitLogMinOffset: r.GetCommitLogMinOffset(), CommitLogMaxOffset: r.GetCommitLogMaxOffset(),
		DispatchBehindBytes: r.GetDispatchBehindBytes(), DiskUsedRatio: r.GetDiskUsedRatio(),
		StoreBytes: r.GetStoreBytes(), StartTime: time.UnixMilli(r.GetStartTimeMs()),
	}, nil
}
