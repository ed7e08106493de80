package remoting

import (
	"context"
	"encoding/json"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// checkClientBody is RocketMQ's CheckClientRequestBody: what a Java push
// consumer asks a broker before it subscribes with a filter other than
// tags.
type checkClientBody struct {
	ClientID         string `json:"clientId"`
	Group            string `json:"group"`
	SubscriptionData *struct {
		Topic          string `json:"topic"`
		SubString      string `json:"subString"`
		ExpressionType string `json:"expressionType"`
	} `json:"subscriptionData"`
}

// checkClientConfig serves CHECK_CLIENT_CONFIG (46) as RocketMQ does: a tag
// subscription (or none) is fine; an SQL92 one is refused with SYSTEM_ERROR
// when this broker does not filter by properties and with
// SUBSCRIPTION_PARSE_FAILED (the position of the error in the remark) when
// it does not compile.
func (f *Frontend) checkClientConfig(_ context.Context, _ *connState, req *rmq.Command) *rmq.Command {
	var body checkClientBody
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return req.Reply(rmq.InvalidParameter, "body is not CheckClientRequestBody JSON: "+err.Error())
		}
	}
	sd := body.SubscriptionData
	if sd == nil {
		return req.Reply(rmq.Success, "")
	}
	if t, err := broker.NormalizeExpressionType(sd.ExpressionType); err == nil && t == broker.ExprTag {
		return req.Reply(rmq.Success, "")
	}
	err := f.b.CheckFilter(sd.ExpressionType, sd.SubString)
	switch errcode.Of(err) {
	case errcode.OK:
		return req.Reply(rmq.Success, "")
	case errcode.NoPermission:
		return req.Reply(rmq.SystemError, err.Error())
	}
	return req.Reply(rmq.SubscriptionParseFailed, err.Error())
}
