package grpcv5

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/topic"
)

// A delayed message can be recalled before it is due with the
// recall_handle its send answered: base64url of
// "v1 <topic> <broker name> <delivery ms> <message id>", Apache's
// RecallMessageHandle format (the topic folded with its namespace).

// recallVersion is the handle format's version.
const recallVersion = "v1"

// recallHandle is the handle of a delayed message.
func recallHandle(t, brokerName string, deliverMS int64, id string) string {
	raw := strings.Join([]string{recallVersion, t, brokerName, strconv.FormatInt(deliverMS, 10), id}, " ")
	return base64.URLEncoding.EncodeToString([]byte(raw))
}

// parseRecallHandle returns a handle's topic, broker name and message id.
func parseRecallHandle(h string) (t, brokerName, id string, ok bool) {
	raw, err := base64.URLEncoding.DecodeString(h)
	if err != nil {
		if raw, err = base64.RawURLEncoding.DecodeString(h); err != nil {
			return "", "", "", false
		}
	}
	f := strings.Split(string(raw), " ")
	if len(f) < 5 || f[0] != recallVersion || f[1] == "" || f[2] == "" || f[4] == "" {
		return "", "", "", false
	}
	return f[1], f[2], f[4], true
}

// RecallMessage cancels a delayed message that is not due yet. The handle
// must be one this broker gave: the Go client sends the call to the first
// broker of the topic's route, which Apache's proxy forwards to the broker
// the handle names; Bolide answers BAD_REQUEST instead (recall on a topic
// served by one broker group, or send to the broker named in the handle).
// A message already delivered, or unknown, is NOT_FOUND.
func (s *Service) RecallMessage(ctx context.Context, req *v2.RecallMessageRequest) (*v2.RecallMessageResponse, error) {
	id, err := s.recall(ctx, readMeta(ctx), req)
	return &v2.RecallMessageResponse{Status: statusOf(err), MessageId: id}, nil
}

func (s *Service) recall(ctx context.Context, m callMeta, req *v2.RecallMessageRequest) (string, error) {
	t, err := m.topicName(req.GetTopic())
	if err != nil {
		return "", err
	}
	ht, brokerName, id, ok := parseRecallHandle(req.GetRecallHandle())
	switch {
	case !ok:
		return "", errorf(v2.Code_BAD_REQUEST, "recall handle is invalid")
	case ht != t:
		return "", errorf(v2.Code_BAD_REQUEST, "recall handle is of topic %s, not %s", ht, t)
	case brokerName != s.limits.brokerName:
		return "", errorf(v2.Code_BAD_REQUEST, "recall handle is of broker %s, this is %s", brokerName, s.limits.brokerName)
	}
	tc, ok := s.topics.get(t)
	if !ok {
		return "", errorf(v2.Code_TOPIC_NOT_FOUND, "topic %s does not exist on broker %s", t, s.limits.brokerName)
	}
	if !tc.Accepts(topic.TypeDelay) {
		return "", errorf(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "topic %s does not accept delayed messages (type %s)", t, tc.MessageType())
	}
	if _, _, err := s.b.CancelDelayed(broker.WithFrontend(ctx, frontendName), t, id); err != nil {
		return "", err
	}
	return id, nil
}
