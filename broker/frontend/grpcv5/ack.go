package grpcv5

import (
	"context"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// AckMessage acknowledges received messages, each entry on its own (all
// with one POP log append): the entries' statuses are returned in order,
// and the response's status is their common code, or MULTIPLE_RESULTS
// when they differ. A handle that
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
	entries := req.GetEntries()
	sts := make([]*v2.Status, len(entries))
	handles := make([]string, 0, len(entries))
	at := make([]int, 0, len(entries)) // entry index of handles[i]
	for i, e := range entries {
		if e.GetReceiptHandle() == "" {
			sts[i] = &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE, Message: "receipt handle is empty"}
			continue
		}
		handles = append(handles, e.GetReceiptHandle())
		at = append(at, i)
	}
	if len(handles) > 0 {
		// One POP log append for the whole request.
		errs := s.b.PopAckBatch(ctx, group, topic, handles)
		for j, i := range at {
			if j < len(errs) {
				sts[i] = statusOf(errs[j])
			} else {
				sts[i] = &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: "no acknowledgement result"}
			}
		}
	}
	resp := &v2.AckMessageResponse{Entries: make([]*v2.AckMessageResultEntry, len(entries))}
	for i, e := range entries {
		resp.Entries[i] = &v2.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: sts[i]}
	}
	resp.Status = statusOfCodes(sts)
	return resp, nil
}
