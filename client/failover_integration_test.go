package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
	"github.com/bolide-mq/bolide/internal/faultproxy"
	"github.com/bolide-mq/bolide/internal/testutil"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// failoverEnv is one broker group, a master and a slave (id 1), whose
// master reaches the NameServer through a proxy: cutting it before the
// master stops leaves the dead master in the routes, as a kill -9 does.
type failoverEnv struct {
	*env
	nsProxy       *faultproxy.Proxy
	master, slave string
	topic         string
}

func startFailoverEnv(t *testing.T) *failoverEnv {
	t.Helper()
	fe := &failoverEnv{}
	e := startEnvWith(t, cluster.Options{Broker: func(o *broker.Options) {
		fastReplication(o)
		p, err := faultproxy.New("127.0.0.1:0", o.NameServers[0], zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		p.Start()
		t.Cleanup(func() { _ = p.Close() })
		fe.nsProxy = p
		o.NameServers = []string{p.Addr()}
	}})
	fe.env = e
	fe.topic = e.topic(4)
	fe.master = e.c.Broker(0).Addr()
	fe.slave = e.c.StartSlave(0, 1, func(o *broker.Options) { o.NameServers = e.ns }).Broker().Addr()
	return fe
}

// waitCaughtUp waits until the slave holds the master's whole CommitLog.
func (fe *failoverEnv) waitCaughtUp() {
	fe.t.Helper()
	ctx := context.Background()
	fe.waitFor(30*time.Second, "the slave caught up", func() error {
		ms, err := fe.admin.ReplicationStatus(ctx, fe.master)
		if err != nil {
			return err
		}
		ss, err := fe.admin.ReplicationStatus(ctx, fe.slave)
		if err != nil {
			return err
		}
		if ss.State != "REPLICATING" || ss.CommitLogMaxOffset != ms.CommitLogMaxOffset {
			return fmt.Errorf("slave %s at %d, master at %d", ss.State, ss.CommitLogMaxOffset, ms.CommitLogMaxOffset)
		}
		return nil
	})
}

// kill stops the master without its unregistration reaching the
// NameServer, which keeps routing to it.
func (fe *failoverEnv) kill() {
	fe.t.Helper()
	fe.nsProxy.Refuse(true)
	fe.nsProxy.Cut()
	fe.c.StopBroker(0)
}

// promote makes the slave the master (the manual promotion) and waits until
// the NameServer routes the group to it.
func (fe *failoverEnv) promote() {
	fe.t.Helper()
	ctx := context.Background()
	if _, err := fe.admin.Promote(ctx, fe.slave, "broker-a", 0); err != nil {
		fe.t.Fatal(err)
	}
	fe.waitFor(10*time.Second, "the route names the new master", func() error {
		r, err := fe.admin.Route(ctx, fe.topic)
		if err != nil {
			return err
		}
		if len(r.Brokers) != 1 || r.Brokers[0].MasterAddr() != fe.slave {
			return fmt.Errorf("route %+v", r.Brokers)
		}
		return nil
	})
}

// storedOn checks that res was stored on the broker at addr.
func (fe *failoverEnv) storedOn(res *SendResult, addr, body string) {
	fe.t.Helper()
	// The route's master serves the lookup once it dispatched the message.
	fe.waitFor(10*time.Second, "the message on the new master", func() error {
		m, err := fe.admin.ViewMessageAt(context.Background(), res.Queue(fe.topic), res.QueueOffset)
		if err != nil {
			return err
		}
		if m.MsgID != res.MsgID || string(m.Body) != body {
			fe.t.Fatalf("message %s at %s: %+v", res.MsgID, res.Queue(fe.topic), m)
		}
		return nil
	})
	if st, err := fe.admin.ReplicationStatus(context.Background(), addr); err != nil || st.Role != "MASTER" ||
		st.CommitLogMaxOffset <= res.CommitLogOffset {
		fe.t.Fatalf("%s after the send: %+v, %v", addr, st, err)
	}
}

// noRefresh is a route refresh interval no test reaches: a producer that
// finds the new master found it through the stale mark of a failed send.
const noRefresh = time.Hour

// TestSendAfterKillAndPromotionUsesFreshRoute: the master dies while the
// NameServer still routes to it (as after kill -9) and the slave is
// promoted; the producer's cached route names the dead master and its
// periodic refresh is an hour away, yet the next send succeeds on the new
// master: the failed attempt marks the route stale and the retry fetches
// it.
func TestSendAfterKillAndPromotionUsesFreshRoute(t *testing.T) {
	fe := startFailoverEnv(t)
	p := fe.producer(WithRouteRefreshInterval(noRefresh))
	fe.sendN(p, fe.topic, 10, nil)
	fe.waitCaughtUp()

	fe.kill()
	if r, err := fe.admin.Route(context.Background(), fe.topic); err != nil || r.Brokers[0].MasterAddr() != fe.master {
		t.Fatalf("the killed master left the route: %+v, %v", r, err)
	}
	fe.promote()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 5 {
		body := fmt.Sprint("after-", i)
		res, err := p.Send(ctx, &Message{Topic: fe.topic, Body: []byte(body)})
		if err != nil {
			t.Fatalf("send %d after the promotion: %v", i, err)
		}
		fe.storedOn(res, fe.slave, body)
	}
}

// TestSendToFencedMasterRetriesOnNewMaster: the slave is promoted while
// the master runs; the master, refused by the NameServer, fences itself and
// answers NOT_MASTER. A producer whose cached route still names it retries
// at once on the route it fetches, and stores on the new master.
func TestSendToFencedMasterRetriesOnNewMaster(t *testing.T) {
	fe := startFailoverEnv(t)
	p := fe.producer(WithRouteRefreshInterval(noRefresh))
	once := fe.producer(WithRouteRefreshInterval(noRefresh), WithSendRetries(0))
	fe.sendN(p, fe.topic, 10, nil)
	fe.sendN(once, fe.topic, 1, nil)
	fe.waitCaughtUp()

	fe.promote()
	ctx := context.Background()
	fe.waitFor(10*time.Second, "the old master fenced", func() error {
		st, err := fe.admin.ReplicationStatus(ctx, fe.master)
		if err != nil {
			return err
		}
		if st.Role != "FENCED" {
			return fmt.Errorf("old master is %s", st.Role)
		}
		return nil
	})
	// A producer without retries meets NOT_MASTER once, and its next send
	// goes to the new master.
	if _, err := once.Send(ctx, &Message{Topic: fe.topic, Body: []byte("x")}); !errors.Is(err, ErrNotMaster) {
		t.Fatalf("send to the fenced master: %v", err)
	}
	if res, err := once.Send(ctx, &Message{Topic: fe.topic, Body: []byte("y")}); err != nil {
		t.Fatalf("send after NOT_MASTER: %v", err)
	} else {
		fe.storedOn(res, fe.slave, "y")
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for i := range 5 {
		body := fmt.Sprint("after-", i)
		res, err := p.Send(sctx, &Message{Topic: fe.topic, Body: []byte(body)})
		if err != nil {
			t.Fatalf("send %d after the promotion: %v", i, err)
		}
		fe.storedOn(res, fe.slave, body)
	}
}

// TestSendDuringFailoverWaitsForNewMaster: the master stops (and leaves
// the routes: the group has no master); a send issued then, with retries
// enough, keeps fetching the route and succeeds once the slave is
// promoted. With no retry left, a send to a group without a master fails
// with ErrServiceNotAvailable (and ErrNoRoute).
func TestSendDuringFailoverWaitsForNewMaster(t *testing.T) {
	fe := startFailoverEnv(t)
	p := fe.producer(WithRouteRefreshInterval(noRefresh), WithSendRetries(12))
	once := fe.producer(WithRouteRefreshInterval(noRefresh), WithSendRetries(0))
	fe.sendN(p, fe.topic, 10, nil)
	fe.sendN(once, fe.topic, 1, nil)
	fe.waitCaughtUp()

	fe.c.StopBroker(0) // unregisters: the group has no master
	ctx := context.Background()
	fe.waitFor(10*time.Second, "the master gone from the route", func() error {
		r, err := fe.admin.Route(ctx, fe.topic)
		if err != nil {
			return err
		}
		if m := r.Brokers[0].MasterAddr(); m != "" {
			return fmt.Errorf("master %s still routed", m)
		}
		return nil
	})
	// The first attempt fails on the dead master; no retry.
	if _, err := once.Send(ctx, &Message{Topic: fe.topic, Body: []byte("x")}); !errors.Is(err, ErrBrokerUnreachable) {
		t.Fatalf("send to the stopped master: %v", err)
	}
	// Its route was fetched again: the group has no master.
	if _, err := once.Send(ctx, &Message{Topic: fe.topic, Body: []byte("x")}); !errors.Is(err, ErrServiceNotAvailable) ||
		!errors.Is(err, ErrNoRoute) {
		t.Fatalf("send to a group without master: %v", err)
	}

	type outcome struct {
		res *SendResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := p.Send(sctx, &Message{Topic: fe.topic, Body: []byte("during")})
		done <- outcome{res, err}
	}()
	// The send meets the dead master, then the group without a master.
	testutil.WaitFor(t, 10*time.Second, "the send retrying", func() error {
		select {
		case o := <-done:
			t.Fatalf("the send ended before the promotion: %+v, %v", o.res, o.err)
		default:
		}
		if ri := p.b.routes.cached(fe.topic); ri == nil || ri.brokers["broker-a"].MasterAddr() != "" {
			return errors.New("the producer's route still names the old master")
		}
		return nil
	})
	fe.promote()
	o := <-done
	if o.err != nil {
		t.Fatalf("send during the failover: %v", o.err)
	}
	fe.storedOn(o.res, fe.slave, "during")
	if _, err := once.Send(ctx, &Message{Topic: fe.topic, Body: []byte("after")}); err != nil {
		t.Fatalf("send after the promotion: %v", err)
	}
}

// TestFailoverErrorClassification: the errors a failover produces are
// retried, and make the next attempt look for the new master.
func TestFailoverErrorClassification(t *testing.T) {
	noMaster := (&routeInfo{route: &TopicRoute{Topic: "t", Queues: []QueueData{{BrokerName: "a", WriteQueues: 4, ReadQueues: 4,
		Perm: PermReadWrite}}}, brokers: map[string]BrokerData{"a": {BrokerName: "a", Addrs: map[int64]string{1: "s:1"}}}}).noWritableQueue()
	readOnly := (&routeInfo{route: &TopicRoute{Topic: "t", Queues: []QueueData{{BrokerName: "a", WriteQueues: 4, ReadQueues: 4,
		Perm: PermRead}}}, brokers: map[string]BrokerData{"a": {BrokerName: "a", Addrs: map[int64]string{0: "m:1"}}}}).noWritableQueue()
	for _, c := range []struct {
		name                string
		err                 error
		retryable, failover bool
	}{
		{"not master", codeErr(pb.Code_NOT_MASTER, "not master"), true, true},
		{"in-sync replicas", codeErr(pb.Code_IN_SYNC_REPLICAS_NOT_ENOUGH, "1 of 2"), true, true},
		{"unreachable", &unreachableError{addr: "m:1", err: status.Error(codes.Unavailable, "connection refused")}, true, true},
		{"no master", noMaster, true, true},
		{"read-only topic", readOnly, false, false},
		{"busy", codeErr(pb.Code_SYSTEM_BUSY, "busy"), true, false},
		{"illegal", codeErr(pb.Code_MESSAGE_ILLEGAL, "bad"), false, false},
	} {
		if got := retryableSend(c.err); got != c.retryable {
			t.Errorf("%s: retryable %v, want %v (%v)", c.name, got, c.retryable, c.err)
		}
		if got := failoverError(c.err); got != c.failover {
			t.Errorf("%s: failover %v, want %v (%v)", c.name, got, c.failover, c.err)
		}
	}
	if !errors.Is(noMaster, ErrServiceNotAvailable) || !errors.Is(noMaster, ErrNoRoute) || errors.Is(readOnly, ErrServiceNotAvailable) {
		t.Fatalf("no master: %v; read-only: %v", noMaster, readOnly)
	}
}
