package v1wire

import (
	"maps"

	"github.com/bolide-mq/bolide/broker/delay"
	"github.com/bolide-mq/bolide/broker/offsets"
	"github.com/bolide-mq/bolide/broker/replication"
	"github.com/bolide-mq/bolide/broker/subgroup"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/wire"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// MetadataRequestToProto and MetadataRequestFromProto convert a slave's
// request.
func MetadataRequestToProto(r replication.MetadataRequest) *pb.GetMetadataRequest {
	return &pb.GetMetadataRequest{BrokerName: r.BrokerName, BrokerId: r.BrokerID, LocalOffsets: offsetsToProto(r.LocalOffsets)}
}

// MetadataRequestFromProto reads a slave's request.
func MetadataRequestFromProto(r *pb.GetMetadataRequest) replication.MetadataRequest {
	return replication.MetadataRequest{BrokerName: r.BrokerName, BrokerID: r.BrokerId, LocalOffsets: offsetsFromProto(r.LocalOffsets)}
}

// MetadataToProto is a master's successful answer.
func MetadataToProto(md replication.Metadata) *pb.GetMetadataResponse {
	resp := &pb.GetMetadataResponse{Status: wire.OK, Epoch: md.Epoch,
		DataVersion: &pb.DataVersion{Timestamp: md.DataVersion.Timestamp, Counter: md.DataVersion.Counter},
		Offsets:     offsetsToProto(md.Offsets)}
	for i := range md.Topics {
		resp.Topics = append(resp.Topics, TopicToProto(md.Topics[i]))
	}
	if p := md.Delay; p != nil {
		resp.DelayOffsets = make(map[int32]int64, len(p.Levels))
		for level, off := range p.Levels {
			resp.DelayOffsets[int32(level)] = off
		}
		if p.Timer != nil {
			resp.TimerProgress = &pb.TimerProgress{Location: p.Timer.Location, DueBeforeMs: p.Timer.DueBeforeMS}
		}
		resp.DelayLogOffset = p.Need
	}
	if md.GroupVersion != (topic.DataVersion{}) {
		resp.GroupVersion = &pb.DataVersion{Timestamp: md.GroupVersion.Timestamp, Counter: md.GroupVersion.Counter}
		for _, c := range md.Groups {
			resp.Groups = append(resp.Groups, GroupToProto(c))
		}
	}
	return resp
}

// MetadataFromProto reads a master's successful answer.
func MetadataFromProto(resp *pb.GetMetadataResponse) replication.Metadata {
	md := replication.Metadata{Epoch: resp.Epoch, Offsets: offsetsFromProto(resp.Offsets)}
	md.Topics = make([]topic.Config, 0, len(resp.Topics))
	for _, t := range resp.Topics {
		md.Topics = append(md.Topics, TopicFromProto(t))
	}
	if v := resp.DataVersion; v != nil {
		md.DataVersion = topic.DataVersion{Timestamp: v.Timestamp, Counter: v.Counter}
	}
	md.Delay = delayProgressFromProto(resp)
	if v := resp.GroupVersion; v != nil {
		md.GroupVersion = topic.DataVersion{Timestamp: v.Timestamp, Counter: v.Counter}
		md.Groups = make([]subgroup.Config, 0, len(resp.Groups))
		for _, g := range resp.Groups {
			md.Groups = append(md.Groups, GroupFromProto(g))
		}
	}
	return md
}

// delayProgressFromProto reads the master's delayed delivery progress; nil
// when the master sent none.
func delayProgressFromProto(resp *pb.GetMetadataResponse) *delay.MasterProgress {
	if len(resp.DelayOffsets) == 0 && resp.TimerProgress == nil {
		return nil
	}
	p := &delay.MasterProgress{Levels: make(map[int]int64, len(resp.DelayOffsets)), Need: resp.DelayLogOffset}
	for level, off := range resp.DelayOffsets {
		p.Levels[int(level)] = off
	}
	if tp := resp.TimerProgress; tp != nil {
		p.Timer = &delay.Progress{Location: tp.Location, DueBeforeMS: tp.DueBeforeMs}
	}
	return p
}

func offsetsToProto(m offsets.Map) []*pb.GroupOffsets {
	out := make([]*pb.GroupOffsets, 0, len(m))
	for k, qs := range m {
		t, g, ok := offsets.SplitKey(k)
		if !ok || len(qs) == 0 {
			continue
		}
		out = append(out, &pb.GroupOffsets{Group: g, Topic: t, Offsets: maps.Clone(qs)})
	}
	return out
}

func offsetsFromProto(in []*pb.GroupOffsets) offsets.Map {
	out := make(offsets.Map, len(in))
	for _, g := range in {
		if g == nil || g.Topic == "" || g.Group == "" {
			continue
		}
		k := offsets.Key(g.Topic, g.Group)
		if out[k] == nil {
			out[k] = make(map[int32]int64, len(g.Offsets))
		}
		for q, v := range g.Offsets {
			out[k][q] = v
		}
	}
	return out
}

// PushToProto is a master's metadata push (topics and groups only).
func PushToProto(p replication.MetadataPush) *pb.PushMetadataRequest {
	md := p.Metadata
	md.Offsets, md.Delay, md.Epoch = nil, nil, p.MasterEpoch
	return &pb.PushMetadataRequest{BrokerName: p.BrokerName, MasterEpoch: p.MasterEpoch, MasterId: p.MasterID,
		Metadata: MetadataToProto(md)}
}

// PushFromProto reads a master's metadata push.
func PushFromProto(req *pb.PushMetadataRequest) replication.MetadataPush {
	p := replication.MetadataPush{BrokerName: req.BrokerName, MasterEpoch: req.MasterEpoch, MasterID: req.MasterId}
	if req.Metadata != nil {
		p.Metadata = MetadataFromProto(req.Metadata)
	}
	p.Metadata.Partial, p.Metadata.Offsets, p.Metadata.Delay = true, nil, nil
	return p
}
