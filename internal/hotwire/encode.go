package hotwire

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// AppendSendRequest appends req's protobuf encoding to dst, growing dst
// once.
func AppendSendRequest(dst []byte, req *pb.SendRequest) []byte {
	var small [64]int
	sizes := small[:0]
	if len(req.Messages) > len(small) {
		sizes = make([]int, 0, len(req.Messages))
	}
	total := int64Size(int64(req.RequestId)) + stringSize(req.ProducerGroup)
	for _, m := range req.Messages {
		n := messageSize(m)
		sizes = append(sizes, n)
		total += 1 + protowire.SizeBytes(n) // written even when empty
	}
	dst = slices.Grow(dst, total)
	if req.RequestId != 0 {
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, req.RequestId)
	}
	dst = appendString(dst, 2, req.ProducerGroup)
	for i, m := range req.Messages {
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizes[i]))
		dst = appendMessage(dst, m)
	}
	return dst
}

// messageSize is the length of m's encoding.
func messageSize(m *pb.Message) int {
	n := stringSize(m.Topic) + int32Size(m.QueueId) + int32Size(m.Flag) + bytesSize(len(m.Body))
	for k, v := range m.Properties {
		n += 1 + protowire.SizeBytes(entrySize(k, v))
	}
	return n + int64Size(m.BornTimestamp) + stringSize(m.BornHost) + int32Size(m.SysFlag) + int32Size(m.ReconsumeTimes)
}

// entrySize is the length of a property's map entry.
func entrySize(k, v string) int {
	return 2 + protowire.SizeBytes(len(k)) + protowire.SizeBytes(len(v))
}

func appendMessage(dst []byte, m *pb.Message) []byte {
	dst = appendString(dst, 1, m.Topic)
	dst = appendInt32(dst, 2, m.QueueId)
	dst = appendInt32(dst, 3, m.Flag)
	if len(m.Body) > 0 {
		dst = protowire.AppendTag(dst, 4, protowire.BytesType)
		dst = protowire.AppendBytes(dst, m.Body)
	}
	for k, v := range m.Properties {
		// Map entries carry both fields, even empty ones, as protobuf's
		// encoder writes them.
		dst = protowire.AppendTag(dst, 5, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(entrySize(k, v)))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, k)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendString(dst, v)
	}
	if m.BornTimestamp != 0 {
		dst = protowire.AppendTag(dst, 6, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(m.BornTimestamp))
	}
	dst = appendString(dst, 7, m.BornHost)
	dst = appendInt32(dst, 8, m.SysFlag)
	return appendInt32(dst, 9, m.ReconsumeTimes)
}

// AppendSendResponse appends resp's protobuf encoding to dst.
func AppendSendResponse(dst []byte, resp *pb.SendResponse) []byte {
	if resp.RequestId != 0 {
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, resp.RequestId)
	}
	if st := resp.Status; st != nil {
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(int32Size(int32(st.Code))+stringSize(st.Message)))
		dst = appendInt32(dst, 1, int32(st.Code))
		dst = appendString(dst, 2, st.Message)
	}
	for _, r := range resp.Results {
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		if r == nil {
			dst = append(dst, 0)
			continue
		}
		n := stringSize(r.MsgId) + stringSize(r.UniqueId) + int32Size(r.QueueId) + int64Size(r.QueueOffset) + int64Size(r.CommitLogOffset)
		dst = protowire.AppendVarint(dst, uint64(n))
		dst = appendString(dst, 1, r.MsgId)
		dst = appendString(dst, 2, r.UniqueId)
		dst = appendInt32(dst, 3, r.QueueId)
		dst = appendInt64(dst, 4, r.QueueOffset)
		dst = appendInt64(dst, 5, r.CommitLogOffset)
	}
	return appendString(dst, 4, resp.BrokerName)
}

// The fields below are all numbered under 16: a tag takes one byte.

func stringSize(s string) int { return bytesSize(len(s)) }

// bytesSize is the size of a bytes field of n bytes (none when empty).
func bytesSize(n int) int {
	if n == 0 {
		return 0
	}
	return 1 + protowire.SizeBytes(n)
}

// int32Size: a negative int32 is encoded as its 64-bit sign extension.
func int32Size(v int32) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(uint64(int64(v)))
}

func int64Size(v int64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(uint64(v))
}

func appendString(dst []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendString(dst, s)
}

func appendInt32(dst []byte, num protowire.Number, v int32) []byte {
	if v == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, uint64(int64(v)))
}

func appendInt64(dst []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, uint64(v))
}
