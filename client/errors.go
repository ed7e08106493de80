package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Coded errors. A failure reported by a broker or NameServer, or found by
// the client's own validation, matches one of these with errors.Is.
var (
	ErrSystem              = wire.ErrSystem
	ErrBusy                = wire.ErrBusy
	ErrNotSupported        = wire.ErrNotSupported
	ErrFlushDiskTimeout    = wire.ErrFlushDiskTimeout
	ErrSlaveNotAvailable   = wire.ErrSlaveNotAvailable
	ErrFlushSlaveTimeout   = wire.ErrFlushSlaveTimeout
	ErrMessageIllegal      = wire.ErrMessageIllegal
	ErrServiceNotAvailable = wire.ErrServiceNotAvailable
	ErrNoPermission        = wire.ErrNoPermission
	ErrTopicNotExist       = wire.ErrTopicNotExist
	ErrTopicExists         = wire.ErrTopicExists
	ErrQueryNotFound       = wire.ErrQueryNotFound
	ErrSubscriptionParse   = wire.ErrSubscriptionParse
	ErrGroupNotExist       = wire.ErrGroupNotExist
	ErrInvalidParameter    = wire.ErrInvalidParameter
	ErrBrokerNotExist      = wire.ErrBrokerNotExist
	ErrMessageTooLarge     = wire.ErrMessageTooLarge
	ErrIllegalTopic        = wire.ErrIllegalTopic
	ErrIllegalGroup        = wire.ErrIllegalGroup
	ErrPropertiesTooLarge  = wire.ErrPropertiesTooLarge
	ErrDiskFull            = wire.ErrDiskFull
	ErrNotMaster           = wire.ErrNotMaster
	ErrInSyncReplicas      = wire.ErrInSyncReplicasLacking
	ErrShuttingDown        = wire.ErrShuttingDown
	ErrTimeout             = wire.ErrTimeout
	ErrLockNotHeld         = wire.ErrLockNotHeld
)

// Client-side errors.
var (
	// ErrNoRoute: no NameServer knows a route for the topic, or the route
	// has no queue usable for the operation. When the topic does not exist
	// the error also matches ErrTopicNotExist; when the brokers that serve
	// it are not registered with the NameServers (down or still starting)
	// it matches ErrBrokerUnreachable instead.
	ErrNoRoute = errors.New("no route for topic")
	// ErrClosed is returned by calls on a closed client.
	ErrClosed = errors.New("client closed")
	// ErrNotStarted is returned by calls that need Start first.
	ErrNotStarted = errors.New("client not started")
	// ErrAlreadyStarted is returned by a second Start.
	ErrAlreadyStarted = errors.New("client already started")
	// ErrNoNameServer: no NameServer answered.
	ErrNoNameServer = errors.New("no NameServer available")
	// ErrBrokerUnreachable: a broker could not be reached or did not
	// answer in time, or the brokers that serve a topic are not registered
	// with the NameServers (they drop a broker that stops or dies, and a
	// starting broker registers only once it serves): down or still
	// starting. The topic exists as far as the client knows; retrying later
	// may succeed. Sends retry it by themselves (WithSendRetries).
	ErrBrokerUnreachable = errors.New("broker unreachable")
)

// brokerFailure returns err, the failure of a call made with ctx to the
// broker at addr, marked as ErrBrokerUnreachable when the broker could not
// be reached or did not answer in time (and ctx was not canceled).
func brokerFailure(ctx context.Context, addr string, err error) error {
	if err == nil || errors.Is(ctx.Err(), context.Canceled) || !isUnreachable(err) {
		return err
	}
	return &unreachableError{addr: addr, err: err}
}

// isUnreachable reports whether err says that the peer could not be
// reached, broke the connection, or did not answer in time — not an answer,
// nor a cancellation.
func isUnreachable(err error) bool {
	if isCoded(err) {
		return false
	}
	var se *streamError
	if errors.As(err, &se) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && (st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded)
}

// unreachableError is a broker that could not be reached or did not answer.
type unreachableError struct {
	addr string
	err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("%v at %s: %v", ErrBrokerUnreachable, e.addr, e.err)
}

func (e *unreachableError) Is(target error) bool { return target == ErrBrokerUnreachable }

func (e *unreachableError) Unwrap() error { return e.err }

// codeErr builds a coded error; it matches the sentinel of its code.
func codeErr(code pb.Code, format string, args ...any) error {
	return wire.Errorf(code, format, args...)
}

// isCoded reports whether err carries a wire code (a broker's or
// NameServer's answer, as opposed to a transport failure).
func isCoded(err error) bool {
	_, ok := errors.AsType[*wire.Error](err)
	return ok
}

// isTransport reports whether err is a failure to reach the peer or a
// broken stream, as opposed to an answer. Context errors of the caller are
// not transport errors: check the caller's context first.
func isTransport(err error) bool {
	if err == nil || isCoded(err) {
		return false
	}
	// A stream that broke while a request waited on it, or an attempt
	// that ran out of its own time.
	var se *streamError
	if errors.As(err, &se) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted,
		codes.Internal, codes.Unknown:
		return true
	}
	return false
}

// retryableSend reports whether a failed send may be retried on another
// broker: the message was certainly or probably not stored, and another
// broker may accept it. A refusal of the caller's credentials or
// permissions (UNAUTHENTICATED, NO_PERMISSION) is not: the brokers of a
// cluster share their users, and retrying would only repeat it. The one
// NO_PERMISSION that is retried is a broker's whose write permission was
// taken away (draining: brokerPermission 4), which the broker confirmed
// (notWritableError): another broker of the topic takes the message, as
// RocketMQ's producer retries NO_PERMISSION.
func retryableSend(err error) bool {
	if isTransport(err) || errors.Is(err, errBrokerNotWritable) {
		return true
	}
	switch wire.CodeOf(err) {
	case pb.Code_SYSTEM_BUSY, pb.Code_SERVICE_NOT_AVAILABLE, pb.Code_SYSTEM_ERROR,
		pb.Code_NOT_MASTER, pb.Code_DISK_FULL, pb.Code_TOPIC_NOT_EXIST,
		pb.Code_SHUTTING_DOWN, pb.Code_IN_SYNC_REPLICAS_NOT_ENOUGH:
		// IN_SYNC_REPLICAS_NOT_ENOUGH is mostly answered before the
		// message is stored (a new master whose slaves have not joined its
		// sync state set yet); when it was stored, the broker's
		// deduplication window answers the retry with the first copy.
		return isCoded(err)
	}
	return false
}

// errBrokerNotWritable marks a send refused NO_PERMISSION by a broker
// whose write permission is taken away (notWritableError).
var errBrokerNotWritable = errors.New("broker not writable")

// notWritableError is a NO_PERMISSION send refusal of a broker that, asked
// at once, reports its own permission without write (brokerPermission 4,
// draining for maintenance): not the caller's permissions, which the
// broker reports writable for. The producer's route predates the change
// (the NameServers route the broker read-only at once, the producer learns
// it at its next route fetch). It matches ErrNoPermission (the broker's
// answer, kept) and errBrokerNotWritable.
type notWritableError struct {
	broker string
	err    error
}

func (e *notWritableError) Error() string { return e.err.Error() }

func (e *notWritableError) Is(target error) bool { return target == errBrokerNotWritable }

func (e *notWritableError) Unwrap() error { return e.err }

// failoverError reports whether a failed send met its broker group failing
// over: the master unreachable or no longer the master, too few in-sync
// replicas, or the group without a master. The group may have a new master
// at once (the route is fetched again before the retry) or in a moment.
func failoverError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrBrokerUnreachable) || errors.Is(err, errNoMaster) {
		return true
	}
	switch wire.CodeOf(err) {
	case pb.Code_NOT_MASTER, pb.Code_IN_SYNC_REPLICAS_NOT_ENOUGH, pb.Code_SERVICE_NOT_AVAILABLE:
		return isCoded(err)
	}
	return false
}

// errNoMaster marks a route whose broker groups have no master (see
// noMasterError).
var errNoMaster = errors.New("no master")

// noMasterError: the broker groups of a route that have writable queues
// have no master — failing over, or the master is down. It matches
// ErrServiceNotAvailable (and carries that code) and errNoMaster.
type noMasterError struct{ groups []string }

func (e *noMasterError) Error() string {
	return fmt.Sprintf("broker group %s has no master (failing over, or its master is down)", strings.Join(e.groups, ", "))
}

func (e *noMasterError) Is(target error) bool { return target == errNoMaster }

func (e *noMasterError) Unwrap() error {
	return codeErr(pb.Code_SERVICE_NOT_AVAILABLE, "%s", e.Error())
}

// streamError reports a send stream that broke while a request waited on
// it.
type streamError struct {
	addr string
	err  error
}

func (e *streamError) Error() string {
	return "send stream to " + e.addr + " broken: " + e.err.Error()
}

func (e *streamError) Unwrap() error { return e.err }
