package grpcv5

import (
	"context"
	"errors"
	"fmt"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/internal/errcode"
)

// Every RPC of the service answers application errors inside its response
// (a v2.Status with gRPC status OK), as the official clients expect. Two
// kinds of error reach a response: the core's errcode errors, translated
// by coreCodes below, and the front end's own (errorf), which carry a v2
// code directly for the protocol's checks that have no core counterpart
// (an illegal tag, a missing client id, ...).

// codedError is an error that carries a v2 code.
type codedError struct {
	code v2.Code
	msg  string
}

func (e *codedError) Error() string { return e.msg }

// errorf returns an error answered with code.
func errorf(code v2.Code, format string, args ...any) error {
	return &codedError{code: code, msg: fmt.Sprintf(format, args...)}
}

// coreCodes translates the core's codes. A code missing here is answered
// INTERNAL_SERVER_ERROR. docs/rocketmq-compat/v5.md lists the table.
var coreCodes = map[errcode.Code]v2.Code{
	errcode.OK:                       v2.Code_OK,
	errcode.SystemError:              v2.Code_INTERNAL_SERVER_ERROR,
	errcode.SystemBusy:               v2.Code_TOO_MANY_REQUESTS,
	errcode.RequestNotSupported:      v2.Code_NOT_IMPLEMENTED,
	errcode.FlushDiskTimeout:         v2.Code_MASTER_PERSISTENCE_TIMEOUT,
	errcode.SlaveNotAvailable:        v2.Code_HA_NOT_AVAILABLE,
	errcode.FlushSlaveTimeout:        v2.Code_SLAVE_PERSISTENCE_TIMEOUT,
	errcode.MessageIllegal:           v2.Code_BAD_REQUEST,
	errcode.ServiceNotAvailable:      v2.Code_INTERNAL_SERVER_ERROR,
	errcode.NoPermission:             v2.Code_FORBIDDEN,
	errcode.Unauthenticated:          v2.Code_UNAUTHORIZED,
	errcode.TopicNotExist:            v2.Code_TOPIC_NOT_FOUND,
	errcode.TopicExistAlready:        v2.Code_BAD_REQUEST,
	errcode.PullNotFound:             v2.Code_MESSAGE_NOT_FOUND,
	errcode.PullRetryImmediately:     v2.Code_MESSAGE_NOT_FOUND,
	errcode.PullOffsetMoved:          v2.Code_ILLEGAL_OFFSET,
	errcode.QueryNotFound:            v2.Code_NOT_FOUND,
	errcode.SubscriptionParseFailed:  v2.Code_ILLEGAL_FILTER_EXPRESSION,
	errcode.SubscriptionGroupMissing: v2.Code_CONSUMER_GROUP_NOT_FOUND,
	errcode.InvalidParameter:         v2.Code_BAD_REQUEST,
	errcode.BrokerNotExist:           v2.Code_NOT_FOUND,
	errcode.MessageTooLarge:          v2.Code_MESSAGE_BODY_TOO_LARGE,
	errcode.IllegalTopic:             v2.Code_ILLEGAL_TOPIC,
	errcode.IllegalGroup:             v2.Code_ILLEGAL_CONSUMER_GROUP,
	errcode.PropertiesTooLarge:       v2.Code_MESSAGE_PROPERTIES_TOO_LARGE,
	errcode.DiskFull:                 v2.Code_INTERNAL_SERVER_ERROR,
	errcode.NotMaster:                v2.Code_INTERNAL_SERVER_ERROR,
	errcode.InSyncReplicasNotEnough:  v2.Code_HA_NOT_AVAILABLE,
	errcode.ShuttingDown:             v2.Code_INTERNAL_SERVER_ERROR,
	errcode.Timeout:                  v2.Code_PROXY_TIMEOUT,
	errcode.LockNotHeld:              v2.Code_FORBIDDEN,
	errcode.IllegalDeliveryTime:      v2.Code_ILLEGAL_DELIVERY_TIME,
	errcode.DelayAlreadyDelivered:    v2.Code_NOT_FOUND,
	errcode.TransactionStateConflict: v2.Code_BAD_REQUEST,
	errcode.TransactionNotFound:      v2.Code_INVALID_TRANSACTION_ID,
	errcode.InvalidReceiptHandle:     v2.Code_INVALID_RECEIPT_HANDLE,
	errcode.IllegalInvisibleTime:     v2.Code_ILLEGAL_INVISIBLE_TIME,
}

// codeOf is the v2 code err is answered with: OK for nil.
func codeOf(err error) v2.Code {
	if err == nil {
		return v2.Code_OK
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	var ee *errcode.Error
	if errors.As(err, &ee) {
		if c, ok := coreCodes[ee.Code]; ok {
			return c
		}
		return v2.Code_INTERNAL_SERVER_ERROR
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return v2.Code_PROXY_TIMEOUT
	}
	return v2.Code_INTERNAL_SERVER_ERROR
}

// statusOf is the response status of err: {OK, "OK"} for nil, else its
// code and message.
func statusOf(err error) *v2.Status {
	if err == nil {
		return okStatus()
	}
	return &v2.Status{Code: codeOf(err), Message: err.Error()}
}

// okStatus is the status of a call that succeeded.
func okStatus() *v2.Status { return &v2.Status{Code: v2.Code_OK, Message: v2.Code_OK.String()} }

// statusOfCodes is the top-level status of a call answered per entry, as
// Apache's proxy builds it: the entries' code when they share one (with
// its name as the message), MULTIPLE_RESULTS when they differ.
func statusOfCodes(entries []*v2.Status) *v2.Status {
	if len(entries) == 0 {
		return &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: "no entry was answered"}
	}
	first := entries[0]
	for _, e := range entries[1:] {
		if e.GetCode() != first.GetCode() {
			return &v2.Status{Code: v2.Code_MULTIPLE_RESULTS, Message: v2.Code_MULTIPLE_RESULTS.String()}
		}
	}
	if len(entries) == 1 {
		return &v2.Status{Code: first.GetCode(), Message: first.GetMessage()}
	}
	return &v2.Status{Code: first.GetCode(), Message: first.GetCode().String()}
}
