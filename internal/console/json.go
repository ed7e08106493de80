package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
)

// jsTime is a time as the API writes it: RFC 3339 in UTC with
// milliseconds, "" when zero.
type jsTime time.Time

const timeLayout = "2006-01-02T15:04:05.000Z"

func (t jsTime) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() || tt.UnixMilli() <= 0 {
		return []byte(`""`), nil
	}
	return []byte(`"` + tt.UTC().Format(timeLayout) + `"`), nil
}

func timeOf(t jsTime) time.Time { return time.Time(t) }

// UnmarshalJSON reads what MarshalJSON writes.
func (t *jsTime) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s == "" {
		*t = jsTime{}
		return nil
	}
	tt, err := time.Parse(time.RFC3339Nano, s)
	*t = jsTime(tt)
	return err
}

// jsDuration is a duration as a Go duration string ("1m30s").
type jsDuration time.Duration

func (d jsDuration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *jsDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	dd, err := time.ParseDuration(s)
	*d = jsDuration(dd)
	return err
}

func durations(ds []time.Duration) []jsDuration {
	out := make([]jsDuration, len(ds))
	for i, d := range ds {
		out[i] = jsDuration(d)
	}
	return out
}

// body is a message body: base64, and the text when it is UTF-8.
func body(b []byte) (b64 string, text *string) {
	b64 = base64.StdEncoding.EncodeToString(b)
	if utf8.Valid(b) {
		s := string(b)
		text = &s
	}
	return b64, text
}

// nonNil makes a nil slice an empty one, so that it is written [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

type errorBody struct {
	Error errorObj `json:"error"`
}

type errorObj struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// classify returns the code and HTTP status of err.
func classify(err error) (errcode.Code, int) {
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return ce.Code, statusOf(ce.Code)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errcode.Timeout, http.StatusGatewayTimeout
	case errors.Is(err, client.ErrNoNameServer), errors.Is(err, client.ErrBrokerUnreachable),
		errors.Is(err, client.ErrNoRoute), errors.Is(err, client.ErrClosed):
		return errcode.ServiceNotAvailable, http.StatusServiceUnavailable
	case errors.Is(err, client.ErrNoController):
		return errcode.RequestNotSupported, http.StatusNotFound
	case unimplemented(err):
		return errcode.RequestNotSupported, http.StatusNotImplemented
	}
	return errcode.SystemError, http.StatusBadGateway
}

func statusOf(c errcode.Code) int {
	switch c {
	case errcode.InvalidParameter, errcode.IllegalTopic, errcode.IllegalGroup, errcode.MessageIllegal,
		errcode.MessageTooLarge, errcode.PropertiesTooLarge, errcode.SubscriptionParseFailed,
		errcode.IllegalDeliveryTime:
		return http.StatusBadRequest
	case errcode.Unauthenticated:
		return http.StatusUnauthorized
	case errcode.NoPermission:
		return http.StatusForbidden
	case errcode.TopicNotExist, errcode.SubscriptionGroupMissing, errcode.QueryNotFound, errcode.BrokerNotExist,
		errcode.TransactionNotFound, errcode.RequestNotSupported:
		return http.StatusNotFound
	case errcode.TopicExistAlready, errcode.TransactionStateConflict, errcode.DelayAlreadyDelivered:
		return http.StatusConflict
	case errcode.ServiceNotAvailable, errcode.SystemBusy, errcode.NotMaster, errcode.ShuttingDown,
		errcode.SlaveNotAvailable, errcode.DiskFull:
		return http.StatusServiceUnavailable
	case errcode.Timeout, errcode.FlushDiskTimeout, errcode.FlushSlaveTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

func writeError(w http.ResponseWriter, err error) {
	code, status := classify(err)
	writeJSON(w, status, errorBody{Error: errorObj{Code: code.String(), Message: err.Error()}})
}

// badRequest is an INVALID_PARAMETER error.
func badRequest(format string, args ...any) error {
	return errcode.Errorf(errcode.InvalidParameter, format, args...)
}
