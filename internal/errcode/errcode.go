// Package errcode holds Bolide's error codes and the coded error type that
// the broker core returns. It imports nothing but the standard library, so
// the core can speak in codes without knowing any protocol: each front end
// maps a Code to its own wire (bolide.v1's Code enum shares the numbers and
// names below; internal/wire keeps the two in step and a test checks it).
package errcode

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Code is the reason a call failed. OK is no failure.
type Code int32

// The codes. Values below 1000 are RocketMQ's response codes; 1000 and up
// are Bolide's own.
const (
	OK                       Code = 0
	SystemError              Code = 1
	SystemBusy               Code = 2
	RequestNotSupported      Code = 3
	FlushDiskTimeout         Code = 10
	SlaveNotAvailable        Code = 11
	FlushSlaveTimeout        Code = 12
	MessageIllegal           Code = 13
	ServiceNotAvailable      Code = 14
	NoPermission             Code = 16
	TopicNotExist            Code = 17
	TopicExistAlready        Code = 18
	PullNotFound             Code = 19
	PullRetryImmediately     Code = 20
	PullOffsetMoved          Code = 21
	QueryNotFound            Code = 22
	SubscriptionParseFailed  Code = 23
	SubscriptionGroupMissing Code = 26
	InvalidParameter         Code = 29
	BrokerNotExist           Code = 211
	MessageTooLarge          Code = 1000
	IllegalTopic             Code = 1001
	IllegalGroup             Code = 1002
	PropertiesTooLarge       Code = 1003
	DiskFull                 Code = 1004
	NotMaster                Code = 1005
	InSyncReplicasNotEnough  Code = 1006
	ShuttingDown             Code = 1007
	Timeout                  Code = 1008
	LockNotHeld              Code = 1009
	IllegalDeliveryTime      Code = 1100
	DelayAlreadyDelivered    Code = 1101
	TransactionStateConflict Code = 1200
	TransactionNotFound      Code = 1201
	// POP consumption (broker/pop).
	InvalidReceiptHandle Code = 1300
	IllegalInvisibleTime Code = 1301
	// Automatic failover (package controller).
	ControllerNotLeader          Code = 1400
	ControllerFenced             Code = 1401
	ControllerMasterNotAvailable Code = 1402
	// Security (package auth): the caller could not be authenticated — no
	// credentials, an unknown access key, a wrong signature, an expired or
	// replayed date. A caller who is known but lacks a permission gets
	// NoPermission.
	Unauthenticated Code = 1500
)

// names are the codes' upper-case names, the same as bolide.v1's enum.
var names = map[Code]string{
	OK:                           "OK",
	SystemError:                  "SYSTEM_ERROR",
	SystemBusy:                   "SYSTEM_BUSY",
	RequestNotSupported:          "REQUEST_NOT_SUPPORTED",
	FlushDiskTimeout:             "FLUSH_DISK_TIMEOUT",
	SlaveNotAvailable:            "SLAVE_NOT_AVAILABLE",
	FlushSlaveTimeout:            "FLUSH_SLAVE_TIMEOUT",
	MessageIllegal:               "MESSAGE_ILLEGAL",
	ServiceNotAvailable:          "SERVICE_NOT_AVAILABLE",
	NoPermission:                 "NO_PERMISSION",
	TopicNotExist:                "TOPIC_NOT_EXIST",
	TopicExistAlready:            "TOPIC_EXIST_ALREADY",
	PullNotFound:                 "PULL_NOT_FOUND",
	PullRetryImmediately:         "PULL_RETRY_IMMEDIATELY",
	PullOffsetMoved:              "PULL_OFFSET_MOVED",
	QueryNotFound:                "QUERY_NOT_FOUND",
	SubscriptionParseFailed:      "SUBSCRIPTION_PARSE_FAILED",
	SubscriptionGroupMissing:     "SUBSCRIPTION_GROUP_NOT_EXIST",
	InvalidParameter:             "INVALID_PARAMETER",
	BrokerNotExist:               "BROKER_NOT_EXIST",
	MessageTooLarge:              "MESSAGE_TOO_LARGE",
	IllegalTopic:                 "ILLEGAL_TOPIC",
	IllegalGroup:                 "ILLEGAL_GROUP",
	PropertiesTooLarge:           "PROPERTIES_TOO_LARGE",
	DiskFull:                     "DISK_FULL",
	NotMaster:                    "NOT_MASTER",
	InSyncReplicasNotEnough:      "IN_SYNC_REPLICAS_NOT_ENOUGH",
	ShuttingDown:                 "SHUTTING_DOWN",
	Timeout:                      "TIMEOUT",
	LockNotHeld:                  "LOCK_NOT_HELD",
	IllegalDeliveryTime:          "ILLEGAL_DELIVERY_TIME",
	DelayAlreadyDelivered:        "DELAY_ALREADY_DELIVERED",
	TransactionStateConflict:     "TRANSACTION_STATE_CONFLICT",
	TransactionNotFound:          "TRANSACTION_NOT_FOUND",
	InvalidReceiptHandle:         "INVALID_RECEIPT_HANDLE",
	IllegalInvisibleTime:         "ILLEGAL_INVISIBLE_TIME",
	ControllerNotLeader:          "CONTROLLER_NOT_LEADER",
	ControllerFenced:             "CONTROLLER_FENCED",
	ControllerMasterNotAvailable: "CONTROLLER_MASTER_NOT_AVAILABLE",
	Unauthenticated:              "UNAUTHENTICATED",
}

// String is the code's upper-case name ("TOPIC_NOT_EXIST"), or its number
// for a code this build does not know.
func (c Code) String() string {
	if n, ok := names[c]; ok {
		return n
	}
	return strconv.Itoa(int(c))
}

// Text is the code's name in lower-case words ("topic not exist").
func (c Code) Text() string {
	return strings.ToLower(strings.ReplaceAll(c.String(), "_", " "))
}

// Codes lists every known code in ascending order.
func Codes() []Code {
	out := make([]Code, 0, len(names))
	for c := range names {
		out = append(out, c)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Error is an error with a code. Errors of one code match each other with
// errors.Is, whatever their message, so the sentinels below match any
// error of their code.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Code.Text()
	}
	return e.Msg
}

// Is matches any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf builds a coded error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Of returns the code of err: OK for nil, SystemError for an error that
// carries none.
func Of(err error) Code {
	if err == nil {
		return OK
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return SystemError
}

// Sentinels for errors.Is.
var (
	ErrSystem                = &Error{Code: SystemError}
	ErrBusy                  = &Error{Code: SystemBusy}
	ErrNotSupported          = &Error{Code: RequestNotSupported}
	ErrFlushDiskTimeout      = &Error{Code: FlushDiskTimeout}
	ErrSlaveNotAvailable     = &Error{Code: SlaveNotAvailable}
	ErrFlushSlaveTimeout     = &Error{Code: FlushSlaveTimeout}
	ErrMessageIllegal        = &Error{Code: MessageIllegal}
	ErrServiceNotAvailable   = &Error{Code: ServiceNotAvailable}
	ErrNoPermission          = &Error{Code: NoPermission}
	ErrTopicNotExist         = &Error{Code: TopicNotExist}
	ErrTopicExists           = &Error{Code: TopicExistAlready}
	ErrQueryNotFound         = &Error{Code: QueryNotFound}
	ErrSubscriptionParse     = &Error{Code: SubscriptionParseFailed}
	ErrGroupNotExist         = &Error{Code: SubscriptionGroupMissing}
	ErrInvalidParameter      = &Error{Code: InvalidParameter}
	ErrBrokerNotExist        = &Error{Code: BrokerNotExist}
	ErrMessageTooLarge       = &Error{Code: MessageTooLarge}
	ErrIllegalTopic          = &Error{Code: IllegalTopic}
	ErrIllegalGroup          = &Error{Code: IllegalGroup}
	ErrPropertiesTooLarge    = &Error{Code: PropertiesTooLarge}
	ErrDiskFull              = &Error{Code: DiskFull}
	ErrNotMaster             = &Error{Code: NotMaster}
	ErrInSyncReplicasLacking = &Error{Code: InSyncReplicasNotEnough}
	ErrShuttingDown          = &Error{Code: ShuttingDown}
	ErrTimeout               = &Error{Code: Timeout}
	ErrLockNotHeld           = &Error{Code: LockNotHeld}
	ErrInvalidReceiptHandle  = &Error{Code: InvalidReceiptHandle}
	ErrIllegalInvisibleTime  = &Error{Code: IllegalInvisibleTime}
	ErrUnauthenticated       = &Error{Code: Unauthenticated}
)
