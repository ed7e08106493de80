// Package aclrpc serves bolide.v1's Acl service — the users of a daemon's
// ACL file (bolide acl) — over an auth.Guard, for the broker and the
// NameServer alike. A change is written to the file and applies at once;
// ListUsers never returns a secret key.
package aclrpc

import (
	"context"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Server is the Acl service of one guard.
type Server struct {
	pb.UnimplementedAclServer
	g *auth.Guard
	// check refuses a call that may not reach the service (an admin user,
	// a loopback caller with ACL off); nil when an interceptor does it.
	check func(ctx context.Context, fullMethod string) error
}

// New returns the service of g. check, when not nil, runs first on every
// call with the method's full name; its error is the call's status.
func New(g *auth.Guard, check func(ctx context.Context, fullMethod string) error) *Server {
	return &Server{g: g, check: check}
}

func (s *Server) allowed(ctx context.Context, method string) error {
	if s.check == nil {
		return nil
	}
	return s.check(ctx, method)
}

// ListUsers lists the file's users without their secrets.
func (s *Server) ListUsers(ctx context.Context, _ *pb.ListAclUsersRequest) (*pb.ListAclUsersResponse, error) {
	if err := s.allowed(ctx, pb.Acl_ListUsers_FullMethodName); err != nil {
		return &pb.ListAclUsersResponse{Status: wire.Status(err)}, nil
	}
	accounts, err := s.g.Accounts()
	if err != nil {
		return &pb.ListAclUsersResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.ListAclUsersResponse{Status: wire.OK, File: s.g.File(), Enabled: s.g.Enabled()}
	for _, a := range accounts {
		u := ToProto(a)
		u.SecretKey = "" // never returned
		resp.Users = append(resp.Users, u)
	}
	return resp, nil
}

// PutUser creates or replaces a user; without a secret key an existing
// user keeps its own.
func (s *Server) PutUser(ctx context.Context, req *pb.PutAclUserRequest) (*pb.PutAclUserResponse, error) {
	if err := s.allowed(ctx, pb.Acl_PutUser_FullMethodName); err != nil {
		return &pb.PutAclUserResponse{Status: wire.Status(err)}, nil
	}
	if req.GetUser().GetAccessKey() == "" {
		return &pb.PutAclUserResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no user given (an access key is required)"))}, nil
	}
	return &pb.PutAclUserResponse{Status: wire.Status(s.g.PutUser(FromProto(req.User)))}, nil
}

// DeleteUser removes a user.
func (s *Server) DeleteUser(ctx context.Context, req *pb.DeleteAclUserRequest) (*pb.DeleteAclUserResponse, error) {
	if err := s.allowed(ctx, pb.Acl_DeleteUser_FullMethodName); err != nil {
		return &pb.DeleteAclUserResponse{Status: wire.Status(err)}, nil
	}
	if req.AccessKey == "" {
		return &pb.DeleteAclUserResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no access key given"))}, nil
	}
	return &pb.DeleteAclUserResponse{Status: wire.Status(s.g.DeleteUser(req.AccessKey))}, nil
}

// ToProto is a as the Acl service carries it.
func ToProto(a auth.Account) *pb.AclUser {
	return &pb.AclUser{
		AccessKey: a.AccessKey, SecretKey: a.SecretKey, Admin: a.Admin,
		DefaultTopicPerm: a.DefaultTopicPerm, DefaultGroupPerm: a.DefaultGroupPerm,
		TopicPerms: a.TopicPerms, GroupPerms: a.GroupPerms, WhiteRemoteAddress: a.WhiteRemoteAddress,
	}
}

// FromProto is the account u describes.
func FromProto(u *pb.AclUser) auth.Account {
	return auth.Account{
		AccessKey: u.GetAccessKey(), SecretKey: u.GetSecretKey(), Admin: u.GetAdmin(),
		DefaultTopicPerm: u.GetDefaultTopicPerm(), DefaultGroupPerm: u.GetDefaultGroupPerm(),
		TopicPerms: u.GetTopicPerms(), GroupPerms: u.GetGroupPerms(), WhiteRemoteAddress: u.GetWhiteRemoteAddress(),
	}
}
