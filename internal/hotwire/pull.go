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
	// No strings are cut from the whole answer (all stays empty): the
	// records are slices of it, and the status gets a copy of its own.
	d := decoder{at: b}
	for len(d.at) > 0 {
		num, typ, err := d.tag()
		if err != nil {
			return err
		}
		switch {
		case num == 3 && typ == protowire.BytesType:
			v, err := d.bytes()
			if err != nil {
				return err
			}
			resp.Records = append(resp.Records, v[:len(v):len(v)]) // capped: an append copies
		case num == 1 && typ == protowire.BytesType:
			v, err := d.bytes()
			if err != nil {
				return err
			}
			if resp.Status == nil {
				resp.Status = new(pb.Status)
			}
			st := decoder{all: string(v), at: v}
			if err := st.status(resp.Status); err != nil {
				return fmt.Errorf("status: %w", err)
			}
		case typ == protowire.VarintType && (num == 2 || num == 4 || num == 5 || num == 6):
			v, err := d.varint()
			if err != nil {
				return err
			}
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
		default:
			if err := d.skip(num, typ); err != nil {
				return err
			}
		}
	}
	return nil
}
