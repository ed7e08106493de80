package grpcv5

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/hex"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/internal/v5wire"
	"github.com/bolide-mq/bolide/message"
)

// How a v2.Message is stored (the record is RocketMQ's, so remoting
// clients and Bolide's SDK read what v5 clients send, and the other way):
//
//	system_properties.message_id     → UNIQ_KEY (the client's id is the message id)
//	system_properties.tag            → TAGS
//	system_properties.keys           → KEYS (joined by " ")
//	system_properties.message_group  → __SHARDINGKEY (and the queue: hash of the group)
//	system_properties.delivery_timestamp → TIMER_DELIVER_MS (Bolide's timer)
//	TRANSACTION type                 → TRAN_MSG=true, PGROUP=<topic> (half message)
//	orphaned_transaction_recovery_duration → CHECK_IMMUNITY_TIME_IN_SECONDS
//	system_properties.trace_context  → TRACE_CONTEXT
//	system_properties.born_host      → __BORNHOST (the client's host name);
//	                                   the record's born host is the connection's address
//	system_properties.born_timestamp → the record's born timestamp
//	user_properties                  → properties, as they are
//	body (GZIP encoding)             → stored inflated

// Properties the v5 protocol carries in system properties.
const (
	propertyTraceContext = "TRACE_CONTEXT"
	propertyBornHost     = "__BORNHOST"
)

// Limits of what a client may send (Apache's proxy defaults).
const (
	maxUserProperties     = 128
	maxUserPropertiesSize = 16 << 10 // user properties, tag and keys together
	maxMessageGroupLen    = 64       // bytes; a group must be shorter
	maxRecoveryDuration   = time.Hour
)

// systemPropertyKeys are the property keys a client may not set as user
// properties (ILLEGAL_MESSAGE_PROPERTY_KEY): RocketMQ's MessageConst
// system set, plus the keys Bolide and the v5 mapping set themselves. A
// stored message's other properties are its user properties.
var systemPropertyKeys = func() map[string]bool {
	m := make(map[string]bool)
	for _, k := range []string{
		"TRACE_ON", "MSG_REGION", message.PropertyKeys, message.PropertyTags, message.PropertyWaitStoreMsgOK,
		message.PropertyDelayLevel, message.PropertyRetryTopic, message.PropertyRealTopic, message.PropertyRealQueueID,
		message.PropertyTransactionPrepared, message.PropertyProducerGroup, message.PropertyMinOffset,
		message.PropertyMaxOffset, "BUYER_ID", message.PropertyOriginMessageID, "TRANSFER_FLAG", "CORRECTION_FLAG",
		"MQ2_FLAG", message.PropertyReconsumeTime, message.PropertyUniqueKey, message.PropertyMaxReconsumeTimes,
		message.PropertyConsumeStartTime, "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME",
		message.PropertyTransactionPreparedQOff, "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID",
		"REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET",
		message.PropertyTimerDelayMS, message.PropertyTimerDelaySec, message.PropertyTimerDeliverMS,
		"TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", message.PropertyTimerOutMS, "TIMER_DEL_UNIQKEY",
		"TIMER_DELAY_LEVEL", propertyBornHost, "BORN_TIMESTAMP", message.PropertyDLQOriginTopic,
		message.PropertyDLQOriginMessageID, message.PropertyCRC32,
		// Set by Bolide or by this mapping.
		message.PropertyShardingKey, message.PropertyTransactionID, message.PropertyTransactionCheckTimes,
		message.PropertyCheckImmunityTime, message.PropertyTimerOrigin, propertyTraceContext, txn.PropertyOutcome,
		txn.PropertyDiscardTime,
	} {
		m[k] = true
	}
	return m
}()

// hasControl reports whether s holds a control character (or is not
// UTF-8), which no tag, key, group, id or property may.
func hasControl(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// blank reports whether s is not empty but only white space.
func blank(s string) bool { return s != "" && strings.TrimSpace(s) == "" }

// sendType is the type a message is sent as, from what it carries, as
// Apache derives it: TRANSACTION when the client says so; else DELAY with
// a delivery timestamp; else FIFO with a message group; else NORMAL. A
// transactional message may be neither delayed nor grouped.
func sendType(pm *v2.Message) (string, error) {
	sp := pm.GetSystemProperties()
	switch {
	case sp.GetLiteTopic() != "":
		return "", errorf(v2.Code_NOT_IMPLEMENTED, "lite topics are not supported")
	case sp.Priority != nil:
		return "", errorf(v2.Code_NOT_IMPLEMENTED, "message priorities are not supported")
	case sp.GetMessageType() == v2.MessageType_TRANSACTION:
		if sp.DeliveryTimestamp != nil || sp.GetMessageGroup() != "" {
			return "", errorf(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a transactional message can have neither a delivery timestamp nor a message group")
		}
		return topic.TypeTransaction, nil
	case sp.DeliveryTimestamp != nil:
		return topic.TypeDelay, nil
	case sp.GetMessageGroup() != "":
		return topic.TypeFIFO, nil
	}
	return topic.TypeNormal, nil
}

// toExt checks one message of a send and builds what the core stores (to
// topic t, queue chosen by the caller). maxBody bounds the body; born is
// the connection's address.
func toExt(t string, pm *v2.Message, mt string, maxBody int, born netip.AddrPort) (*message.Ext, error) {
	sp := pm.GetSystemProperties()
	body := pm.GetBody()
	if sp.GetBodyEncoding() == v2.Encoding_GZIP {
		var err error
		if body, err = gunzip(body, maxBody); err != nil {
			return nil, err
		}
	}
	if len(body) == 0 {
		return nil, errorf(v2.Code_MESSAGE_BODY_EMPTY, "message body is empty")
	}
	if len(body) > maxBody {
		return nil, errorf(v2.Code_MESSAGE_BODY_TOO_LARGE, "message body of %d bytes exceeds the limit of %d", len(body), maxBody)
	}

	up := pm.GetUserProperties()
	if len(up) > maxUserProperties {
		return nil, errorf(v2.Code_MESSAGE_PROPERTIES_TOO_LARGE, "%d user properties, at most %d", len(up), maxUserProperties)
	}
	props := make(map[string]string, len(up)+8)
	size := 0
	for k, v := range up {
		switch {
		case k == "" || blank(k):
			return nil, errorf(v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "a property key is empty")
		case systemPropertyKeys[k]:
			return nil, errorf(v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "property %s is used by the system", k)
		case hasControl(k):
			return nil, errorf(v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "property key %q has a control character", k)
		case hasControl(v):
			return nil, errorf(v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property %s has a control character", k)
		}
		props[k] = v
		size += len(k) + len(v)
	}

	if tag := sp.GetTag(); tag != "" {
		switch {
		case blank(tag):
			return nil, errorf(v2.Code_ILLEGAL_MESSAGE_TAG, "tag is only white space")
		case strings.Contains(tag, "|"):
			return nil, errorf(v2.Code_ILLEGAL_MESSAGE_TAG, "tag %q contains '|'", tag)
		case hasControl(tag):
			return nil, errorf(v2.Code_ILLEGAL_MESSAGE_TAG, "tag %q has a control character", tag)
		}
		props[message.PropertyTags] = tag
		size += len(tag)
	}
	if keys := sp.GetKeys(); len(keys) > 0 {
		kept := make([]string, 0, len(keys))
		for _, k := range keys {
			switch {
			case k == "":
				continue
			case blank(k):
				return nil, errorf(v2.Code_ILLEGAL_MESSAGE_KEY, "a key is only white space")
			case hasControl(k):
				return nil, errorf(v2.Code_ILLEGAL_MESSAGE_KEY, "key %q has a control character", k)
			}
			kept = append(kept, k)
			size += len(k)
		}
		if len(kept) > 0 {
			props[message.PropertyKeys] = strings.Join(kept, message.KeySeparator)
		}
	}
	if size > maxUserPropertiesSize {
		return nil, errorf(v2.Code_MESSAGE_PROPERTIES_TOO_LARGE, "user properties, tag and keys take %d bytes, at most %d", size, maxUserPropertiesSize)
	}

	id := sp.GetMessageId()
	switch {
	case strings.TrimSpace(id) == "":
		return nil, errorf(v2.Code_ILLEGAL_MESSAGE_ID, "message id is empty")
	case hasControl(id) || strings.ContainsAny(id, " \t"):
		return nil, errorf(v2.Code_ILLEGAL_MESSAGE_ID, "message id %q has white space or a control character", id)
	}
	props[message.PropertyUniqueKey] = id

	if g := sp.GetMessageGroup(); g != "" {
		switch {
		case blank(g):
			return nil, errorf(v2.Code_ILLEGAL_MESSAGE_GROUP, "message group is only white space")
		case len(g) >= maxMessageGroupLen:
			return nil, errorf(v2.Code_ILLEGAL_MESSAGE_GROUP, "message group of %d bytes, it must be shorter than %d", len(g), maxMessageGroupLen)
		case hasControl(g):
			return nil, errorf(v2.Code_ILLEGAL_MESSAGE_GROUP, "message group %q has a control character", g)
		}
		props[message.PropertyShardingKey] = g
	}
	if ts := sp.DeliveryTimestamp; ts != nil {
		if err := ts.CheckValid(); err != nil {
			return nil, errorf(v2.Code_ILLEGAL_DELIVERY_TIME, "delivery timestamp: %v", err)
		}
		props[message.PropertyTimerDeliverMS] = strconv.FormatInt(max(ts.AsTime().UnixMilli(), 0), 10)
	}
	if mt == topic.TypeTransaction {
		props[message.PropertyTransactionPrepared] = "true"
		props[message.PropertyProducerGroup] = t // Apache's proxy: the topic is the producer group
		if d := sp.OrphanedTransactionRecoveryDuration; d != nil {
			if err := d.CheckValid(); err != nil || d.AsDuration() < 0 || d.AsDuration() > maxRecoveryDuration {
				return nil, errorf(v2.Code_BAD_REQUEST, "orphaned transaction recovery duration %v is not within 0..%v", d.AsDuration(), maxRecoveryDuration)
			}
			if s := int64(d.AsDuration() / time.Second); s > 0 {
				props[message.PropertyCheckImmunityTime] = strconv.FormatInt(s, 10)
			}
		}
	}
	if tc := sp.GetTraceContext(); tc != "" && !hasControl(tc) {
		props[propertyTraceContext] = tc
	}
	if h := strings.TrimSpace(sp.GetBornHost()); h != "" && !hasControl(h) {
		props[propertyBornHost] = h
	}
	bornMS := time.Now().UnixMilli()
	if ts := sp.GetBornTimestamp(); ts != nil && ts.IsValid() {
		bornMS = ts.AsTime().UnixMilli()
	}
	if !born.IsValid() {
		born = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	return &message.Ext{
		Message:       message.Message{Topic: t, Body: body, Properties: props},
		BornTimestamp: bornMS,
		BornHost:      born,
	}, nil
}

// gunzip inflates a GZIP-encoded body, up to max bytes.
func gunzip(b []byte, max int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, errorf(v2.Code_MESSAGE_CORRUPTED, "body encoded GZIP is not gzip: %v", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, int64(max)+1))
	if err != nil {
		return nil, errorf(v2.Code_MESSAGE_CORRUPTED, "body encoded GZIP does not inflate: %v", err)
	}
	if len(out) > max {
		return nil, errorf(v2.Code_MESSAGE_BODY_TOO_LARGE, "body inflates to more than the limit of %d bytes", max)
	}
	return out, nil
}

// bodyDigest is the MD5 digest of a body, upper-case hex, as Apache sends it.
func bodyDigest(body []byte) *v2.Digest {
	sum := md5.Sum(body)
	return &v2.Digest{Type: v2.DigestType_MD5, Checksum: strings.ToUpper(hex.EncodeToString(sum[:]))}
}

// recoverCommand is the RecoverOrphanedTransactionCommand of a check-back:
// the half message as the producer sent it (real topic, unfolded for the
// client's namespace ns) and the transaction id EndTransaction names it by
// (the offset message id of the half message's newest copy).
func (s *Service) recoverCommand(c *txn.Check, ns string) (*v2.RecoverOrphanedTransactionCommand, error) {
	m, err := message.Decode(c.Record)
	if err != nil {
		return nil, err
	}
	realTopic, qid, err := message.RealDestination(m)
	if err != nil {
		return nil, err
	}
	sp := &v2.SystemProperties{
		MessageId:      m.UniqueID(),
		BodyDigest:     bodyDigest(m.Body),
		BodyEncoding:   v2.Encoding_IDENTITY,
		MessageType:    v2.MessageType_TRANSACTION,
		BornTimestamp:  timestamppb.New(time.UnixMilli(m.BornTimestamp)),
		BornHost:       m.Properties[propertyBornHost],
		StoreTimestamp: timestamppb.New(time.UnixMilli(m.StoreTimestamp)),
		StoreHost:      m.StoreHost.String(),
		QueueId:        qid,
		Keys:           m.Keys(),
	}
	if sp.BornHost == "" {
		sp.BornHost = m.BornHost.String()
	}
	if tag := m.Tags(); tag != "" {
		sp.Tag = &tag
	}
	if tc := m.Properties[propertyTraceContext]; tc != "" {
		sp.TraceContext = &tc
	}
	up := make(map[string]string)
	for k, v := range m.Properties {
		if !systemPropertyKeys[k] {
			up[k] = v
		}
	}
	id := c.OffsetMsgID
	if id == "" {
		id = message.OffsetMsgID(m.StoreHost, c.CommitLogOffset)
	}
	return &v2.RecoverOrphanedTransactionCommand{
		Message: &v2.Message{
			Topic:            &v2.Resource{Name: v5wire.Unfold(ns, realTopic), ResourceNamespace: ns},
			UserProperties:   up,
			SystemProperties: sp,
			Body:             m.Body,
		},
		TransactionId: id,
	}, nil
}
