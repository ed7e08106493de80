package broker

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/broker/remote"
	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// registrar registers the broker with every NameServer at start, every
// RegisterInterval and whenever its topics change, and unregisters it on a
// clean stop.
type registrar struct {
	b       *Broker
	conns   map[string]*grpc.ClientConn
	now     chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	lastErr map[string]error
	// onRegistered is called with each NameServer's answer (membership
	// joins the gossip pool through it).
	onRegistered func(ns string, resp *pb.RegisterBrokerResponse)
}

func newRegistrar(b *Broker) *registrar {
	ctx, cancel := context.WithCancel(context.Background())
	return &registrar{b: b, conns: make(map[string]*grpc.ClientConn), now: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, lastErr: make(map[string]error)}
}

func (r *registrar) start() error {
	for _, ns := range r.b.opts.NameServers {
		conn, err := grpc.NewClient(ns, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		r.conns[ns] = conn
	}
	r.registerAll() // before Start returns: routes exist as soon as we serve
	r.wg.Add(1)
	go r.loop()
	return nil
}

// trigger asks for a registration now (topics changed).
func (r *registrar) trigger() {
	select {
	case r.now <- struct{}{}:
	default:
	}
}

func (r *registrar) loop() {
	defer r.wg.Done()
	t := time.NewTicker(r.b.opts.RegisterInterval)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		case <-r.now:
		}
		r.registerAll()
	}
}

func (r *registrar) request() *pb.RegisterBrokerRequest {
	b := r.b
	topics := b.topics.all()
	req := &pb.RegisterBrokerRequest{
		Cluster:            b.opts.Cluster,
		BrokerName:         b.opts.BrokerName,
		BrokerAddr:         b.addr,
		BrokerId:           b.brokerID(),
		HaAddr:             b.HAAddr(),
		Epoch:              b.Epoch(),
		Version:            b.opts.Version,
		HeartbeatTimeoutMs: b.opts.BrokerTimeout.Milliseconds(),
		GossipAddr:         b.gossipAddr(),
	}
	dv := b.topics.dataVersion()
	req.DataVersion = &pb.DataVersion{Timestamp: dv.Timestamp, Counter: dv.Counter}
	for i := range topics {
		req.Topics = append(req.Topics, remote.TopicToProto(&topics[i]))
	}
	return req
}

// registerAll registers with every NameServer in parallel.
func (r *registrar) registerAll() {
	req := r.request()
	var wg sync.WaitGroup
	for ns, conn := range r.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.ctx, r.b.opts.RegisterTimeout)
			defer cancel()
			resp, err := pb.NewNameServerClient(conn).RegisterBroker(ctx, req)
			if err == nil {
				err = wire.FromStatus(resp.GetStatus())
			}
			r.b.repl.OnRegistered(ns, req.BrokerId, replication.NameServerAnswer{
				MasterAddr: resp.GetMasterAddr(), MasterHAAddr: resp.GetMasterHaAddr()}, err)
			r.mu.Lock()
			prev := r.lastErr[ns]
			r.lastErr[ns] = err
			r.mu.Unlock()
			switch {
			case err != nil && prev == nil:
				r.b.log.Warn("register with name server failed", zap.String("nameServer", ns), zap.Error(err))
			case err == nil && prev != nil:
				r.b.log.Info("registered with name server again", zap.String("nameServer", ns))
			}
			if err == nil && r.onRegistered != nil {
				r.onRegistered(ns, resp)
			}
		}()
	}
	wg.Wait()
}

// registered reports whether the last registration with every NameServer
// succeeded.
func (r *registrar) registered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ns := range r.conns {
		if err, ok := r.lastErr[ns]; !ok || err != nil {
			return false
		}
	}
	return true
}

// stop ends the loop and unregisters from every NameServer.
func (r *registrar) stop() {
	r.cancel()
	r.wg.Wait()
	req := &pb.UnregisterBrokerRequest{Cluster: r.b.opts.Cluster, BrokerName: r.b.opts.BrokerName,
		BrokerAddr: r.b.addr, BrokerId: r.b.brokerID()}
	var wg sync.WaitGroup
	for ns, conn := range r.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), r.b.opts.RegisterTimeout)
			defer cancel()
			if _, err := pb.NewNameServerClient(conn).UnregisterBroker(ctx, req); err != nil {
				r.b.log.Warn("unregister from name server failed", zap.String("nameServer", ns), zap.Error(err))
			}
			_ = conn.Close()
		}()
	}
	wg.Wait()
}
