package grpcv5

import (
	"context"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// ForwardMessageToDeadLetterQueue moves a received message to the group's
// dead letter queue (%DLQ%<group>, keeping its message id and recording
// its original topic and id) and acknowledges it. FIFO push consumers
// send it once their local retries are spent. The client's
// delivery_attempt and max_delivery_attempts are informational: the
// broker moves the message whatever they say.
func (s *Service) ForwardMessageToDeadLetterQueue(ctx context.Context, req *v2.ForwardMessageToDeadLetterQueueRequest) (*v2.ForwardMessageToDeadLetterQueueResponse, error) {
	group, topic, st := consumeNames(readMeta(ctx), req.GetGroup(), req.GetTopic())
	if st != nil {
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: st}, nil
	}
	if req.GetReceiptHandle() == "" {
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE,
			Message: "receipt handle is empty"}}, nil
	}
	err := s.b.PopToDLQ(ctx, group, topic, req.GetReceiptHandle())
	return &v2.ForwardMessageToDeadLetterQueueResponse{Status: statusOf(err)}, nil
}
