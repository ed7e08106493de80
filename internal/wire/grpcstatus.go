package wire

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/internal/errcode"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// GRPCError turns a coded error into a gRPC status error, for a refusal
// made before a handler runs (an interceptor has no response to put a
// Status in): UNAUTHENTICATED and NO_PERMISSION become gRPC's
// Unauthenticated and PermissionDenied, anything else Unknown, and the
// coded Status travels as the status's detail so FromGRPCError recovers it.
func GRPCError(err error) error {
	if err == nil {
		return nil
	}
	c := codes.Unknown
	switch errcode.Of(err) {
	case errcode.Unauthenticated:
		c = codes.Unauthenticated
	case errcode.NoPermission:
		c = codes.PermissionDenied
	case errcode.InvalidParameter:
		c = codes.InvalidArgument
	}
	st := status.New(c, err.Error())
	if d, derr := st.WithDetails(Status(err)); derr == nil {
		st = d
	}
	return st.Err()
}

// FromGRPCError returns the coded error a GRPCError carries, or nil when
// err is not one.
func FromGRPCError(err error) error {
	if err == nil {
		return nil
	}
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return nil
	}
	for _, d := range se.GRPCStatus().Details() {
		if ps, ok := d.(*pb.Status); ok && ps.GetCode() != pb.Code_OK {
			return FromStatus(ps)
		}
	}
	return nil
}
