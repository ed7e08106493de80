// Package wire converts between Bolide's Go types and the protocol in
// proto/bolidev1: coded errors and messages. The broker's gRPC front end and
// the client SDK both use it, so the two sides agree on every conversion.
package wire

import (
	"net/netip"

	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Error is the coded error of internal/errcode: the core returns it and
// the client matches it, so one type serves both sides.
type Error = errcode.Error

// CodeText is a code's name in lower case words ("topic not exist").
func CodeText(c pb.Code) string { return errcode.Code(c).Text() }

// Errorf builds a coded error from a wire code.
func Errorf(code pb.Code, format string, args ...any) *Error {
	return errcode.Errorf(errcode.Code(code), format, args...)
}

// Sentinels for errors.Is (errcode's, under the names the client uses).
var (
	ErrSystem                = errcode.ErrSystem
	ErrBusy                  = errcode.ErrBusy
	ErrNotSupported          = errcode.ErrNotSupported
	ErrFlushDiskTimeout      = errcode.ErrFlushDiskTimeout
	ErrSlaveNotAvailable     = errcode.ErrSlaveNotAvailable
	ErrFlushSlaveTimeout     = errcode.ErrFlushSlaveTimeout
	ErrMessageIllegal        = errcode.ErrMessageIllegal
	ErrServiceNotAvailable   = errcode.ErrServiceNotAvailable
	ErrNoPermission          = errcode.ErrNoPermission
	ErrTopicNotExist         = errcode.ErrTopicNotExist
	ErrTopicExists           = errcode.ErrTopicExists
	ErrQueryNotFound         = errcode.ErrQueryNotFound
	ErrSubscriptionParse     = errcode.ErrSubscriptionParse
	ErrGroupNotExist         = errcode.ErrGroupNotExist
	ErrInvalidParameter      = errcode.ErrInvalidParameter
	ErrBrokerNotExist        = errcode.ErrBrokerNotExist
	ErrMessageTooLarge       = errcode.ErrMessageTooLarge
	ErrIllegalTopic          = errcode.ErrIllegalTopic
	ErrIllegalGroup          = errcode.ErrIllegalGroup
	ErrPropertiesTooLarge    = errcode.ErrPropertiesTooLarge
	ErrDiskFull              = errcode.ErrDiskFull
	ErrNotMaster             = errcode.ErrNotMaster
	ErrInSyncReplicasLacking = errcode.ErrInSyncReplicasLacking
	ErrShuttingDown          = errcode.ErrShuttingDown
	ErrTimeout               = errcode.ErrTimeout
	ErrLockNotHeld           = errcode.ErrLockNotHeld
)

// OK is the status of a successful call.
var OK = &pb.Status{Code: pb.Code_OK}

// Status turns an error into a wire status: nil is OK, a coded error keeps
// its code, anything else is SYSTEM_ERROR with the error's text.
func Status(err error) *pb.Status {
	if err == nil {
		return OK
	}
	return &pb.Status{Code: CodeOf(err), Message: err.Error()}
}

// FromStatus turns a wire status back into an error (nil for OK).
func FromStatus(st *pb.Status) error {
	if st == nil || st.Code == pb.Code_OK {
		return nil
	}
	msg := st.Message
	if msg == "" {
		msg = CodeText(st.Code)
	}
	return &Error{Code: errcode.Code(st.Code), Msg: msg}
}

// CodeOf returns the wire code of err: OK for nil, SYSTEM_ERROR for an
// error without one.
func CodeOf(err error) pb.Code { return pb.Code(errcode.Of(err)) }

// MessagesFromProto converts the messages of one request into what the
// store takes, allocated together; a born host that repeats the one before
// is parsed once, and one that does not parse is left unset. pms holds no
// nil message.
func MessagesFromProto(pms []*pb.Message) []*message.Ext {
	slab := make([]message.Ext, len(pms))
	out := make([]*message.Ext, len(pms))
	var host string
	var ap netip.AddrPort
	for i, pm := range pms {
		if i == 0 || pm.BornHost != host {
			host = pm.BornHost
			ap, _ = netip.ParseAddrPort(host) // zero when it does not parse
		}
		slab[i] = message.Ext{
			Message: message.Message{
				Topic:      pm.Topic,
				Flag:       pm.Flag,
				Body:       pm.Body,
				Properties: pm.Properties,
			},
			QueueID:        pm.QueueId,
			SysFlag:        pm.SysFlag,
			BornTimestamp:  pm.BornTimestamp,
			BornHost:       ap,
			ReconsumeTimes: pm.ReconsumeTimes,
		}
		out[i] = &slab[i]
	}
	return out
}
