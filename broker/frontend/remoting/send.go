package remoting

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

// Properties and response fields of RocketMQ's send path that Bolide's
// message package does not name.
const (
	// propertyCluster is set on every message a single send stores, as
	// RocketMQ's broker does: a request-reply consumer builds the reply
	// topic (<cluster>_REPLY_TOPIC) from it.
	propertyCluster = "CLUSTER"
	// propertyReplyToClient names the client a reply goes to.
	propertyReplyToClient = "REPLY_TO_CLIENT"
	// propertyPushReplyTime is set on a reply when it is pushed.
	propertyPushReplyTime = "PUSH_REPLY_TIME"
	// propertyPopCK is reserved to the broker (RocketMQ drops it from sends).
	propertyPopCK = "POP_CK"
	// The region and trace switch every send response carries.
	extMsgRegion = "MSG_REGION"
	extTraceOn   = "TRACE_ON"
	// defaultRegion is RocketMQ's default regionId.
	defaultRegion = "DefaultRegion"
)

// Compression bits of a sysflag: bit 0 says the body is compressed, bits
// 8..10 name the algorithm (0 or 3 zlib, 1 LZ4, 2 Zstandard; RocketMQ's
// MessageSysFlag.COMPRESSION_*_TYPE).
const (
	compressionTypeMask  int32 = 0x7 << 8
	compressionTypeShift       = 8
	compressionZlib      int32 = 3
)

// storedSysFlagBits are the sysflag bits a client may set that a stored
// record keeps: the transaction type and the multi-tags bit. The body is
// stored inflated (compression bits cleared), the host bits are the
// encoder's, and inner batches are not supported.
const storedSysFlagBits = message.SysFlagMultiTags | message.SysFlagTransPrepared | message.SysFlagTransCommit

// uniqueIDs makes the UNIQ_KEY of a message sent without one.
var uniqueIDs = message.NewUniqueIDGenerator(netip.Addr{})

// sendHeaderNames are SendMessageRequestHeader's field names, long (SEND
// 10, SEND_REPLY 324) and short (SEND_MESSAGE_V2 310, SEND_BATCH 320,
// SEND_REPLY_V2 325: SendMessageRequestHeaderV2's a..n).
type sendHeaderNames struct {
	producerGroup, topic, defaultTopic, defaultTopicQueueNums, queueID, sysFlag, bornTimestamp, flag,
	properties, reconsumeTimes, maxReconsumeTimes, batch string
}

var (
	longSendNames = sendHeaderNames{"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
		"sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "maxReconsumeTimes", "batch"}
	shortSendNames = sendHeaderNames{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "l", "m"}
)

// sendHeader is a decoded send request header.
type sendHeader struct {
	producerGroup     string
	topic             string
	defaultTopic      string // echoed in a pushed reply
	defaultQueueNums  string
	queueID           int32 // < 0: the broker picks one
	sysFlag           int32
	bornTimestamp     int64
	flag              int32
	properties        string
	reconsumeTimes    int32
	maxReconsumeTimes int32 // < 0: not given
	batch             bool
}

// parseSendHeader reads a send request's header in either naming (the
// short names are recognised by their topic field "b", whatever the code:
// clients pair codes and namings differently).
func parseSendHeader(req *rmq.Command) (sendHeader, error) {
	n := longSendNames
	if req.Has("b") {
		n = shortSendNames
	}
	var h sendHeader
	var err error
	bad := func(e error) (sendHeader, error) {
		return sendHeader{}, errcode.Errorf(errcode.InvalidParameter, "send request header: %v", e)
	}
	if h.topic, err = req.Required(n.topic); err != nil {
		return bad(err)
	}
	h.producerGroup = req.String(n.producerGroup)
	h.defaultTopic, h.defaultQueueNums = req.String(n.defaultTopic), req.String(n.defaultTopicQueueNums)
	if h.queueID, err = req.OptInt32(n.queueID, -1); err != nil {
		return bad(err)
	}
	if h.sysFlag, err = req.OptInt32(n.sysFlag, 0); err != nil {
		return bad(err)
	}
	if h.bornTimestamp, err = req.OptInt64(n.bornTimestamp, time.Now().UnixMilli()); err != nil {
		return bad(err)
	}
	if h.flag, err = req.OptInt32(n.flag, 0); err != nil {
		return bad(err)
	}
	h.properties = req.String(n.properties)
	if h.reconsumeTimes, err = req.OptInt32(n.reconsumeTimes, 0); err != nil {
		return bad(err)
	}
	if h.maxReconsumeTimes, err = req.OptInt32(n.maxReconsumeTimes, -1); err != nil {
		return bad(err)
	}
	h.batch = req.Bool(n.batch) || req.Code == rmq.SendBatchMessage
	return h, nil
}

// parseProperties reads a property string (name \x01 value \x02 ...) as
// RocketMQ's clients and broker do: a pair without a value separator or
// with an empty name is skipped, a missing final separator is fine.
func parseProperties(s string) map[string]string {
	props := make(map[string]string, strings.Count(s, "\x02")+2)
	for len(s) > 0 {
		pair := s
		if i := strings.IndexByte(s, message.PropertySeparator); i >= 0 {
			pair, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if i := strings.IndexByte(pair, message.NameValueSeparator); i > 0 {
			props[pair[:i]] = pair[i+1:]
		}
	}
	return props
}

// inflate returns the body of a message sent with sysflag: a compressed
// body is inflated (zlib; LZ4 and Zstandard are refused), up to max bytes.
// Bodies are stored inflated so that every consumer — Bolide's SDK does
// not inflate — reads them as sent.
func inflate(body []byte, sysFlag int32, max int) ([]byte, error) {
	if sysFlag&message.SysFlagCompressed == 0 {
		return body, nil
	}
	switch t := (sysFlag & compressionTypeMask) >> compressionTypeShift; t {
	case 0, compressionZlib:
	default:
		name := map[int32]string{1: "LZ4", 2: "Zstandard"}[t]
		if name == "" {
			name = "type " + strconv.Itoa(int(t))
		}
		return nil, errcode.Errorf(errcode.MessageIllegal, "%s compressed bodies are not supported; use zlib (the clients' default)", name)
	}
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, errcode.Errorf(errcode.MessageIllegal, "compressed body is not zlib: %v", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, int64(max)+1))
	if err != nil {
		return nil, errcode.Errorf(errcode.MessageIllegal, "compressed body does not inflate: %v", err)
	}
	if len(out) > max {
		return nil, errcode.Errorf(errcode.MessageTooLarge, "compressed body inflates to more than the limit of %d bytes", max)
	}
	return out, nil
}

// batchEntry is one message of a SEND_BATCH body.
type batchEntry struct {
	flag       int32
	body       []byte
	properties string
}

// batchEntryFixed is an entry's size without its body and properties:
// TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN and PROPLEN.
const batchEntryFixed = 4 + 4 + 4 + 4 + 4 + 2

// decodeBatch splits a SEND_BATCH body: Message.encode entries, each
// int32 TOTALSIZE | int32 MAGICCODE | int32 BODYCRC | int32 FLAG |
// int32 BODYLEN | BODY | int16 PROPLEN | PROPERTIES, back to back.
func decodeBatch(b []byte) ([]batchEntry, error) {
	var out []batchEntry
	be := binary.BigEndian
	for off := 0; off < len(b); {
		rest := b[off:]
		if len(rest) < batchEntryFixed {
			return nil, errcode.Errorf(errcode.MessageIllegal, "batch entry %d at byte %d: %d bytes left, an entry takes at least %d", len(out), off, len(rest), batchEntryFixed)
		}
		total := int64(int32(be.Uint32(rest)))
		bodyLen := int64(int32(be.Uint32(rest[16:])))
		if bodyLen < 0 || 20+bodyLen+2 > int64(len(rest)) {
			return nil, errcode.Errorf(errcode.MessageIllegal, "batch entry %d at byte %d: body length %d exceeds the request", len(out), off, bodyLen)
		}
		propLen := int64(be.Uint16(rest[20+bodyLen:]))
		size := 20 + bodyLen + 2 + propLen
		if size > int64(len(rest)) || total != size {
			return nil, errcode.Errorf(errcode.MessageIllegal, "batch entry %d at byte %d: total size %d, fields take %d of %d bytes left", len(out), off, total, size, len(rest))
		}
		out = append(out, batchEntry{
			flag:       int32(be.Uint32(rest[12:])),
			body:       rest[20 : 20+bodyLen],
			properties: string(rest[22+bodyLen : size]),
		})
		off += int(size)
	}
	if len(out) == 0 {
		return nil, errcode.Errorf(errcode.MessageIllegal, "batch request holds no message")
	}
	return out, nil
}

// addrPort is a connection address as the store records born hosts.
func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// sendReply is a send response with the fields every one carries.
func sendReply(req *rmq.Command, code int32, remark string) *rmq.Command {
	// As req.Reply, with room for the result's msgId, queueId, queueOffset
	// and transactionId.
	return &rmq.Command{Code: code, Language: rmq.Language, Version: rmq.ServerVersion, Opaque: req.Opaque,
		Flag: rmq.FlagResponse, Remark: remark, Ext: map[string]string{extMsgRegion: defaultRegion, extTraceOn: "true"}}
}

// send serves SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE
// (320) and SEND_REPLY_MESSAGE(_V2) (324, 325).
func (f *Frontend) send(ctx context.Context, cs *connState, req *rmq.Command) *rmq.Command {
	h, err := parseSendHeader(req)
	if err != nil {
		return sendReply(req, responseCode(err), err.Error())
	}
	f.noteProducer(cs, req, h.producerGroup)
	msgs, err := f.sendMessages(cs, req, h)
	if err != nil {
		return sendReply(req, responseCode(err), err.Error())
	}
	if req.Code == rmq.SendReplyMessage || req.Code == rmq.SendReplyMessageV2 {
		return f.reply(ctx, cs, req, h, msgs[0])
	}
	if id := msgs[0].Properties[propertyReplyToClient]; id != "" && !h.batch {
		cs.smu.Lock()
		cs.requester = id
		cs.smu.Unlock()
	}
	queueID := msgs[0].QueueID // Send reroutes delayed and half messages
	var res []store.PutResult
	if !h.batch && message.IsRetryTopic(h.topic) {
		// A consumer's own send-back (when CONSUMER_SEND_MSG_BACK failed,
		// or an orderly consumer giving up): the core judges it by the
		// header's maxReconsumeTimes and may dead-letter it.
		res, err = f.b.SendRetry(ctx, msgs[0], h.maxReconsumeTimes)
		if message.IsDLQTopic(msgs[0].Topic) {
			queueID = msgs[0].QueueID // dead-lettered: the DLQ's queue
		}
	} else {
		res, err = f.b.Send(ctx, msgs)
	}
	code := responseCode(err)
	if err != nil {
		if len(res) != len(msgs) {
			return sendReply(req, code, err.Error())
		}
		// Stored, but not as safely as the broker's modes ask: answered as
		// RocketMQ does, with the results.
		switch errcode.Of(err) {
		case errcode.FlushDiskTimeout, errcode.FlushSlaveTimeout:
		case errcode.InSyncReplicasNotEnough:
			code = rmq.SlaveNotAvailable
		default:
			return sendReply(req, code, err.Error())
		}
	}
	resp := sendReply(req, code, "")
	if err != nil {
		resp.Remark = err.Error()
	}
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.MsgID
	}
	resp.Set("msgId", strings.Join(ids, ",")).
		SetInt("queueId", int64(queueID)).
		SetInt("queueOffset", res[0].QueueOffset)
	txID := msgs[0].UniqueID()
	if h.batch {
		txID = parseProperties(h.properties)[message.PropertyUniqueKey]
	}
	if txID != "" {
		resp.Set("transactionId", txID)
	}
	return resp
}

// sendMessages builds the messages of a send request.
func (f *Frontend) sendMessages(cs *connState, req *rmq.Command, h sendHeader) ([]*message.Ext, error) {
	cfg := f.config(cs)
	queueID := h.queueID
	if queueID < 0 {
		queueID = f.pickQueue(h.topic)
	}
	sysFlag := h.sysFlag & storedSysFlagBits
	born := addrPort(cs.conn.RemoteAddr())
	maxBody := f.b.MaxMessageSize() // live: maxMessageSize may change at runtime
	newMsg := func(flag int32, body []byte, props map[string]string) (*message.Ext, error) {
		body, err := inflate(body, h.sysFlag, maxBody)
		if err != nil {
			return nil, err
		}
		// A client resending the properties of a message it consumed (the
		// Java orderly consumer's dead letter, the Go client's retry) sends
		// the stored record's checksum trailer too: the store writes its own.
		delete(props, propertyPopCK)
		delete(props, message.PropertyCRC32)
		return &message.Ext{
			Message:        message.Message{Topic: h.topic, Flag: flag, Body: body, Properties: props},
			QueueID:        queueID,
			SysFlag:        sysFlag,
			BornTimestamp:  h.bornTimestamp,
			BornHost:       born,
			ReconsumeTimes: h.reconsumeTimes,
		}, nil
	}
	if !h.batch {
		props := parseProperties(h.properties)
		if props[message.PropertyUniqueKey] == "" {
			props[message.PropertyUniqueKey] = uniqueIDs.Next() // as RocketMQ's broker does
		}
		props[propertyCluster] = cfg.cluster
		m, err := newMsg(h.flag, req.Body, props)
		if err != nil {
			return nil, err
		}
		return []*message.Ext{m}, nil
	}
	if message.IsRetryTopic(h.topic) {
		return nil, errcode.Errorf(errcode.MessageIllegal, "a batch cannot be sent to retry topic %s", h.topic)
	}
	entries, err := decodeBatch(req.Body)
	if err != nil {
		return nil, err
	}
	msgs := make([]*message.Ext, len(entries))
	for i, e := range entries {
		if msgs[i], err = newMsg(e.flag, e.body, parseProperties(e.properties)); err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
	}
	return msgs, nil
}

// pickQueue picks a write queue of topic for a send that names none (the
// clients always name one; RocketMQ's broker picks at random).
func (f *Frontend) pickQueue(topic string) int32 {
	for _, tc := range f.b.TopicConfigs() {
		if tc.Name == topic && tc.WriteQueueNums > 0 {
			return rand.Int32N(tc.WriteQueueNums)
		}
	}
	return 0
}

// replyPushTimeout bounds PUSH_REPLY_MESSAGE_TO_CLIENT (RocketMQ: 3 s).
const replyPushTimeout = 3 * time.Second

// reply serves SEND_REPLY_MESSAGE(_V2): the reply goes to the requesting
// client (property REPLY_TO_CLIENT) as PUSH_REPLY_MESSAGE_TO_CLIENT on its
// connection to this broker, then is stored in the reply topic if it
// exists. The answer is the push's outcome, as RocketMQ's.
func (f *Frontend) reply(ctx context.Context, cs *connState, req *rmq.Command, h sendHeader, m *message.Ext) *rmq.Command {
	to := m.Properties[propertyReplyToClient]
	if to == "" {
		return sendReply(req, rmq.SystemError, "reply message has no property "+propertyReplyToClient)
	}
	target := f.clientConn(to)
	if target == nil {
		return sendReply(req, rmq.SystemError, "push reply message fail, channel of <"+to+"> not found")
	}
	m.Properties[propertyPushReplyTime] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	storeHost := f.b.Addr()
	push := rmq.NewRequest(rmq.PushReplyMessageToClient, map[string]string{
		"producerGroup":         h.producerGroup,
		"topic":                 h.topic,
		"defaultTopic":          h.defaultTopic,
		"defaultTopicQueueNums": h.defaultQueueNums,
		"queueId":               strconv.Itoa(int(m.QueueID)),
		"sysFlag":               strconv.Itoa(int(m.SysFlag)),
		"bornTimestamp":         strconv.FormatInt(m.BornTimestamp, 10),
		"flag":                  strconv.Itoa(int(m.Flag)),
		"properties":            string(message.EncodeProperties(m.Properties)),
		"reconsumeTimes":        strconv.Itoa(int(m.ReconsumeTimes)),
		"unitMode":              "false",
		"bornHost":              cs.conn.RemoteAddr().String(),
		"storeHost":             storeHost,
		"storeTimestamp":        strconv.FormatInt(time.Now().UnixMilli(), 10),
	}, m.Body)
	pctx, cancel := context.WithTimeout(ctx, replyPushTimeout)
	defer cancel()
	presp, err := target.Invoke(pctx, push)
	if err != nil || presp.Code != rmq.Success {
		remark := "push reply message to " + to + " failed"
		if err != nil {
			remark += ": " + err.Error()
		} else {
			remark += ": " + presp.Remark
		}
		return sendReply(req, rmq.SystemError, remark)
	}
	resp := sendReply(req, rmq.Success, "").Set("msgId", "0").SetInt("queueId", int64(m.QueueID)).SetInt("queueOffset", 0)
	res, err := f.b.Send(ctx, []*message.Ext{m})
	if err != nil {
		f.log.Debug("reply message pushed but not stored", zap.String("topic", h.topic), zap.Error(err))
		return resp
	}
	return resp.Set("msgId", res[0].MsgID).SetInt("queueOffset", res[0].QueueOffset)
}

// clientConn finds the connection of a client: its heartbeat named
// clientID or, before its first heartbeat, a request it sent did (the Go
// client may heartbeat 30 s after its first send).
func (f *Frontend) clientConn(clientID string) *rmq.Conn {
	for _, c := range f.srv.Conns() {
		cs, ok := c.Value().(*connState)
		if !ok {
			continue
		}
		cs.smu.Lock()
		ok = cs.hb.ClientID == clientID || cs.hb.ClientID == "" && cs.requester == clientID
		cs.smu.Unlock()
		if ok {
			return c
		}
	}
	return nil
}
