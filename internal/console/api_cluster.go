package console

import (
	"context"
	"net/http"
	"sync"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/client"
)

// parallel bounds the concurrent SDK calls one request makes.
const parallel = 8

// each runs fn for 0..n-1, at most parallel at a time.
func each(n int, fn func(i int)) {
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}

func zapReq(r *http.Request, err error) []zap.Field {
	return []zap.Field{zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err)}
}

type whoamiJSON struct {
	Daemon      string   `json:"daemon"`
	Name        string   `json:"name"`
	Addr        string   `json:"addr"`
	Version     string   `json:"version"`
	ACL         bool     `json:"acl"`
	User        string   `json:"user"`
	NameServers []string `json:"nameservers"`
}

func (c *Console) whoami(_ context.Context, cl *call) (any, error) {
	return whoamiJSON{Daemon: c.opts.Daemon, Name: c.opts.Name, Addr: c.opts.Addr, Version: c.opts.Version,
		ACL: c.opts.Guard.Enabled(), User: cl.user.accessKey, NameServers: nonNil(c.opts.NameServers)}, nil
}

type clusterJSON struct {
	NameServers []string            `json:"nameservers"`
	Clusters    map[string][]string `json:"clusters"`
	Brokers     []brokerJSON        `json:"brokers"`
	Controller  *controllerJSON     `json:"controller"`
}

type brokerJSON struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	BrokerID    int64            `json:"brokerId"`
	Addr        string           `json:"addr"`
	AdminAddr   string           `json:"adminAddr"`
	Version     string           `json:"version"`
	Role        string           `json:"role"`
	Epoch       int64            `json:"epoch"`
	LastUpdate  jsTime           `json:"lastUpdate"`
	Alive       bool             `json:"alive"`
	Writable    bool             `json:"writable"`
	Runtime     *runtimeJSON     `json:"runtime"`
	Replication *replicationJSON `json:"replication"`
	Error       string           `json:"error"`
}

type runtimeJSON struct {
	StartTime           jsTime            `json:"startTime"`
	PutMessagesTotal    int64             `json:"putMessagesTotal"`
	GetMessagesTotal    int64             `json:"getMessagesTotal"`
	PutBytesTotal       int64             `json:"putBytesTotal"`
	GetBytesTotal       int64             `json:"getBytesTotal"`
	PutTPS              float64           `json:"putTps"`
	GetTPS              float64           `json:"getTps"`
	CommitLogMinOffset  int64             `json:"commitLogMinOffset"`
	CommitLogMaxOffset  int64             `json:"commitLogMaxOffset"`
	DispatchBehindBytes int64             `json:"dispatchBehindBytes"`
	StoreBytes          int64             `json:"storeBytes"`
	DiskUsedRatio       float64           `json:"diskUsedRatio"`
	DiskTotalBytes      int64             `json:"diskTotalBytes"`
	DiskFreeBytes       int64             `json:"diskFreeBytes"`
	Topics              int64             `json:"topics"`
	Queues              int64             `json:"queues"`
	Groups              int64             `json:"groups"`
	ConsumerConnections int64             `json:"consumerConnections"`
	ProducerConnections int64             `json:"producerConnections"`
	HeapBytes           int64             `json:"heapBytes"`
	RSSBytes            int64             `json:"rssBytes"`
	Goroutines          int64             `json:"goroutines"`
	BrokerPermission    int32             `json:"brokerPermission"`
	Extra               map[string]string `json:"extra"`
}

func runtimeOf(r *client.BrokerRuntime) *runtimeJSON {
	extra := r.Extra
	if extra == nil {
		extra = map[string]string{}
	}
	return &runtimeJSON{
		StartTime: jsTime(r.StartTime), PutMessagesTotal: r.PutMessagesTotal, GetMessagesTotal: r.GetMessagesTotal,
		PutBytesTotal: r.PutBytesTotal, GetBytesTotal: r.GetBytesTotal, PutTPS: r.PutTPS, GetTPS: r.GetTPS,
		CommitLogMinOffset: r.CommitLogMinOffset, CommitLogMaxOffset: r.CommitLogMaxOffset,
		DispatchBehindBytes: r.DispatchBehindBytes, StoreBytes: r.StoreBytes, DiskUsedRatio: r.DiskUsedRatio,
		DiskTotalBytes: r.DiskTotalBytes, DiskFreeBytes: r.DiskFreeBytes, Topics: r.Topics, Queues: r.Queues,
		Groups: r.Groups, ConsumerConnections: r.ConsumerConnections, ProducerConnections: r.ProducerConnections,
		HeapBytes: r.HeapBytes, RSSBytes: r.RSSBytes, Goroutines: r.Goroutines, BrokerPermission: int32(r.Permission),
		Extra: extra,
	}
}

type replicationJSON struct {
	Mode         string      `json:"mode"`
	LagBytes     int64       `json:"lagBytes"`
	InSyncSlaves int32       `json:"inSyncSlaves"`
	Slaves       []slaveJSON `json:"slaves"`
}

type slaveJSON struct {
	BrokerID int64 `json:"brokerId"`
	LagBytes int64 `json:"lagBytes"`
	InSync   bool  `json:"inSync"`
}

func replicationOf(r *client.ReplicationStatus) *replicationJSON {
	out := &replicationJSON{Mode: r.Mode, LagBytes: r.LagBytes, InSyncSlaves: r.InSyncSlaves, Slaves: []slaveJSON{}}
	for _, s := range r.Slaves {
		out.Slaves = append(out.Slaves, slaveJSON{BrokerID: s.BrokerID, LagBytes: s.LagBytes, InSync: s.InSync})
		out.LagBytes = max(out.LagBytes, s.LagBytes)
	}
	return out
}

type controllerJSON struct {
	Leader         string                `json:"leader"`
	LeaderRaftAddr string                `json:"leaderRaftAddr"`
	Term           uint64                `json:"term"`
	CommitIndex    uint64                `json:"commitIndex"`
	Peers          []controllerPeerJSON  `json:"peers"`
	Groups         []controllerGroupJSON `json:"groups"`
}

type controllerPeerJSON struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	State    string `json:"state"`
}

type controllerGroupJSON struct {
	Cluster           string  `json:"cluster"`
	BrokerName        string  `json:"brokerName"`
	MasterID          int64   `json:"masterId"`
	MasterAddr        string  `json:"masterAddr"`
	MasterEpoch       int64   `json:"masterEpoch"`
	SyncStateSet      []int64 `json:"syncStateSet"`
	SyncStateSetEpoch int64   `json:"syncStateSetEpoch"`
}

func controllerOf(s *client.ControllerStatus) *controllerJSON {
	out := &controllerJSON{Leader: s.Leader, LeaderRaftAddr: s.LeaderRaftAddr, Term: s.Term, CommitIndex: s.CommitIndex,
		Peers: []controllerPeerJSON{}, Groups: []controllerGroupJSON{}}
	for _, p := range s.Peers {
		out.Peers = append(out.Peers, controllerPeerJSON{ID: p.ID, RaftAddr: p.RaftAddr, State: p.State})
	}
	for _, g := range s.Groups {
		out.Groups = append(out.Groups, controllerGroupJSON{Cluster: g.Cluster, BrokerName: g.BrokerName,
			MasterID: g.MasterID, MasterAddr: g.MasterAddr, MasterEpoch: g.MasterEpoch,
			SyncStateSet: nonNil(g.SyncStateSet), SyncStateSetEpoch: g.SyncStateSetEpoch})
	}
	return out
}

// cluster: ClusterInfo, then each member's runtime and replication
// status (bounded parallelism), and the controller when there is one.
func (c *Console) cluster(ctx context.Context, cl *call) (any, error) {
	out := clusterJSON{NameServers: nonNil(c.opts.NameServers), Clusters: map[string][]string{}, Brokers: []brokerJSON{}}
	if len(c.opts.NameServers) == 0 {
		// A broker on its own: itself.
		b := brokerJSON{BrokerName: c.opts.Name, Addr: c.opts.Addr, Writable: true}
		c.fillBroker(ctx, cl.admin, &b)
		if b.Cluster != "" {
			out.Clusters[b.Cluster] = []string{b.BrokerName}
		}
		out.Brokers = append(out.Brokers, b)
		return out, nil
	}
	var ctrl *client.ControllerStatus
	var ctrlErr error
	var wg sync.WaitGroup
	wg.Go(func() { ctrl, ctrlErr = cl.admin.DescribeController(ctx) })
	ci, err := cl.admin.ClusterInfo(ctx)
	if err != nil {
		wg.Wait()
		return nil, err
	}
	for name, bns := range ci.Clusters {
		out.Clusters[name] = nonNil(bns)
	}
	out.Brokers = make([]brokerJSON, len(ci.Live))
	for i, l := range ci.Live {
		out.Brokers[i] = brokerJSON{Cluster: l.Cluster, BrokerName: l.BrokerName, BrokerID: l.BrokerID, Addr: l.Addr,
			AdminAddr: l.AdminAddr, Version: l.Version, LastUpdate: jsTime(l.LastUpdate), Writable: true}
	}
	each(len(out.Brokers), func(i int) { c.fillBroker(ctx, cl.admin, &out.Brokers[i]) })
	wg.Wait()
	switch {
	case ctrlErr == nil:
		out.Controller = controllerOf(ctrl)
	case !isNoController(ctrlErr):
		c.log.Debug("console: controller status", zap.Error(ctrlErr))
	}
	return out, nil
}

// fillBroker asks the broker at b.Addr for its runtime figures and its
// replication status.
func (c *Console) fillBroker(ctx context.Context, a *client.Admin, b *brokerJSON) {
	var rt *client.BrokerRuntime
	var rs *client.ReplicationStatus
	var rtErr, rsErr error
	var wg sync.WaitGroup
	wg.Go(func() { rt, rtErr = a.BrokerRuntime(ctx, b.Addr) })
	rs, rsErr = a.ReplicationStatus(ctx, b.Addr)
	wg.Wait()
	if rtErr == nil {
		b.Alive = true
		b.Runtime = runtimeOf(rt)
		b.Writable = rt.Writable
		b.Role = rt.Role
		if b.Cluster == "" {
			b.Cluster, b.BrokerName, b.BrokerID, b.Version = rt.Cluster, rt.BrokerName, rt.BrokerID, rt.Version
		}
	}
	if rsErr == nil {
		b.Alive = true
		b.Replication = replicationOf(rs)
		b.Role = rs.Role
		b.Epoch = rs.Epoch
	}
	switch {
	case rtErr != nil && rsErr != nil:
		b.Error = rtErr.Error()
	case rtErr != nil:
		b.Error = rtErr.Error()
	case rsErr != nil:
		b.Error = rsErr.Error()
	}
}
