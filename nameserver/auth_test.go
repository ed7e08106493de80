package nameserver

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/controller"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

var (
	v1Admin = auth.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	v1User  = auth.Credentials{AccessKey: "user-key", SecretKey: "user-secret"}
)

// aclServer starts a NameServer with ACL on (an admin and a plain user)
// and an embedded single-node controller; it returns its gRPC connection.
func aclServer(t *testing.T, enabled bool, listen string) (*Server, *grpc.ClientConn) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	err := auth.WriteFile(file, &auth.File{Accounts: []auth.Account{
		{AccessKey: v1Admin.AccessKey, SecretKey: v1Admin.SecretKey, Admin: true},
		{AccessKey: v1User.AccessKey, SecretKey: v1User.SecretKey, DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, func(o *Options) {
		o.ListenAddr = listen
		o.GossipAddr = GossipOff
		o.Auth = auth.Config{Enabled: enabled, File: file, MaxSkew: auth.DefaultMaxSkew}
		co := controller.LoopbackOptions()
		o.Controller = &co
	})
	addr := s.Addr()
	if strings.HasPrefix(addr, "0.0.0.0:") || strings.HasPrefix(addr, "[::]:") {
		_, port, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return s, cc
}

// as is a context signed by c now (none when c is empty).
func as(t *testing.T, c auth.Credentials) context.Context {
	x := ctx(t)
	if c.Empty() {
		return x
	}
	a, d := auth.NewHeader(c, time.Now())
	return metadata.AppendToOutgoingContext(x, auth.HeaderAuthorization, a, auth.HeaderDate, d)
}

func statusIs(t *testing.T, what string, st *pb.Status, err error, want pb.Code) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if st.GetCode() != want {
		t.Fatalf("%s: %v %q, want %v", what, st.GetCode(), st.GetMessage(), want)
	}
}

func registration(name string) *pb.RegisterBrokerRequest {
	return &pb.RegisterBrokerRequest{Cluster: "c1", BrokerName: name, BrokerAddr: "127.0.0.1:1" + name[len(name)-1:], BrokerId: 0,
		HeartbeatTimeoutMs: 60000, Topics: []*pb.TopicConfig{{Name: "t-" + name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}}}
}

// TestNameServerAuth: with ACL on, a registration needs the admin (the
// daemons' key): without credentials UNAUTHENTICATED, as a plain user
// NO_PERMISSION, and neither registers anything; routes and cluster
// information need an authenticated caller; deleting a topic needs an
// admin.
func TestNameServerAuth(t *testing.T) {
	_, cc := aclServer(t, true, "127.0.0.1:0")
	ns := pb.NewNameServerClient(cc)

	r, err := ns.RegisterBroker(as(t, auth.Credentials{}), registration("b1"))
	statusIs(t, "register without credentials", r.GetStatus(), err, pb.Code_UNAUTHENTICATED)
	r, err = ns.RegisterBroker(as(t, auth.Credentials{AccessKey: v1Admin.AccessKey, SecretKey: "wrong-secret"}), registration("b1"))
	statusIs(t, "register with a wrong secret", r.GetStatus(), err, pb.Code_UNAUTHENTICATED)
	r, err = ns.RegisterBroker(as(t, v1User), registration("b1"))
	statusIs(t, "register as a plain user", r.GetStatus(), err, pb.Code_NO_PERMISSION)
	ci, err := ns.GetClusterInfo(as(t, v1Admin), &pb.GetClusterInfoRequest{})
	statusIs(t, "cluster info", ci.GetStatus(), err, pb.Code_OK)
	if len(ci.Brokers) != 0 {
		t.Fatalf("refused registrations registered %v", ci.Brokers)
	}
	r, err = ns.RegisterBroker(as(t, v1Admin), registration("b1"))
	statusIs(t, "register as admin", r.GetStatus(), err, pb.Code_OK)

	ci, err = ns.GetClusterInfo(as(t, auth.Credentials{}), &pb.GetClusterInfoRequest{})
	statusIs(t, "cluster info without credentials", ci.GetStatus(), err, pb.Code_UNAUTHENTICATED)
	if len(ci.GetBrokers()) != 0 {
		t.Fatal("a refused GetClusterInfo answered brokers")
	}
	rt, err := ns.GetRoute(as(t, auth.Credentials{}), &pb.GetRouteRequest{Topic: "t-b1"})
	statusIs(t, "route without credentials", rt.GetStatus(), err, pb.Code_UNAUTHENTICATED)
	rt, err = ns.GetRoute(as(t, v1User), &pb.GetRouteRequest{Topic: "t-b1"})
	statusIs(t, "route as a user", rt.GetStatus(), err, pb.Code_OK)
	lt, err := ns.ListTopics(as(t, v1User), &pb.ListTopicsRequest{})
	statusIs(t, "topics as a user", lt.GetStatus(), err, pb.Code_OK)

	d, err := ns.DeleteTopic(as(t, v1User), &pb.DeleteTopicRequest{Topic: "t-b1"})
	statusIs(t, "delete topic as a user", d.GetStatus(), err, pb.Code_NO_PERMISSION)
	rt, err = ns.GetRoute(as(t, v1User), &pb.GetRouteRequest{Topic: "t-b1"})
	statusIs(t, "route after a refused delete", rt.GetStatus(), err, pb.Code_OK)
	d, err = ns.DeleteTopic(as(t, v1Admin), &pb.DeleteTopicRequest{Topic: "t-b1"})
	statusIs(t, "delete topic as admin", d.GetStatus(), err, pb.Code_OK)

	u, err := ns.UnregisterBroker(as(t, v1User), &pb.UnregisterBrokerRequest{Cluster: "c1", BrokerName: "b1", BrokerAddr: "127.0.0.1:11"})
	statusIs(t, "unregister as a user", u.GetStatus(), err, pb.Code_NO_PERMISSION)
	ci, err = ns.GetClusterInfo(as(t, v1Admin), &pb.GetClusterInfoRequest{})
	statusIs(t, "cluster info", ci.GetStatus(), err, pb.Code_OK)
	if len(ci.Live) != 1 {
		t.Fatalf("a refused unregistration removed the broker: %v", ci.Live)
	}
}

// TestNameServerAclService: only an admin manages users; a new user works
// at once; ListUsers returns no secret; a deleted user is unknown at once.
func TestNameServerAclService(t *testing.T) {
	_, cc := aclServer(t, true, "127.0.0.1:0")
	ns, acl := pb.NewNameServerClient(cc), pb.NewAclClient(cc)
	fresh := auth.Credentials{AccessKey: "fresh-key", SecretKey: "fresh-secret"}

	p, err := acl.PutUser(as(t, v1User), &pb.PutAclUserRequest{User: &pb.AclUser{AccessKey: fresh.AccessKey, SecretKey: fresh.SecretKey, Admin: true}})
	statusIs(t, "put user as a plain user", p.GetStatus(), err, pb.Code_NO_PERMISSION)
	lt, err := ns.ListTopics(as(t, fresh), &pb.ListTopicsRequest{})
	statusIs(t, "the refused user", lt.GetStatus(), err, pb.Code_UNAUTHENTICATED)

	p, err = acl.PutUser(as(t, v1Admin), &pb.PutAclUserRequest{User: &pb.AclUser{AccessKey: fresh.AccessKey, SecretKey: fresh.SecretKey}})
	statusIs(t, "put user", p.GetStatus(), err, pb.Code_OK)
	lt, err = ns.ListTopics(as(t, fresh), &pb.ListTopicsRequest{})
	statusIs(t, "the new user at once", lt.GetStatus(), err, pb.Code_OK)

	l, err := acl.ListUsers(as(t, v1Admin), &pb.ListAclUsersRequest{})
	statusIs(t, "list users", l.GetStatus(), err, pb.Code_OK)
	if len(l.Users) != 3 || !l.Enabled {
		t.Fatalf("users %v enabled %v", l.Users, l.Enabled)
	}
	for _, u := range l.Users {
		if u.SecretKey != "" {
			t.Fatalf("ListUsers returned %s's secret", u.AccessKey)
		}
	}
	l, err = acl.ListUsers(as(t, auth.Credentials{}), &pb.ListAclUsersRequest{})
	statusIs(t, "list users without credentials", l.GetStatus(), err, pb.Code_UNAUTHENTICATED)
	if len(l.GetUsers()) != 0 {
		t.Fatal("a refused ListUsers answered users")
	}

	dl, err := acl.DeleteUser(as(t, v1Admin), &pb.DeleteAclUserRequest{AccessKey: fresh.AccessKey})
	statusIs(t, "delete user", dl.GetStatus(), err, pb.Code_OK)
	lt, err = ns.ListTopics(as(t, fresh), &pb.ListTopicsRequest{})
	statusIs(t, "the deleted user", lt.GetStatus(), err, pb.Code_UNAUTHENTICATED)
}

// TestControllerAuth: the embedded controller's calls are classified:
// a description needs credentials, an election an admin, a heartbeat
// stream the daemons' (admin) key.
func TestControllerAuth(t *testing.T) {
	_, cc := aclServer(t, true, "127.0.0.1:0")
	ctl := pb.NewControllerClient(cc)

	d, err := ctl.DescribeController(as(t, auth.Credentials{}), &pb.DescribeControllerRequest{})
	statusIs(t, "describe without credentials", d.GetStatus(), err, pb.Code_UNAUTHENTICATED)
	d, err = ctl.DescribeController(as(t, v1User), &pb.DescribeControllerRequest{})
	statusIs(t, "describe as a user", d.GetStatus(), err, pb.Code_OK)

	e, err := ctl.ElectMaster(as(t, v1User), &pb.ElectMasterRequest{BrokerName: "b1"})
	statusIs(t, "elect as a user", e.GetStatus(), err, pb.Code_NO_PERMISSION)
	e, err = ctl.ElectMaster(as(t, v1Admin), &pb.ElectMasterRequest{BrokerName: "b1"})
	if err != nil || e.GetStatus().GetCode() == pb.Code_NO_PERMISSION || e.GetStatus().GetCode() == pb.Code_UNAUTHENTICATED {
		t.Fatalf("elect as admin: %v %v", err, e.GetStatus())
	}
	a, err := ctl.AlterSyncStateSet(as(t, v1User), &pb.AlterSyncStateSetRequest{BrokerName: "b1"})
	statusIs(t, "alter sync state set as a user", a.GetStatus(), err, pb.Code_NO_PERMISSION)

	for _, tc := range []struct {
		name string
		c    auth.Credentials
		want codes.Code
	}{{"no credentials", auth.Credentials{}, codes.Unauthenticated}, {"a plain user", v1User, codes.PermissionDenied}} {
		st, err := ctl.Heartbeat(as(t, tc.c))
		if err == nil {
			_ = st.Send(&pb.BrokerBeat{Cluster: "c1", BrokerName: "b1", ReplicaId: 1, Addr: "127.0.0.1:10911"})
			_, err = st.Recv()
		}
		if status.Code(err) != tc.want {
			t.Fatalf("heartbeat with %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	st, err := ctl.Heartbeat(as(t, v1Admin))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("heartbeat as admin, closed without a beat: %v, want EOF", err)
	}
}

// TestNameServerACLOffAdminLoopbackOnly: with ACL off, DeleteTopic and the
// Acl service are refused from a non-loopback address and served from
// loopback; reads and registrations need nothing.
func TestNameServerACLOffAdminLoopbackOnly(t *testing.T) {
	ip := ""
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				ip = n.IP.String()
				break
			}
		}
	}
	if ip == "" {
		t.Skip("no non-loopback address (the classification is unit-tested in TestRPCClasses)")
	}
	s, local := aclServer(t, false, "0.0.0.0:0")
	_, port, _ := net.SplitHostPort(s.Addr())
	rc, err := grpc.NewClient(net.JoinHostPort(ip, port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	remote := pb.NewNameServerClient(rc)

	r, err := remote.RegisterBroker(ctx(t), registration("b1"))
	statusIs(t, "register from "+ip, r.GetStatus(), err, pb.Code_OK)
	d, err := remote.DeleteTopic(ctx(t), &pb.DeleteTopicRequest{Topic: "t-b1"})
	statusIs(t, "delete topic from "+ip, d.GetStatus(), err, pb.Code_NO_PERMISSION)
	if !strings.Contains(d.Status.Message, "loopback") {
		t.Fatalf("the refusal does not say why: %q", d.Status.Message)
	}
	l, err := pb.NewAclClient(rc).ListUsers(ctx(t), &pb.ListAclUsersRequest{})
	statusIs(t, "list users from "+ip, l.GetStatus(), err, pb.Code_NO_PERMISSION)
	rt, err := remote.GetRoute(ctx(t), &pb.GetRouteRequest{Topic: "t-b1"})
	statusIs(t, "route from "+ip, rt.GetStatus(), err, pb.Code_OK)

	d, err = pb.NewNameServerClient(local).DeleteTopic(ctx(t), &pb.DeleteTopicRequest{Topic: "t-b1"})
	statusIs(t, "delete topic from loopback", d.GetStatus(), err, pb.Code_OK)
	l, err = pb.NewAclClient(local).ListUsers(ctx(t), &pb.ListAclUsersRequest{})
	statusIs(t, "list users from loopback", l.GetStatus(), err, pb.Code_OK)
	if l.Enabled || len(l.Users) != 2 {
		t.Fatalf("list users with ACL off: enabled %v, %d users", l.Enabled, len(l.Users))
	}
}

// TestRPCClasses: every method of the NameServer and Acl services is
// classified, and the table names nothing else.
func TestRPCClasses(t *testing.T) {
	seen := map[string]bool{}
	for _, sd := range []grpc.ServiceDesc{pb.NameServer_ServiceDesc, pb.Acl_ServiceDesc} {
		for _, m := range sd.Methods {
			full := "/" + sd.ServiceName + "/" + m.MethodName
			seen[full] = true
			if _, ok := rpcClasses[full]; !ok {
				t.Errorf("%s is not classified", full)
			}
		}
		if len(sd.Streams) != 0 {
			t.Errorf("%s has streams the table does not know", sd.ServiceName)
		}
	}
	for m := range rpcClasses {
		if !seen[m] {
			t.Errorf("the table names %s, which is not served", m)
		}
	}
}
