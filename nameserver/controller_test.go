package nameserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/controller"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

func testControllerOptions(t *testing.T) *controller.Options {
	co := controller.DefaultOptions()
	co.RaftListen = "" // derived: listen port + 2, 0 here
	co.Dir = t.TempDir()
	co.BrokerTimeout = time.Second
	co.Lease = 600 * time.Millisecond
	co.RaftHeartbeat = 300 * time.Millisecond
	co.RaftElectionTimeout = 300 * time.Millisecond
	return &co
}

// The embedded controller serves on the NameServer's port: a broker's
// heartbeat stream elects it, DescribeController shows it, and Close does
// not wait for the open stream.
func TestEmbeddedController(t *testing.T) {
	s := startServer(t, func(o *Options) {
		o.GossipAddr = GossipOff
		o.Controller = testControllerOptions(t)
	})
	if s.Controller() == nil {
		t.Fatal("no controller")
	}
	cc, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	cl := pb.NewControllerClient(cc)
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stream pb.Controller_HeartbeatClient
	var beat *pb.ControllerBeat
	waitFor(t, 10*time.Second, "elected through the NameServer's port", func() error {
		if stream == nil {
			st, err := cl.Heartbeat(sctx)
			if err != nil {
				return err
			}
			stream = st
		}
		if err := stream.Send(&pb.BrokerBeat{Cluster: "c", BrokerName: "b", ReplicaId: 1, Addr: "x:1", Role: "STARTING", Seq: 1}); err != nil {
			stream = nil
			return err
		}
		for {
			b, err := stream.Recv()
			if err != nil {
				stream = nil
				return err
			}
			beat = b
			if b.GetSeq() == 1 {
				break
			}
		}
		if beat.GetGroup().GetMasterId() != 1 || beat.GetGroup().GetMasterEpoch() != 1 {
			return fmt.Errorf("answer %v", beat)
		}
		return nil
	})
	d, err := cl.DescribeController(ctx(t), &pb.DescribeControllerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetSelfId() != "n0" || d.GetLeaderId() != "n0" || len(d.GetGroups()) != 1 || len(d.GetPeers()) != 1 {
		t.Fatalf("describe: %v", d)
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Close held by the heartbeat stream")
	}
}

func TestControllerOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	o.ListenAddr = "127.0.0.1:0"
	o.Controller = &controller.Options{}
	if err := o.Validate(); err == nil {
		t.Fatal("empty controller options accepted")
	}
}

func TestControllerMetrics(t *testing.T) {
	s := startServer(t, func(o *Options) {
		o.GossipAddr = GossipOff
		o.Controller = testControllerOptions(t)
		o.Controller.InMemory = true
		o.Controller.Dir = ""
	})
	waitFor(t, 10*time.Second, "bolide_controller_leader 1", func() error {
		reg := prometheus.NewPedanticRegistry()
		if err := reg.Register(s.Collector()); err != nil {
			return err
		}
		mfs, err := reg.Gather()
		if err != nil {
			return err
		}
		for _, mf := range mfs {
			if mf.GetName() == "bolide_controller_leader" && mf.GetMetric()[0].GetGauge().GetValue() == 1 {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
}

// The Raft port is derived past gossip (+ 1) and the admin listener (+ 2).
func TestControllerRaftPortDerived(t *testing.T) {
	o := DefaultOptions()
	o.ListenAddr = "10.0.0.1:9876"
	o.Controller = &controller.Options{}
	if got := o.controllerOptions().RaftListen; got != "10.0.0.1:9879" {
		t.Fatalf("derived %q", got)
	}
	o.Controller.RaftListen = "10.0.0.1:7000"
	if got := o.controllerOptions().RaftListen; got != "10.0.0.1:7000" {
		t.Fatalf("explicit %q", got)
	}
}
