package grpcv5

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/message"
)

// transientPrefix starts the names of properties RocketMQ never stores
// ("__RMQ.TRANSIENT."); one that was stored anyway is not delivered.
const transientPrefix = "__RMQ.TRANSIENT."

// moreSystemKeys are system properties of RocketMQ's that only the
// broker or a remoting batch sets, beyond systemPropertyKeys (which a v5
// producer may not set): not user properties either.
var moreSystemKeys = map[string]bool{
	"INNER_NUM": true, "INNER_BASE": true, "INNER_MULTI_DISPATCH": true,
	"PROPERTY_FORWARD_QUEUE_ID": true, "REDIRECT": true,
}

// userProperty reports whether a stored property travels as a user
// property: every property but RocketMQ's system set, the ones the
// protocol maps to system properties and the broker's bookkeeping.
func userProperty(key string) bool {
	return !systemPropertyKeys[key] && !moreSystemKeys[key] && !strings.HasPrefix(key, transientPrefix)
}

// poppedMessage is a message handed out by POP in the protocol's shape.
// topic is the Resource the receive named (so a namespace the client used
// comes back as it sent it).
func poppedMessage(topic *v2.Resource, pm broker.PoppedMessage) (*v2.Message, error) {
	e, err := message.Decode(pm.Record)
	if err != nil {
		return nil, fmt.Errorf("decode popped record at queue %d offset %d: %w", pm.QueueID, pm.QueueOffset, err)
	}
	m, err := storedMessage(topic, e)
	if err != nil {
		return nil, err
	}
	sp := m.SystemProperties
	handle := pm.Handle
	sp.ReceiptHandle = &handle
	sp.QueueId = pm.QueueID
	off := pm.QueueOffset
	sp.QueueOffset = &off
	attempt := pm.Attempt
	if attempt < 1 {
		attempt = 1
	}
	sp.DeliveryAttempt = &attempt
	if !pm.VisibleAt.IsZero() {
		if d := time.Until(pm.VisibleAt); d > 0 {
			sp.InvisibleDuration = durationpb.New(d)
		}
	}
	return m, nil
}

// storedMessage converts a stored message. The body is delivered as
// stored (IDENTITY): a compressed record is inflated first. Receipt
// handle, queue and attempt are the caller's (poppedMessage).
func storedMessage(topic *v2.Resource, e *message.Ext) (*v2.Message, error) {
	body, err := plainBody(e)
	if err != nil {
		return nil, err
	}
	props := e.Properties
	sp := &v2.SystemProperties{
		MessageId:      messageID(e),
		Keys:           message.SplitKeys(props[message.PropertyKeys]),
		BodyDigest:     bodyDigest(body),
		BodyEncoding:   v2.Encoding_IDENTITY,
		MessageType:    messageType(props),
		BornTimestamp:  timestamppb.New(time.UnixMilli(e.BornTimestamp)),
		BornHost:       bornHost(e),
		StoreTimestamp: timestamppb.New(time.UnixMilli(e.StoreTimestamp)),
		QueueId:        e.QueueID,
	}
	if e.StoreHost.IsValid() {
		sp.StoreHost = e.StoreHost.String()
	}
	if tag, ok := props[message.PropertyTags]; ok {
		sp.Tag = &tag
	}
	if g, ok := props[message.PropertyShardingKey]; ok && g != "" {
		sp.MessageGroup = &g
	}
	if tc, ok := props[propertyTraceContext]; ok {
		sp.TraceContext = &tc
	}
	if ms, ok := deliveryTime(props); ok {
		sp.DeliveryTimestamp = timestamppb.New(time.UnixMilli(ms))
	}
	off := e.QueueOffset
	sp.QueueOffset = &off
	attempt := e.ReconsumeTimes + 1
	sp.DeliveryAttempt = &attempt
	if dlq := deadLetterOrigin(props); dlq != nil {
		sp.DeadLetterQueue = dlq
	}
	user := make(map[string]string, len(props))
	for k, v := range props {
		if userProperty(k) {
			user[k] = v
		}
	}
	return &v2.Message{
		Topic:            &v2.Resource{ResourceNamespace: topic.GetResourceNamespace(), Name: topic.GetName()},
		UserProperties:   user,
		SystemProperties: sp,
		Body:             body,
	}, nil
}

// messageID is the id a v5 client knows a message by: the producer's
// unique key, or for a message stored without one the offset message id.
func messageID(e *message.Ext) string {
	if id := e.Properties[message.PropertyUniqueKey]; id != "" {
		return id
	}
	return e.MsgID()
}

// deadLetterOrigin is where a dead letter came from, nil for any other
// message. Its id is the one a v5 client knew the message by: a dead
// letter keeps its UNIQ_KEY, which is that id, while DLQ_ORIGIN_MESSAGE_ID
// holds what the remoting clients know it by (an offset message id when
// the message was moved by the broker).
func deadLetterOrigin(props map[string]string) *v2.DeadLetterQueue {
	topic, id := props[message.PropertyDLQOriginTopic], props[message.PropertyDLQOriginMessageID]
	if topic == "" || id == "" {
		return nil
	}
	if uniq := props[message.PropertyUniqueKey]; uniq != "" {
		id = uniq
	}
	return &v2.DeadLetterQueue{Topic: topic, MessageId: id}
}

// messageType classifies a stored message as Apache's proxy does: a
// transactional one, then a delayed one, then one with a message group.
func messageType(props map[string]string) v2.MessageType {
	switch {
	case props[message.PropertyTransactionPrepared] == "true":
		return v2.MessageType_TRANSACTION
	case props[message.PropertyDelayLevel] != "" || props[message.PropertyTimerDeliverMS] != "" ||
		props[message.PropertyTimerDelaySec] != "" || props[message.PropertyTimerDelayMS] != "":
		return v2.MessageType_DELAY
	case props[message.PropertyShardingKey] != "":
		return v2.MessageType_FIFO
	default:
		return v2.MessageType_NORMAL
	}
}

// deliveryTime is when a delayed message was due (ms since the epoch):
// the producer's TIMER_DELIVER_MS, else the due time the broker computed.
func deliveryTime(props map[string]string) (int64, bool) {
	for _, k := range []string{message.PropertyTimerDeliverMS, message.PropertyTimerOutMS} {
		if v := props[k]; v != "" {
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
				return ms, true
			}
		}
	}
	return 0, false
}

// bornHost is the producer's host: the name a v5 producer sent, else the
// address the record carries (without its port, as Apache's proxy writes).
func bornHost(e *message.Ext) string {
	if h := e.Properties[propertyBornHost]; h != "" {
		return h
	}
	if e.BornHost.IsValid() {
		return e.BornHost.Addr().Unmap().String()
	}
	return ""
}

// maxInflated bounds a compressed stored body once inflated.
const maxInflated = 130 << 20

// plainBody is a stored body as the producer sent it. Bodies are stored
// inflated; a record still flagged compressed (zlib, RocketMQ's default)
// is inflated here, since the protocol's GZIP encoding is not zlib.
func plainBody(e *message.Ext) ([]byte, error) {
	if e.SysFlag&message.SysFlagCompressed == 0 {
		return e.Body, nil
	}
	zr, err := zlib.NewReader(bytes.NewReader(e.Body))
	if err != nil {
		return nil, fmt.Errorf("stored body flagged compressed is not zlib: %w", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, maxInflated+1))
	if err != nil {
		return nil, fmt.Errorf("inflate stored body: %w", err)
	}
	if len(out) > maxInflated {
		return nil, fmt.Errorf("stored body inflates to more than %d bytes", maxInflated)
	}
	return out, nil
}
