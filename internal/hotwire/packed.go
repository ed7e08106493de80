package hotwire

import (
	"net/netip"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// AppendPackedSendRequest appends req's protobuf encoding to dst with its
// messages packed (SendRequest.packed, message.AppendPacked) in place of
// field 3: their topic and queue once, in packed_topic and
// packed_queue_id. It reports false, leaving dst as it was, when they
// cannot be packed: no message, more than one topic or queue, or
// properties a broker refuses (the caller then sends them as they are, and
// the broker answers with its own coded refusal).
func AppendPackedSendRequest(dst []byte, req *pb.SendRequest) ([]byte, bool) {
	if len(req.Messages) == 0 || req.Messages[0] == nil {
		return dst, false
	}
	first := req.Messages[0]
	least := 0 // the entries take at least this much: their length's width is that of least, mostly
	props := 0
	for _, m := range req.Messages {
		if m == nil || m.Topic != first.Topic || m.QueueId != first.QueueId {
			return dst, false
		}
		least += message.MinPackedSize + len(m.Body)
		props += len(m.Properties)
	}
	width := protowire.SizeVarint(uint64(least))
	room := int64Size(int64(req.RequestId)) + stringSize(req.ProducerGroup) + stringSize(first.Topic) +
		int32Size(first.QueueId) + 1 + width + least + 12*len(req.Messages) + 32*props
	start := len(dst)
	dst = slices.Grow(dst, room)
	if req.RequestId != 0 {
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, req.RequestId)
	}
	dst = appendString(dst, 2, req.ProducerGroup)
	dst = appendString(dst, 5, first.Topic)
	dst = appendInt32(dst, 6, first.QueueId)
	dst = protowire.AppendTag(dst, 4, protowire.BytesType)
	lenAt := len(dst)
	dst = dst[:lenAt+width]
	var (
		e    message.Ext
		host string
		ap   netip.AddrPort
		err  error
	)
	for i, m := range req.Messages {
		if i == 0 || m.BornHost != host {
			host = m.BornHost
			ap, _ = netip.ParseAddrPort(host) // zero when it does not parse, as the broker reads it
		}
		e = message.Ext{
			Message:        message.Message{Flag: m.Flag, Body: m.Body, Properties: m.Properties},
			SysFlag:        m.SysFlag,
			BornTimestamp:  m.BornTimestamp,
			BornHost:       ap,
			ReconsumeTimes: m.ReconsumeTimes,
		}
		if dst, err = message.AppendPacked(dst, &e); err != nil {
			return dst[:start], false
		}
	}
	// The length is known now. When its width is not the one guessed
	// (properties of many bytes), the entries move to make it room.
	n := len(dst) - lenAt - width
	if need := protowire.SizeVarint(uint64(n)); need != width {
		if need > width {
			dst = slices.Grow(dst, need-width)
		}
		dst = dst[:lenAt+need+n]
		copy(dst[lenAt+need:], dst[lenAt+width:lenAt+width+n])
	}
	protowire.AppendVarint(dst[lenAt:lenAt], uint64(n))
	return dst, true
}
