package v1wire

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/bolide-mq/bolide/internal/hotwire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// DecodeSendRequest decodes a bolide.v1 SendRequest as proto.Unmarshal
// does — the same messages for every input proto.Unmarshal accepts, an
// error for every input it refuses (FuzzDecodeSendRequest holds it to that)
// — but without the reflection protobuf's generic decoder goes through for
// every field and map entry, which was the largest part of the broker's CPU
// per message of a batched send after the write itself: the messages of a
// request are allocated together, the topic string once when every message
// repeats it, and the common property names not at all. Unknown fields are
// skipped (not kept). The bodies are copied out of b, which the caller may
// reuse at once.
func DecodeSendRequest(b []byte) (*pb.SendRequest, error) {
	return decodeSendRequest(b, false)
}

// DecodeSendRequestInPlace is DecodeSendRequest with the bodies left in b:
// each message's Body is a slice of b (capped, so an append copies), and
// the request is valid only as long as b is not reused. A broker serving
// the request before it reads the next frame into the buffer spares a copy
// of every body and an allocation the size of the request.
func DecodeSendRequestInPlace(b []byte) (*pb.SendRequest, error) {
	return decodeSendRequest(b, true)
}

func decodeSendRequest(b []byte, inPlace bool) (*pb.SendRequest, error) {
	req := new(pb.SendRequest)
	n, err := hotwire.CountField(b, 3)
	if err != nil {
		return nil, err
	}
	var slab []pb.Message
	if n > 0 {
		slab = make([]pb.Message, n)
		req.Messages = make([]*pb.Message, 0, n)
	}
	d := decoder{inPlace: inPlace}
	if !inPlace {
		d.bodies = make([]byte, 0, len(b)) // the bodies take less than the whole request
	}
	for len(b) > 0 {
		num, typ, l := hotwire.ConsumeTag(b)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			req.RequestId, b = v, b[l:]
		case num == 2 && typ == protowire.BytesType:
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			if !utf8.Valid(v) {
				return nil, fmt.Errorf("producer_group: %w", hotwire.ErrInvalidUTF8)
			}
			req.ProducerGroup, b = string(v), b[l:]
		case num == 3 && typ == protowire.BytesType:
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			m := &slab[len(req.Messages)]
			if err := d.message(v, m); err != nil {
				return nil, fmt.Errorf("message %d: %w", len(req.Messages), err)
			}
			req.Messages = append(req.Messages, m)
			b = b[l:]
		case num == 4 && typ == protowire.BytesType:
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			if inPlace {
				req.Packed = v[:len(v):len(v)]
			} else {
				req.Packed = append([]byte(nil), v...)
			}
			b = b[l:]
		case num == 5 && typ == protowire.BytesType:
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			if !utf8.Valid(v) {
				return nil, fmt.Errorf("packed_topic: %w", hotwire.ErrInvalidUTF8)
			}
			req.PackedTopic, b = string(v), b[l:]
		case num == 6 && typ == protowire.VarintType:
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			req.PackedQueueId, b = int32(v), b[l:]
		default:
			var err error
			if b, err = hotwire.SkipField(b, num, typ); err != nil {
				return nil, err
			}
		}
	}
	return req, nil
}

// decoder holds what the messages of one request share.
type decoder struct {
	topic  string // the last topic decoded (and checked), shared by the next that repeats it
	bodies []byte // the bodies, one after the other (one allocation a request)
	// inPlace: a body is a slice of the request, not a copy in bodies.
	inPlace bool
}

// message decodes one Message into m.
func (d *decoder) message(b []byte, m *pb.Message) error {
	for len(b) > 0 {
		num, typ, l := hotwire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		switch {
		case typ == protowire.VarintType && (num == 2 || num == 3 || num == 6 || num == 8 || num == 9):
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			b = b[l:]
			switch num {
			case 2:
				m.QueueId = int32(v)
			case 3:
				m.Flag = int32(v)
			case 6:
				m.BornTimestamp = int64(v)
			case 8:
				m.SysFlag = int32(v)
			case 9:
				m.ReconsumeTimes = int32(v)
			}
		case typ == protowire.BytesType && (num == 1 || num == 4 || num == 5 || num == 7):
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			b = b[l:]
			switch num {
			case 1:
				// The topic repeats in every message of a batch: only a
				// new one is checked and made a string (d.topic starts
				// as "", which is valid).
				if string(v) != d.topic {
					if !utf8.Valid(v) {
						return fmt.Errorf("topic: %w", hotwire.ErrInvalidUTF8)
					}
					d.topic = string(v)
				}
				m.Topic = d.topic
			case 4:
				m.Body = nil // when empty, as proto.Unmarshal leaves it
				switch {
				case len(v) == 0:
				case d.inPlace:
					m.Body = v[:len(v):len(v)] // capped: an append copies
				default:
					at := len(d.bodies)
					d.bodies = append(d.bodies, v...)
					m.Body = d.bodies[at:len(d.bodies):len(d.bodies)] // capped: an append copies
				}
			case 5:
				if m.Properties == nil {
					m.Properties = make(map[string]string, 4)
				}
				if err := decodeProperty(v, m.Properties); err != nil {
					return err
				}
			case 7:
				if !utf8.Valid(v) {
					return fmt.Errorf("born_host: %w", hotwire.ErrInvalidUTF8)
				}
				m.BornHost = string(v)
			}
		default:
			var err error
			if b, err = hotwire.SkipField(b, num, typ); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeProperty decodes one entry of the properties map into props: a
// missing key or value is "", a repeated field or key the last one wins.
func decodeProperty(b []byte, props map[string]string) error {
	var key, value []byte
	for len(b) > 0 {
		num, typ, l := hotwire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			b = b[l:]
			if num == 1 {
				// A key repeated in one entry: the earlier one is
				// checked now, the last one below (unless it is a known
				// name).
				if key != nil && !utf8.Valid(key) {
					return fmt.Errorf("property: %w", hotwire.ErrInvalidUTF8)
				}
				key = v
			} else {
				if !utf8.Valid(v) {
					return fmt.Errorf("property: %w", hotwire.ErrInvalidUTF8)
				}
				value = v
			}
			continue
		}
		var err error
		if b, err = hotwire.SkipField(b, num, typ); err != nil {
			return err
		}
	}
	name, known := propertyName(key)
	if !known && !utf8.Valid(key) {
		return fmt.Errorf("property: %w", hotwire.ErrInvalidUTF8)
	}
	props[name] = propertyValue(value)
	return nil
}

// propertyValue returns the value v, without allocating for the values of
// flags.
func propertyValue(v []byte) string {
	switch string(v) {
	case "true":
		return "true"
	case "false":
		return "false"
	case "":
		return ""
	}
	return string(v)
}

// propertyName returns the name k, without allocating (or checking it is
// UTF-8: known says it is one of them) for the names the clients set on
// most messages.
func propertyName(k []byte) (name string, known bool) {
	switch string(k) {
	case message.PropertyUniqueKey:
		return message.PropertyUniqueKey, true
	case message.PropertyKeys:
		return message.PropertyKeys, true
	case message.PropertyTags:
		return message.PropertyTags, true
	case message.PropertyWaitStoreMsgOK:
		return message.PropertyWaitStoreMsgOK, true
	case message.PropertyProducerGroup:
		return message.PropertyProducerGroup, true
	case message.PropertyShardingKey:
		return message.PropertyShardingKey, true
	case message.PropertyDelayLevel:
		return message.PropertyDelayLevel, true
	}
	return string(k), false
}
