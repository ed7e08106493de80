package grpcv5

import (
	"context"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// maxChangeInvisible bounds ChangeInvisibleDuration's duration; 0 makes
// the message visible at once.
const maxChangeInvisible = 12 * time.Hour

// ChangeInvisibleDuration makes a received message visible again after
// the given duration (0 … 12 h) and answers a new receipt handle: the old
// one is spent (a later ack with it is INVALID_RECEIPT_HANDLE). When the
// message is next delivered its delivery attempt is one more. The push
// consumers' nack is this call with the backoff of the attempt. suspend
// (lite push consumers) is not supported: every change counts.
func (s *Service) ChangeInvisibleDuration(ctx context.Context, req *v2.ChangeInvisibleDurationRequest) (*v2.ChangeInvisibleDurationResponse, error) {
	group, topic, st := consumeNames(readMeta(ctx), req.GetGroup(), req.GetTopic())
	if st != nil {
		return &v2.ChangeInvisibleDurationResponse{Status: st}, nil
	}
	var d time.Duration
	if pd := req.GetInvisibleDuration(); pd != nil {
		d = pd.AsDuration()
		if pd.CheckValid() != nil || d < 0 || d > maxChangeInvisible {
			return &v2.ChangeInvisibleDurationResponse{Status: &v2.Status{Code: v2.Code_ILLEGAL_INVISIBLE_TIME,
				Message: "invisible duration " + d.String() + " is out of range [0s, " + maxChangeInvisible.String() + "]"}}, nil
		}
	}
	if req.GetReceiptHandle() == "" {
		return &v2.ChangeInvisibleDurationResponse{Status: &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE,
			Message: "receipt handle is empty"}}, nil
	}
	pm, err := s.b.ChangeInvisible(ctx, group, topic, req.GetReceiptHandle(), d)
	if err != nil {
		return &v2.ChangeInvisibleDurationResponse{Status: statusOf(err)}, nil
	}
	if pm.Handle == "" {
		// The client replaces its handle with the answer's, even an empty
		// one, which would break its next ack: never answer OK without one.
		return &v2.ChangeInvisibleDurationResponse{Status: &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR,
			Message: "no new receipt handle was issued"}}, nil
	}
	return &v2.ChangeInvisibleDurationResponse{
		Status:        okStatus(),
		ReceiptHandle: pm.Handle,
	}, nil
}
