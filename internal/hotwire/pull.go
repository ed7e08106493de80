package hotwire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// DecodePullResponse decodes b into resp (reset first), as proto.Unmarshal
// does, except that the records are not copied: each is a slice of b, so b
// must not be changed or reused while resp (or anything decoded from its
// records without a copy) is in use. The record slices themselves are one
// allocation.
func DecodePullResponse(b []byte, resp *pb.PullResponse) error {
	resp.Reset()
	n, err := CountField(b, 3)
	if err != nil {
		return err
	}
	if n > 0 {
		resp.Records = make([][]byte, 0, n)
	}
	for len(b) > 0 {
		num, typ, l := ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		switch {
		case typ == protowire.VarintType && num >= 2 && num <= 6 && num != 3:
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			b = b[l:]
			switch num {
			case 2:
				resp.PullStatus = pb.PullStatus(int32(v))
			case 4:
				resp.NextOffset = int64(v)
			case 5:
				resp.MinOffset = int64(v)
			case 6:
				resp.MaxOffset = int64(v)
			}
		case typ == protowire.BytesType && (num == 1 || num == 3):
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			b = b[l:]
			if num == 3 {
				resp.Records = append(resp.Records, v[:len(v):len(v)]) // capped: an append copies
				continue
			}
			if resp.Status == nil {
				resp.Status = new(pb.Status)
			}
			// A status is rare and small: its message gets a copy of its own.
			d := decoder{all: string(v), at: v}
			if err := d.status(resp.Status); err != nil {
				return fmt.Errorf("status: %w", err)
			}
		default:
			var err error
			if b, err = SkipField(b, num, typ); err != nil {
				return err
			}
		}
	}
	return nil
}
