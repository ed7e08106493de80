package nameserver

import (
	"context"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// aclService is bolide.v1's Acl service on the NameServer: the users of
// its ACL file (bolide acl). Only admins (loopback callers with ACL off)
// may call it; a change is written to the file and applies at once.
// ListUsers never returns a secret key.
type aclService struct {
	pb.UnimplementedAclServer
	s *Server
}

func (v *aclService) ListUsers(ctx context.Context, _ *pb.ListAclUsersRequest) (*pb.ListAclUsersResponse, error) {
	if err := v.s.authorizeRPC(ctx, pb.Acl_ListUsers_FullMethodName); err != nil {
		return &pb.ListAclUsersResponse{Status: wire.Status(err)}, nil
	}
	g := v.s.guard
	accounts, err := g.Accounts()
	if err != nil {
		return &pb.ListAclUsersResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.ListAclUsersResponse{Status: wire.OK, File: g.File(), Enabled: g.Enabled()}
	for _, a := range accounts {
		resp.Users = append(resp.Users, &pb.AclUser{
			AccessKey: a.AccessKey, Admin: a.Admin, // no secret
			DefaultTopicPerm: a.DefaultTopicPerm, DefaultGroupPerm: a.DefaultGroupPerm,
			TopicPerms: a.TopicPerms, GroupPerms: a.GroupPerms, WhiteRemoteAddress: a.WhiteRemoteAddress,
		})
	}
	return resp, nil
}

func (v *aclService) PutUser(ctx context.Context, req *pb.PutAclUserRequest) (*pb.PutAclUserResponse, error) {
	if err := v.s.authorizeRPC(ctx, pb.Acl_PutUser_FullMethodName); err != nil {
		return &pb.PutAclUserResponse{Status: wire.Status(err)}, nil
	}
	u := req.GetUser()
	if u.GetAccessKey() == "" {
		return &pb.PutAclUserResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no user given (an access key is required)"))}, nil
	}
	a := auth.Account{
		AccessKey: u.AccessKey, SecretKey: u.SecretKey, Admin: u.Admin,
		DefaultTopicPerm: u.DefaultTopicPerm, DefaultGroupPerm: u.DefaultGroupPerm,
		TopicPerms: u.TopicPerms, GroupPerms: u.GroupPerms, WhiteRemoteAddress: u.WhiteRemoteAddress,
	}
	if a.SecretKey == "" {
		a.SecretKey = keptSecret(v.s.guard, a.AccessKey)
	}
	return &pb.PutAclUserResponse{Status: wire.Status(v.s.guard.PutUser(a))}, nil
}

func (v *aclService) DeleteUser(ctx context.Context, req *pb.DeleteAclUserRequest) (*pb.DeleteAclUserResponse, error) {
	if err := v.s.authorizeRPC(ctx, pb.Acl_DeleteUser_FullMethodName); err != nil {
		return &pb.DeleteAclUserResponse{Status: wire.Status(err)}, nil
	}
	if req.AccessKey == "" {
		return &pb.DeleteAclUserResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no access key given"))}, nil
	}
	return &pb.DeleteAclUserResponse{Status: wire.Status(v.s.guard.DeleteUser(req.AccessKey))}, nil
}

// keptSecret is the secret key the ACL file holds for accessKey, or "": a
// PutUser without a secret key changes an existing user's permissions and
// keeps its secret.
func keptSecret(g *auth.Guard, accessKey string) string {
	if g.File() == "" {
		return ""
	}
	f, err := auth.ReadFile(g.File())
	if err != nil {
		return ""
	}
	for _, a := range f.Accounts {
		if a.AccessKey == accessKey {
			return a.SecretKey
		}
	}
	return ""
}
