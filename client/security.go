package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/internal/frame"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// ErrUnauthenticated: a NameServer or broker with ACL on could not
// identify the caller — no credentials (WithCredentials), an unknown
// access key, a wrong secret, a date too far from the server's clock. A
// known caller without the permission gets ErrNoPermission. Neither is
// retried.
var ErrUnauthenticated = &wire.Error{Code: errcode.Unauthenticated}

// signer signs each gRPC call with the client's credentials: the
// authorization and x-mq-date-time metadata of package auth. The date has
// a resolution of one second, so a signature is computed at most once a
// second and shared by the calls of that second.
type signer struct {
	creds auth.Credentials
	cur   atomic.Pointer[signedHeader]
	now   func() time.Time
}

type signedHeader struct {
	unix int64
	md   map[string]string // never modified once stored
}

func newSigner(c auth.Credentials) *signer { return &signer{creds: c, now: time.Now} }

// header returns the authorization and date values for a call now.
func (s *signer) header() map[string]string {
	now := s.now()
	if h := s.cur.Load(); h != nil && h.unix == now.Unix() {
		return h.md
	}
	a, d := auth.NewHeader(s.creds, now)
	h := &signedHeader{unix: now.Unix(), md: map[string]string{auth.HeaderAuthorization: a, auth.HeaderDate: d}}
	s.cur.Store(h)
	return h.md
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (s *signer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return s.header(), nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the
// secret is never sent, so plain text is allowed (the signed date can be
// replayed by someone who reads it; docs/security.md says to use TLS).
func (*signer) RequireTransportSecurity() bool { return false }

// frameAuth is the Auth request of a new frame connection.
func (s *signer) frameAuth() *pb.FrameAuthRequest {
	h := s.header()
	return &pb.FrameAuthRequest{Authorization: h[auth.HeaderAuthorization], DateTime: h[auth.HeaderDate]}
}

var _ credentials.PerRPCCredentials = (*signer)(nil)

// refusalInterceptors turn a daemon's refusal made before its handler ran
// (a gRPC Unauthenticated or PermissionDenied status, with the coded
// Status as detail: wire.GRPCError) into the coded error, so that the
// client's retry rules see an answer, not a transport failure.
func refusalInterceptors() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return fromRPCError(invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, fromRPCError(err)
			}
			return refusalStream{s}, nil
		}),
	}
}

// refusalStream converts a refusal that ends a stream.
type refusalStream struct{ grpc.ClientStream }

func (s refusalStream) RecvMsg(m any) error { return fromRPCError(s.ClientStream.RecvMsg(m)) }
func (s refusalStream) SendMsg(m any) error { return fromRPCError(s.ClientStream.SendMsg(m)) }

// fromRPCError returns the coded error a gRPC refusal carries (named:
// see named); other errors are returned as they are.
func fromRPCError(err error) error {
	if err == nil {
		return nil
	}
	if coded := wire.FromGRPCError(err); coded != nil {
		return named(coded)
	}
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return err
	}
	switch st := se.GRPCStatus(); st.Code() {
	case codes.Unauthenticated:
		return named(codeErr(pb.Code_UNAUTHENTICATED, "%s", st.Message()))
	case codes.PermissionDenied:
		return named(codeErr(pb.Code_NO_PERMISSION, "%s", st.Message()))
	}
	return err
}

// fromStatus is wire.FromStatus with refusals named.
func fromStatus(st *pb.Status) error { return named(wire.FromStatus(st)) }

// named prefixes the text of an UNAUTHENTICATED or NO_PERMISSION error
// with its code, so that whoever reads it knows at once that credentials
// or permissions are at stake ("UNAUTHENTICATED: no credentials: …").
func named(err error) error {
	if !isRefusal(err) {
		return err
	}
	var ce *wire.Error
	errors.As(err, &ce)
	name := ce.Code.String()
	if strings.HasPrefix(ce.Msg, name) {
		return err
	}
	return &wire.Error{Code: ce.Code, Msg: name + ": " + ce.Error()}
}

// isRefusal reports whether err is a daemon's refusal of the caller's
// credentials or permissions: never retried, on this broker or another.
func isRefusal(err error) bool {
	if !isCoded(err) {
		return false
	}
	switch wire.CodeOf(err) {
	case pb.Code_UNAUTHENTICATED, pb.Code_NO_PERMISSION:
		return true
	}
	return false
}

// isPermanentRefusal reports whether err is a refusal that asking again
// will not change until the daemons' configuration does: the caller's
// credentials or permissions (isRefusal), a server that accepts TLS only
// and was spoken to in plain text (gRPC's FailedPrecondition, which
// Bolide's servers answer only that with), or a frame request the broker
// could not serve at all (an error frame: the same refusal, or a request
// it cannot decode).
func isPermanentRefusal(err error) bool {
	if err == nil {
		return false
	}
	if isRefusal(err) {
		return true
	}
	var re *frame.RemoteError
	if errors.As(err, &re) {
		return true
	}
	var se interface{ GRPCStatus() *status.Status }
	return !isCoded(err) && errors.As(err, &se) && se.GRPCStatus().Code() == codes.FailedPrecondition
}

// frameRefusal returns the coded error of a frame connection whose Auth
// request addr refused, or nil.
func frameRefusal(addr string, err error) error {
	ae, ok := errors.AsType[*frame.AuthError](err)
	if !ok {
		return nil
	}
	n := named(ae.Err)
	ce, ok := errors.AsType[*wire.Error](n)
	if !ok {
		return n
	}
	return &wire.Error{Code: ce.Code, Msg: ce.Msg + " (frame connection to " + addr + ")"}
}
