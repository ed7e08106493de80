package grpcapi

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/errcode"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// services are the bolide.v1 services New registers.
var services = []grpc.ServiceDesc{
	pb.Broker_ServiceDesc, pb.Delay_ServiceDesc, pb.BrokerHA_ServiceDesc,
	pb.Transaction_ServiceDesc, pb.DeadLetter_ServiceDesc, pb.Acl_ServiceDesc,
}

// TestMethodTable: every method of every bolide.v1 service the broker
// serves is classified, streams as streams, and the table names nothing
// else; a data rule yields needs for an empty request.
func TestMethodTable(t *testing.T) {
	seen := map[string]bool{}
	for _, sd := range services {
		for _, m := range sd.Methods {
			full := "/" + sd.ServiceName + "/" + m.MethodName
			seen[full] = true
			r, ok := methods[full]
			if !ok {
				t.Errorf("%s is not in the method table", full)
				continue
			}
			if r.class == classStream || r.class == 0 {
				t.Errorf("%s: unary method with class %v", full, r.class)
			}
			if r.class == classData && r.needs == nil {
				t.Errorf("%s: data without needs", full)
			}
			if (r.class == classAdmin || r.class == classInternal) && r.what == "" {
				t.Errorf("%s: %v without a name", full, r.class)
			}
		}
		for _, s := range sd.Streams {
			full := "/" + sd.ServiceName + "/" + s.StreamName
			seen[full] = true
			if r := methods[full]; r.class != classStream {
				t.Errorf("%s: stream with class %v", full, r.class)
			}
		}
	}
	for m := range methods {
		if !seen[m] {
			t.Errorf("the table names %s, which the broker does not serve", m)
		}
	}
}

// fakePeer is ctx of a call from addr.
func fakePeer(addr string) context.Context {
	a, _ := net.ResolveTCPAddr("tcp", addr)
	return peer.NewContext(context.Background(), &peer.Peer{Addr: a})
}

// TestACLOffClassification: with ACL off (the guard's zero config), every
// administrative method is refused from a remote address and allowed from
// loopback; the others are allowed from anywhere without credentials.
func TestACLOffClassification(t *testing.T) {
	g, err := auth.New(auth.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &authorizer{g: g}
	for m, r := range methods {
		_, err := a.check(fakePeer("192.0.2.7:4000"), m, nil)
		if r.class == classAdmin {
			if errcode.Of(err) != errcode.NoPermission {
				t.Errorf("%s from a remote address with ACL off: %v, want NO_PERMISSION", m, err)
			}
		} else if err != nil {
			t.Errorf("%s (%v) from a remote address with ACL off: %v", m, r.class, err)
		}
		if _, err := a.check(fakePeer("127.0.0.1:4000"), m, nil); err != nil {
			t.Errorf("%s from loopback with ACL off: %v", m, err)
		}
	}
	g, err = auth.New(auth.Config{AllowRemoteAdmin: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a = &authorizer{g: g}
	if _, err := a.check(fakePeer("192.0.2.7:4000"), pb.Broker_CreateTopic_FullMethodName, nil); err != nil {
		t.Errorf("CreateTopic from a remote address with --allow-remote-admin: %v", err)
	}
}
