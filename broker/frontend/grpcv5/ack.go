package grpcv5

import (
	"context"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// AckMessage acknowledges received messages, each entry on its own: the
// entries' statuses are returned in order, and the response's status is
// their common code, or MULTIPLE_RESULTS when they differ. A handle that
// cannot be decoded, has expired, was replaced (redelivery, changed
// invisibility) or belongs to another group is INVALID_RECEIPT_HANDLE.
func (s *Service) AckMessage(ctx context.Context, req *v2.AckMessageRequest) (*v2.AckMessageResponse, error) {
	group, topic, st := consumeNames(readMeta(ctx), req.GetGroup(), req.GetTopic())
	if st != nil {
		return &v2.AckMessageResponse{Status: st}, nil
	}
	if len(req.GetEntries()) == 0 {
		return &v2.AckMessageResponse{Status: &v2.Status{Code: v2.Code_BAD_REQUEST, Message: "no entries to acknowledge"}}, nil
	}
	resp := &v2.AckMessageResponse{Entries: make([]*v2.AckMessageResultEntry, 0, len(req.GetEntries()))}
	for _, e := range req.GetEntries() {
		var est *v2.Status
		if e.GetReceiptHandle() == "" {
			est = &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE, Message: "receipt handle is empty"}
		} else {
			est = statusOf(s.b.PopAck(ctx, group, topic, e.GetReceiptHandle()))
		}
		resp.Entries = append(resp.Entries, &v2.AckMessageResultEntry{
			MessageId:     e.GetMessageId(),
			ReceiptHandle: e.GetReceiptHandle(),
			Status:        est,
		})
	}
	sts := make([]*v2.Status, len(resp.Entries))
	for i, e := range resp.Entries {
		sts[i] = e.GetStatus()
	}
	resp.Status = statusOfCodes(sts)
	return resp, nil
}
