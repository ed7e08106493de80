package client

import (
	"context"
	"fmt"
	"sort"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// AclUser is one user of a daemon's ACL file (RocketMQ's plain_acl.yml
// account). Permissions are DENY, PUB, SUB or PUB|SUB; TopicPerms and
// GroupPerms are "name=PERM" entries, a name ending in * being a prefix.
type AclUser struct {
	AccessKey string
	// SecretKey is never returned by ListAclUsers (empty there).
	SecretKey          string
	Admin              bool
	DefaultTopicPerm   string
	DefaultGroupPerm   string
	TopicPerms         []string
	GroupPerms         []string
	WhiteRemoteAddress string
}

// AclUsers are the users of one daemon.
type AclUsers struct {
	// Addr is the daemon's gRPC address.
	Addr string
	// File is its ACL file; Enabled reports whether it runs with ACL on.
	File    string
	Enabled bool
	Users   []AclUser
}

// AclDaemon is a daemon whose users the Acl service manages.
type AclDaemon struct {
	// Kind is "nameserver" or "broker".
	Kind string
	// Name is the broker group and id ("broker-a/0"), or the address for a
	// NameServer.
	Name string
	Addr string
}

// AclDaemons lists the daemons of the cluster that hold users: the
// client's NameServers, then every broker registered with them (masters
// and slaves), by name and id. Each has its own ACL file.
func (a *Admin) AclDaemons(ctx context.Context) ([]AclDaemon, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var out []AclDaemon
	for _, ns := range a.b.opts.nameServers {
		out = append(out, AclDaemon{Kind: "nameserver", Name: ns, Addr: ns})
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	live := append([]BrokerLive(nil), ci.Live...)
	sort.Slice(live, func(i, j int) bool {
		if live[i].BrokerName != live[j].BrokerName {
			return live[i].BrokerName < live[j].BrokerName
		}
		return live[i].BrokerID < live[j].BrokerID
	})
	for _, l := range live {
		out = append(out, AclDaemon{Kind: "broker", Name: fmt.Sprintf("%s/%d", l.BrokerName, l.BrokerID), Addr: l.Addr})
	}
	return out, nil
}

func (a *Admin) aclClient(addr string) (pb.AclClient, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	cc, err := a.b.pool.get(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewAclClient(cc), nil
}

// ListAclUsers returns the users of the daemon (broker or NameServer) at
// addr, without their secrets. It needs an admin user when the daemon
// runs with ACL on, and a loopback address when it runs with ACL off.
func (a *Admin) ListAclUsers(ctx context.Context, addr string) (*AclUsers, error) {
	c, err := a.aclClient(addr)
	if err != nil {
		return nil, err
	}
	rctx, cancel := a.b.rpcContext(ctx)
	defer cancel()
	resp, err := c.ListUsers(rctx, &pb.ListAclUsersRequest{})
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	out := &AclUsers{Addr: addr, File: resp.GetFile(), Enabled: resp.GetEnabled()}
	for _, u := range resp.GetUsers() {
		out.Users = append(out.Users, aclUserFromProto(u))
	}
	return out, nil
}

// PutAclUser creates the user on the daemon at addr, or replaces it whole
// (the secret included). The daemon writes its ACL file; the change
// applies at once. It refuses a change that would leave no admin user
// while ACL is on.
func (a *Admin) PutAclUser(ctx context.Context, addr string, u AclUser) error {
	c, err := a.aclClient(addr)
	if err != nil {
		return err
	}
	rctx, cancel := a.b.rpcContext(ctx)
	defer cancel()
	resp, err := c.PutUser(rctx, &pb.PutAclUserRequest{User: aclUserToProto(u)})
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	return nil
}

// DeleteAclUser removes the user of accessKey from the daemon at addr
// (ErrInvalidParameter when it has none).
func (a *Admin) DeleteAclUser(ctx context.Context, addr, accessKey string) error {
	c, err := a.aclClient(addr)
	if err != nil {
		return err
	}
	rctx, cancel := a.b.rpcContext(ctx)
	defer cancel()
	resp, err := c.DeleteUser(rctx, &pb.DeleteAclUserRequest{AccessKey: accessKey})
	if err == nil {
		err = fromStatus(resp.GetStatus())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	return nil
}

func aclUserFromProto(u *pb.AclUser) AclUser {
	return AclUser{AccessKey: u.GetAccessKey(), SecretKey: u.GetSecretKey(), Admin: u.GetAdmin(),
		DefaultTopicPerm: u.GetDefaultTopicPerm(), DefaultGroupPerm: u.GetDefaultGroupPerm(),
		TopicPerms: u.GetTopicPerms(), GroupPerms: u.GetGroupPerms(), WhiteRemoteAddress: u.GetWhiteRemoteAddress()}
}

func aclUserToProto(u AclUser) *pb.AclUser {
	return &pb.AclUser{AccessKey: u.AccessKey, SecretKey: u.SecretKey, Admin: u.Admin,
		DefaultTopicPerm: u.DefaultTopicPerm, DefaultGroupPerm: u.DefaultGroupPerm,
		TopicPerms: u.TopicPerms, GroupPerms: u.GroupPerms, WhiteRemoteAddress: u.WhiteRemoteAddress}
}
