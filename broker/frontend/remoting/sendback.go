package remoting

import (
	"context"

	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// sendBack serves CONSUMER_SEND_MSG_BACK (36): a consumer gives up on a
// message for now. The broker stores a copy in %RETRY%<group>, delayed by
// delayLevel (0: 3 + the times it was already reconsumed), or in
// %DLQ%<group> when delayLevel is negative or the message was reconsumed
// maxReconsumeTimes times (the header's value, as RocketMQ honours it for
// every current client; 0 sends it straight to the dead-letter topic).
// The answer is SUCCESS only once the copy is stored: on any other code the
// Go client sends the copy itself, and v2.1.2 clients drop the retry.
func (f *Frontend) sendBack(ctx context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	var sr retry.SendBackRequest
	var err error
	bad := func(e error) *rmq.Command {
		return errorReply(req, errcode.Errorf(errcode.InvalidParameter, "send back header: %v", e))
	}
	if sr.Group, err = req.Required("group"); err != nil {
		return bad(err)
	}
	if sr.CommitLogOffset, err = req.Int64("offset"); err != nil {
		return bad(err)
	}
	if sr.DelayLevel, err = req.OptInt32("delayLevel", 0); err != nil {
		return bad(err)
	}
	max, err := req.OptInt32("maxReconsumeTimes", -1)
	if err != nil {
		return bad(err)
	}
	switch {
	case max == 0:
		sr.DelayLevel = -1 // no retry at all: the core's 0 would mean its default
	case max > 0:
		sr.MaxReconsumeTimes = max
	}
	sr.OriginMsgID = req.String("originMsgId")
	if _, err := f.b.Retry().SendBack(ctx, sr); err != nil {
		return errorReply(req, err)
	}
	return req.Reply(rmq.Success, "")
}
