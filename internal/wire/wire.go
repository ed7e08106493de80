// Package wire converts between Bolide's Go types and the protocol in
// proto/bolidev1: coded errors and messages. The broker's gRPC front end and
// the client SDK both use it, so the two sides agree on every conversion.
package wire

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// Error is an error with a wire code. Errors of the same code match with
// errors.Is against the sentinels below, whatever their message.
type Error struct {
	Code pb.Code
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return CodeText(e.Code)
	}
	return e.Msg
}

// CodeText is a code's name in lower case words ("topic not exist").
func CodeText(c pb.Code) string {
	return strings.ToLower(strings.ReplaceAll(c.String(), "_", " "))
}

// Is matches any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf builds a coded error.
func Errorf(code pb.Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is.
var (
	ErrSystem                = &Error{Code: pb.Code_SYSTEM_ERROR}
	ErrBusy                  = &Error{Code: pb.Code_SYSTEM_BUSY}
	ErrNotSupported          = &Error{Code: pb.Code_REQUEST_NOT_SUPPORTED}
	ErrFlushDiskTimeout      = &Error{Code: pb.Code_FLUSH_DISK_TIMEOUT}
	ErrSlaveNotAvailable     = &Error{Code: pb.Code_SLAVE_NOT_AVAILABLE}
	ErrFlushSlaveTimeout     = &Error{Code: pb.Code_FLUSH_SLAVE_TIMEOUT}
	ErrMessageIllegal        = &Error{Code: pb.Code_MESSAGE_ILLEGAL}
	ErrServiceNotAvailable   = &Error{Code: pb.Code_SERVICE_NOT_AVAILABLE}
	ErrNoPermission          = &Error{Code: pb.Code_NO_PERMISSION}
	ErrTopicNotExist         = &Error{Code: pb.Code_TOPIC_NOT_EXIST}
	ErrTopicExists           = &Error{Code: pb.Code_TOPIC_EXIST_ALREADY}
	ErrQueryNotFound         = &Error{Code: pb.Code_QUERY_NOT_FOUND}
	ErrSubscriptionParse     = &Error{Code: pb.Code_SUBSCRIPTION_PARSE_FAILED}
	ErrGroupNotExist         = &Error{Code: pb.Code_SUBSCRIPTION_GROUP_NOT_EXIST}
	ErrInvalidParameter      = &Error{Code: pb.Code_INVALID_PARAMETER}
	ErrBrokerNotExist        = &Error{Code: pb.Code_BROKER_NOT_EXIST}
	ErrMessageTooLarge       = &Error{Code: pb.Code_MESSAGE_TOO_LARGE}
	ErrIllegalTopic          = &Error{Code: pb.Code_ILLEGAL_TOPIC}
	ErrIllegalGroup          = &Error{Code: pb.Code_ILLEGAL_GROUP}
	ErrPropertiesTooLarge    = &Error{Code: pb.Code_PROPERTIES_TOO_LARGE}
	ErrDiskFull              = &Error{Code: pb.Code_DISK_FULL}
	ErrNotMaster             = &Error{Code: pb.Code_NOT_MASTER}
	ErrInSyncReplicasLacking = &Error{Code: pb.Code_IN_SYNC_REPLICAS_NOT_ENOUGH}
	ErrShuttingDown          = &Error{Code: pb.Code_SHUTTING_DOWN}
	ErrTimeout               = &Error{Code: pb.Code_TIMEOUT}
	ErrLockNotHeld           = &Error{Code: pb.Code_LOCK_NOT_HELD}
)

// OK is the status of a successful call.
var OK = &pb.Status{Code: pb.Code_OK}

// Status turns an error into a wire status: nil is OK, a coded error keeps
// its code, anything else is SYSTEM_ERROR with the error's text.
func Status(err error) *pb.Status {
	if err == nil {
		return OK
	}
	var we *Error
	if errors.As(err, &we) {
		return &pb.Status{Code: we.Code, Message: err.Error()}
	}
	return &pb.Status{Code: pb.Code_SYSTEM_ERROR, Message: err.Error()}
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
	return &Error{Code: st.Code, Msg: msg}
}

// CodeOf returns the wire code of err: OK for nil, SYSTEM_ERROR for an
// error without one.
func CodeOf(err error) pb.Code {
	if err == nil {
		return pb.Code_OK
	}
	var we *Error
	if errors.As(err, &we) {
		return we.Code
	}
	return pb.Code_SYSTEM_ERROR
}

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
