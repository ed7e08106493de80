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

// MessageToProto converts a message to send.
func MessageToProto(m *message.Message, queueID int32, bornTimestamp int64, bornHost string) *pb.Message {
	return &pb.Message{
		Topic:         m.Topic,
		QueueId:       queueID,
		Flag:          m.Flag,
		Body:          m.Body,
		Properties:    m.Properties,
		BornTimestamp: bornTimestamp,
		BornHost:      bornHost,
	}
}

// MessageFromProto converts a received message into what the store takes.
// A born host that does not parse is left unset.
func MessageFromProto(pm *pb.Message) *message.Ext {
	e := &message.Ext{
		Message: message.Message{
			Topic:      pm.Topic,
			Flag:       pm.Flag,
			Body:       pm.Body,
			Properties: pm.Properties,
		},
		QueueID:        pm.QueueId,
		SysFlag:        pm.SysFlag,
		BornTimestamp:  pm.BornTimestamp,
		ReconsumeTimes: pm.ReconsumeTimes,
	}
	if ap, err := netip.ParseAddrPort(pm.BornHost); err == nil {
		e.BornHost = ap
	}
	return e
}
