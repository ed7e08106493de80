package grpcapi

import (
	"context"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// aclService is bolide.v1's Acl service: the users of the broker's ACL
// file. The interceptor lets only admins (loopback callers with ACL off)
// reach it; a change is written to the file and applies at once.
type aclService struct {
	pb.UnimplementedAclServer
	g *auth.Guard
}

func (s *aclService) ListUsers(context.Context, *pb.ListAclUsersRequest) (*pb.ListAclUsersResponse, error) {
	accounts, err := s.g.Accounts()
	if err != nil {
		return &pb.ListAclUsersResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.ListAclUsersResponse{Status: wire.OK, File: s.g.File(), Enabled: s.g.Enabled()}
	for _, a := range accounts {
		u := AclUserToProto(a)
		u.SecretKey = "" // never returned
		resp.Users = append(resp.Users, u)
	}
	return resp, nil
}

func (s *aclService) PutUser(_ context.Context, req *pb.PutAclUserRequest) (*pb.PutAclUserResponse, error) {
	if req.GetUser().GetAccessKey() == "" {
		return &pb.PutAclUserResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no user given (an access key is required)"))}, nil
	}
	a := AclUserFromProto(req.User)
	if a.SecretKey == "" {
		a.SecretKey = KeptSecret(s.g, a.AccessKey)
	}
	return &pb.PutAclUserResponse{Status: wire.Status(s.g.PutUser(a))}, nil
}

// KeptSecret is the secret key the ACL file holds for accessKey, or "": a
// PutUser without a secret key changes an existing user's permissions and
// keeps its secret.
func KeptSecret(g *auth.Guard, accessKey string) string {
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

func (s *aclService) DeleteUser(_ context.Context, req *pb.DeleteAclUserRequest) (*pb.DeleteAclUserResponse, error) {
	if req.AccessKey == "" {
		return &pb.DeleteAclUserResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no access key given"))}, nil
	}
	return &pb.DeleteAclUserResponse{Status: wire.Status(s.g.DeleteUser(req.AccessKey))}, nil
}

// AclUserToProto is a as the Acl service carries it.
func AclUserToProto(a auth.Account) *pb.AclUser {
	return &pb.AclUser{
		AccessKey: a.AccessKey, SecretKey: a.SecretKey, Admin: a.Admin,
		DefaultTopicPerm: a.DefaultTopicPerm, DefaultGroupPerm: a.DefaultGroupPerm,
		TopicPerms: a.TopicPerms, GroupPerms: a.GroupPerms, WhiteRemoteAddress: a.WhiteRemoteAddress,
	}
}

// AclUserFromProto is the account u describes.
func AclUserFromProto(u *pb.AclUser) auth.Account {
	return auth.Account{
		AccessKey: u.GetAccessKey(), SecretKey: u.GetSecretKey(), Admin: u.GetAdmin(),
		DefaultTopicPerm: u.GetDefaultTopicPerm(), DefaultGroupPerm: u.GetDefaultGroupPerm(),
		TopicPerms: u.GetTopicPerms(), GroupPerms: u.GetGroupPerms(), WhiteRemoteAddress: u.GetWhiteRemoteAddress(),
	}
}
