package hotwire

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// ErrInvalidUTF8 is a string field that is not UTF-8, which proto3 forbids
// (proto.Unmarshal refuses it too).
var ErrInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// DecodeSendResponse decodes b into resp (reset first), as proto.Unmarshal
// does. The results are allocated together, and their strings share one
// copy of b; the results and status of a response decoded into before are
// reset and reused, so that a caller that recycles its responses
// allocates them once.
func DecodeSendResponse(b []byte, resp *pb.SendResponse) error {
	n, err := CountField(b, 3)
	if err != nil {
		return err
	}
	old, st := resp.Results, resp.Status // lent by an earlier decode
	resp.Reset()
	var slab []pb.SendResult
	switch {
	case n == 0:
	case cap(old) >= n:
		old = old[:n]
		resp.Results = old[:0]
	default:
		old = nil
		slab = make([]pb.SendResult, n)
		resp.Results = make([]*pb.SendResult, 0, n)
	}
	d := decoder{all: string(b), at: b}
	for len(d.at) > 0 {
		num, typ, err := d.tag()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.VarintType:
			if resp.RequestId, err = d.varint(); err != nil {
				return err
			}
		case num == 2 && typ == protowire.BytesType:
			sub, err := d.sub()
			if err != nil {
				return err
			}
			if resp.Status == nil {
				if st == nil {
					st = new(pb.Status)
				} else {
					st.Reset()
				}
				resp.Status = st
			}
			if err := sub.status(resp.Status); err != nil {
				return fmt.Errorf("status: %w", err)
			}
		case num == 3 && typ == protowire.BytesType:
			sub, err := d.sub()
			if err != nil {
				return err
			}
			var r *pb.SendResult
			switch i := len(resp.Results); {
			case old == nil:
				r = &slab[i]
			case old[i] != nil:
				r = old[i]
				r.Reset()
			default: // past what an interrupted decode filled
				r = new(pb.SendResult)
			}
			if err := sub.result(r); err != nil {
				return fmt.Errorf("result %d: %w", len(resp.Results), err)
			}
			resp.Results = append(resp.Results, r)
		case num == 4 && typ == protowire.BytesType:
			if resp.BrokerName, err = d.string(); err != nil {
				return fmt.Errorf("broker_name: %w", err)
			}
		default:
			if err := d.skip(num, typ); err != nil {
				return err
			}
		}
	}
	return nil
}

// CountField counts the entries of length-delimited field want in the
// message b, and checks the message's framing (which a second pass may
// then rely on).
func CountField(b []byte, want protowire.Number) (int, error) {
	n := 0
	for len(b) > 0 {
		num, typ, l := ConsumeTag(b)
		if l < 0 {
			return 0, protowire.ParseError(l)
		}
		b = b[l:]
		if num == want && typ == protowire.BytesType {
			n++
		}
		var err error
		if b, err = SkipField(b, num, typ); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// SkipField returns b past the value of a field of number num and type typ
// at its front (the tag already consumed): what a decoder does with a
// field it does not know.
func SkipField(b []byte, num protowire.Number, typ protowire.Type) ([]byte, error) {
	l := protowire.ConsumeFieldValue(num, typ, b)
	if l < 0 {
		return nil, protowire.ParseError(l)
	}
	return b[l:], nil
}

// ConsumeTag is protowire.ConsumeTag refusing, as proto.Unmarshal does,
// field numbers above the largest valid one.
func ConsumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, l := protowire.ConsumeTag(b)
	if l >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -2 // protowire's code of an invalid field number
	}
	return num, typ, l
}

// decoder reads a message at the front of at, a suffix of all's bytes:
// strings are cut from all, so that they share one copy.
type decoder struct {
	all string
	at  []byte
}

// pos is where at starts in all.
func (d *decoder) pos() int { return len(d.all) - len(d.at) }

func (d *decoder) tag() (protowire.Number, protowire.Type, error) {
	num, typ, l := ConsumeTag(d.at)
	if l < 0 {
		return 0, 0, protowire.ParseError(l)
	}
	d.at = d.at[l:]
	return num, typ, nil
}

func (d *decoder) varint() (uint64, error) {
	v, l := protowire.ConsumeVarint(d.at)
	if l < 0 {
		return 0, protowire.ParseError(l)
	}
	d.at = d.at[l:]
	return v, nil
}

// bytes returns the length-delimited field at the front, a slice of at
// (not copied), and moves past it.
func (d *decoder) bytes() ([]byte, error) {
	v, l := protowire.ConsumeBytes(d.at)
	if l < 0 {
		return nil, protowire.ParseError(l)
	}
	d.at = d.at[l:]
	return v, nil
}

// sub returns a decoder of the length-delimited field at the front, and
// moves past it.
func (d *decoder) sub() (decoder, error) {
	v, err := d.bytes()
	if err != nil {
		return decoder{}, err
	}
	end := d.pos()
	return decoder{all: d.all[:end], at: v}, nil
}

func (d *decoder) string() (string, error) {
	v, err := d.bytes()
	if err != nil {
		return "", err
	}
	if !utf8.Valid(v) {
		return "", ErrInvalidUTF8
	}
	end := d.pos()
	return d.all[end-len(v) : end], nil
}

func (d *decoder) skip(num protowire.Number, typ protowire.Type) (err error) {
	d.at, err = SkipField(d.at, num, typ)
	return err
}

func (d *decoder) status(st *pb.Status) error {
	for len(d.at) > 0 {
		num, typ, err := d.tag()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, err := d.varint()
			if err != nil {
				return err
			}
			st.Code = pb.Code(int32(v))
		case num == 2 && typ == protowire.BytesType:
			if st.Message, err = d.string(); err != nil {
				return fmt.Errorf("message: %w", err)
			}
		default:
			if err := d.skip(num, typ); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *decoder) result(r *pb.SendResult) error {
	for len(d.at) > 0 {
		num, typ, err := d.tag()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			if r.MsgId, err = d.string(); err != nil {
				return fmt.Errorf("msg_id: %w", err)
			}
		case num == 2 && typ == protowire.BytesType:
			if r.UniqueId, err = d.string(); err != nil {
				return fmt.Errorf("unique_id: %w", err)
			}
		case typ == protowire.VarintType && num >= 3 && num <= 5:
			v, err := d.varint()
			if err != nil {
				return err
			}
			switch num {
			case 3:
				r.QueueId = int32(v)
			case 4:
				r.QueueOffset = int64(v)
			case 5:
				r.CommitLogOffset = int64(v)
			}
		default:
			if err := d.skip(num, typ); err != nil {
				return err
			}
		}
	}
	return nil
}
