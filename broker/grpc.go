package broker

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker/remote"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// grpcServer is the gRPC front end: it converts wire types and calls the
// protocol-independent methods of Broker.
type grpcServer struct {
	pb.UnimplementedBrokerServer
	b *Broker
}

// sendWire serves a wire send request: the gRPC and frame front ends share
// it.
func (b *Broker) sendWire(ctx context.Context, protocol string, req *pb.SendRequest) *pb.SendResponse {
	msgs := make([]*message.Ext, len(req.Messages))
	for i, pm := range req.Messages {
		if pm == nil {
			return &pb.SendResponse{RequestId: req.RequestId, Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "message %d is empty", i))}
		}
		msgs[i] = wire.MessageFromProto(pm)
	}
	res, err := b.sendObserved(ctx, protocol, msgs)
	resp := &pb.SendResponse{RequestId: req.RequestId, Status: wire.Status(err), BrokerName: b.opts.BrokerName}
	if err != nil {
		return resp
	}
	resp.Results = make([]*pb.SendResult, len(res))
	for i, r := range res {
		resp.Results[i] = &pb.SendResult{MsgId: r.MsgID, UniqueId: msgs[i].UniqueID(), QueueId: msgs[i].QueueID,
			QueueOffset: r.QueueOffset, CommitLogOffset: r.PhysicalOffset}
	}
	return resp
}

func (s *grpcServer) Send(ctx context.Context, req *pb.SendRequest) (*pb.SendResponse, error) {
	return s.b.sendWire(ctx, protoGRPC, req), nil
}

// maxStreamInflight bounds concurrent sends on one stream.
const maxStreamInflight = 1024

// SendStream handles pipelined sends: each request is stored concurrently
// (they meet in the CommitLog's group commit) and answered as it completes.
// The stream ends when the client closes it or the broker stops.
func (s *grpcServer) SendStream(stream pb.Broker_SendStreamServer) error {
	ctx := stream.Context()
	var sendMu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxStreamInflight)
	var sendErr error
	defer wg.Wait()
	reqs := make(chan *pb.SendRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				recvErr <- ctx.Err()
				return
			}
		}
	}()
	for {
		var req *pb.SendRequest
		select {
		case req = <-reqs:
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-s.b.ctx.Done():
			return wire.Errorf(pb.Code_SHUTTING_DOWN, "broker %s is stopping", s.b.opts.BrokerName)
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp := s.b.sendWire(ctx, protoGRPC, req)
			sendMu.Lock()
			if sendErr == nil {
				sendErr = stream.Send(resp)
			}
			sendMu.Unlock()
		}()
	}
}

func (s *grpcServer) Pull(ctx context.Context, req *pb.PullRequest) (*pb.PullResponse, error) {
	return s.b.pullWire(ctx, protoGRPC, req), nil
}

// pullWire serves a wire pull request: the gRPC and frame front ends share
// it.
func (b *Broker) pullWire(ctx context.Context, protocol string, req *pb.PullRequest) *pb.PullResponse {
	res, err := b.pullObserved(ctx, protocol, PullRequest{
		Group: req.Group, Topic: req.Topic, QueueID: req.QueueId, Offset: req.Offset,
		MaxMessages: int(req.MaxMessages), MaxBytes: int(req.MaxBytes), TagExpression: req.TagExpression,
		SuspendTimeout: time.Duration(req.SuspendTimeoutMs) * time.Millisecond, CommitOffset: req.CommitOffset,
	})
	if err != nil {
		return &pb.PullResponse{Status: wire.Status(err)}
	}
	return &pb.PullResponse{Status: wire.OK, PullStatus: res.Status, Records: res.Records,
		NextOffset: res.NextOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset}
}

// Connect keeps a client registered while its stream is open and pushes
// notifications to it.
func (s *grpcServer) Connect(stream pb.Broker_ConnectServer) error {
	b := s.b
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hb := first.GetHeartbeat()
	if hb == nil || hb.ClientId == "" {
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "the first message on a connection must be a heartbeat with a client id")
	}
	if err := validateHeartbeat(hb); err != nil {
		return err
	}
	c := &clientConn{notify: make(chan *pb.BrokerMessage, 16)}
	b.retry.EnsureRetryTopics(clusteringGroups(hb))
	b.consumers.heartbeat(c, hb, time.Now())
	defer b.consumers.disconnect(c)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if hb := m.GetHeartbeat(); hb != nil && hb.ClientId == c.id && validateHeartbeat(hb) == nil {
				b.retry.EnsureRetryTopics(clusteringGroups(hb))
				b.consumers.heartbeat(c, hb, time.Now())
			}
		}
	}()
	for {
		select {
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case m := <-c.notify:
			if err := stream.Send(m); err != nil {
				return err
			}
		case <-b.ctx.Done():
			return wire.Errorf(pb.Code_SHUTTING_DOWN, "broker %s is stopping", b.opts.BrokerName)
		}
	}
}

// clusteringGroups returns the groups of a heartbeat's clustering
// consumers (their retry topics are created on a master).
func clusteringGroups(hb *pb.Heartbeat) []string {
	var out []string
	for _, cd := range hb.GetConsumers() {
		if cd.GetMessageModel() == pb.MessageModel_CLUSTERING {
			out = append(out, cd.GetGroup())
		}
	}
	return out
}

func validateHeartbeat(hb *pb.Heartbeat) error {
	for _, cd := range hb.Consumers {
		if err := message.ValidateGroup(cd.Group); err != nil {
			return wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err)
		}
		for _, sub := range cd.Subscriptions {
			if err := message.ValidateTopic(sub.Topic); err != nil {
				return wire.Errorf(pb.Code_ILLEGAL_TOPIC, "%v", err)
			}
			if _, err := message.ParseTagExpression(sub.Expression); err != nil {
				return wire.Errorf(pb.Code_SUBSCRIPTION_PARSE_FAILED, "%v", err)
			}
		}
	}
	return nil
}

func (s *grpcServer) GetConsumerList(_ context.Context, req *pb.GetConsumerListRequest) (*pb.GetConsumerListResponse, error) {
	if err := message.ValidateGroup(req.Group); err != nil {
		return &pb.GetConsumerListResponse{Status: wire.Status(wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err))}, nil
	}
	ids := s.b.consumers.members(req.Group)
	if ids == nil && !s.b.consumers.known(req.Group) {
		return &pb.GetConsumerListResponse{Status: wire.Status(wire.Errorf(pb.Code_SUBSCRIPTION_GROUP_NOT_EXIST, "consumer group %s has no connected client", req.Group))}, nil
	}
	return &pb.GetConsumerListResponse{Status: wire.OK, ClientIds: ids}, nil
}

func (s *grpcServer) CommitOffsets(_ context.Context, req *pb.CommitOffsetsRequest) (*pb.CommitOffsetsResponse, error) {
	if err := message.ValidateGroup(req.Group); err != nil {
		return &pb.CommitOffsetsResponse{Status: wire.Status(wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err))}, nil
	}
	for _, o := range req.Offsets {
		if o.Offset < 0 {
			return &pb.CommitOffsetsResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "negative offset %d", o.Offset))}, nil
		}
	}
	// Offsets of topics this broker does not know are skipped (a topic
	// deleted while a consumer still held it), and the request fails only
	// when none is known. A slave takes them all: the topic may be created
	// on the master a moment before the slave's metadata sync brings it.
	master := s.b.IsMaster()
	var unknown string
	committed := 0
	for _, o := range req.Offsets {
		if _, ok := s.b.topics.get(o.Topic); !ok && master {
			unknown = o.Topic
			continue
		}
		s.b.commitOffset(req.Group, o.Topic, o.QueueId, o.Offset)
		committed++
	}
	if committed == 0 && unknown != "" {
		return &pb.CommitOffsetsResponse{Status: wire.Status(wire.Errorf(pb.Code_TOPIC_NOT_EXIST, "topic %s does not exist on broker %s", unknown, s.b.opts.BrokerName))}, nil
	}
	return &pb.CommitOffsetsResponse{Status: wire.OK}, nil
}

func (s *grpcServer) QueryOffset(_ context.Context, req *pb.QueryOffsetRequest) (*pb.QueryOffsetResponse, error) {
	if err := message.ValidateGroup(req.Group); err != nil {
		return &pb.QueryOffsetResponse{Status: wire.Status(wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err))}, nil
	}
	return &pb.QueryOffsetResponse{Status: wire.OK, Offset: s.b.offsets.Query(req.Group, req.Topic, req.QueueId)}, nil
}

func (s *grpcServer) GetQueueOffsets(_ context.Context, req *pb.GetQueueOffsetsRequest) (*pb.GetQueueOffsetsResponse, error) {
	if _, ok := s.b.topics.get(req.Topic); !ok {
		return &pb.GetQueueOffsetsResponse{Status: wire.Status(wire.Errorf(pb.Code_TOPIC_NOT_EXIST, "topic %s does not exist on broker %s", req.Topic, s.b.opts.BrokerName))}, nil
	}
	minOff, maxOff := s.b.store.QueueOffsets(req.Topic, req.QueueId)
	return &pb.GetQueueOffsetsResponse{Status: wire.OK, MinOffset: minOff, MaxOffset: maxOff,
		LastStoreTimestamp: s.b.lastStoreTime(req.Topic, req.QueueId)}, nil
}

func (s *grpcServer) SearchOffset(_ context.Context, req *pb.SearchOffsetRequest) (*pb.SearchOffsetResponse, error) {
	if _, ok := s.b.topics.get(req.Topic); !ok {
		return &pb.SearchOffsetResponse{Status: wire.Status(wire.Errorf(pb.Code_TOPIC_NOT_EXIST, "topic %s does not exist on broker %s", req.Topic, s.b.opts.BrokerName))}, nil
	}
	off, err := s.b.store.OffsetForTime(req.Topic, req.QueueId, req.TimestampMs)
	if err != nil {
		return &pb.SearchOffsetResponse{Status: wire.Status(storeError(err))}, nil
	}
	return &pb.SearchOffsetResponse{Status: wire.OK, Offset: off}, nil
}

func queueKeys(refs []*pb.QueueRef) []queueKey {
	out := make([]queueKey, 0, len(refs))
	for _, r := range refs {
		out = append(out, queueKey{r.Topic, r.QueueId})
	}
	return out
}

func (s *grpcServer) LockQueues(_ context.Context, req *pb.LockQueuesRequest) (*pb.LockQueuesResponse, error) {
	if err := message.ValidateGroup(req.Group); err != nil || req.ClientId == "" {
		return &pb.LockQueuesResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "lock needs a valid group and a client id"))}, nil
	}
	held := s.b.locks.lock(req.Group, req.ClientId, queueKeys(req.Queues), time.Now())
	resp := &pb.LockQueuesResponse{Status: wire.OK}
	for _, q := range held {
		resp.Locked = append(resp.Locked, &pb.QueueRef{Topic: q.topic, QueueId: q.id})
	}
	return resp, nil
}

func (s *grpcServer) UnlockQueues(_ context.Context, req *pb.UnlockQueuesRequest) (*pb.UnlockQueuesResponse, error) {
	s.b.locks.unlock(req.Group, req.ClientId, queueKeys(req.Queues))
	return &pb.UnlockQueuesResponse{Status: wire.OK}, nil
}

func (s *grpcServer) ViewMessage(_ context.Context, req *pb.ViewMessageRequest) (*pb.ViewMessageResponse, error) {
	var rec []byte
	var err error
	if req.MsgId != "" {
		var m *message.Ext
		if m, err = s.b.store.LookupByMsgID(req.MsgId); err == nil {
			rec, err = s.b.store.ReadRecord(m.PhysicalOffset)
		}
	} else {
		rec, err = s.b.store.ReadRecord(req.CommitLogOffset)
	}
	if err != nil {
		return &pb.ViewMessageResponse{Status: wire.Status(wire.Errorf(pb.Code_QUERY_NOT_FOUND, "no message %s at offset %d: %v", req.MsgId, req.CommitLogOffset, err))}, nil
	}
	return &pb.ViewMessageResponse{Status: wire.OK, Record: rec}, nil
}

func (s *grpcServer) QueryMessage(_ context.Context, req *pb.QueryMessageRequest) (*pb.QueryMessageResponse, error) {
	if err := message.ValidateTopic(req.Topic); err != nil {
		return &pb.QueryMessageResponse{Status: wire.Status(wire.Errorf(pb.Code_ILLEGAL_TOPIC, "%v", err))}, nil
	}
	if req.Key == "" {
		return &pb.QueryMessageResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "query needs a key"))}, nil
	}
	end := req.EndMs
	if end <= 0 {
		end = time.Now().UnixMilli() + 1000
	}
	msgs, err := s.b.store.QueryByKey(req.Topic, req.Key, req.BeginMs, end, int(req.Max))
	if err != nil {
		return &pb.QueryMessageResponse{Status: wire.Status(storeError(err))}, nil
	}
	resp := &pb.QueryMessageResponse{Status: wire.OK}
	for _, m := range msgs {
		rec, err := s.b.store.ReadRecord(m.PhysicalOffset)
		if err == nil {
			resp.Records = append(resp.Records, rec)
		}
	}
	if len(resp.Records) == 0 {
		resp.Status = wire.Status(wire.Errorf(pb.Code_QUERY_NOT_FOUND, "no message of %s with key %s", req.Topic, req.Key))
	}
	return resp, nil
}

func (s *grpcServer) CreateTopic(_ context.Context, req *pb.CreateTopicRequest) (*pb.CreateTopicResponse, error) {
	if req.Topic == nil {
		return &pb.CreateTopicResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no topic given"))}, nil
	}
	if err := s.b.checkWritable(); err != nil {
		return &pb.CreateTopicResponse{Status: wire.Status(err)}, nil
	}
	tc := remote.TopicFromProto(req.Topic)
	if tc.Perm == 0 {
		tc.Perm = PermReadWrite
	}
	if message.IsSystemTopic(tc.Name) {
		return &pb.CreateTopicResponse{Status: wire.Status(wire.Errorf(pb.Code_NO_PERMISSION, "topic %s is reserved for the broker", tc.Name))}, nil
	}
	if err := s.b.topics.put(tc, req.Update); err != nil {
		return &pb.CreateTopicResponse{Status: wire.Status(err)}, nil
	}
	s.b.log.Info("topic saved", zap.String("topic", tc.Name), zap.Int32("read", tc.ReadQueueNums),
		zap.Int32("write", tc.WriteQueueNums), zap.Int32("perm", tc.Perm), zap.Bool("update", req.Update))
	s.b.reg.trigger()
	return &pb.CreateTopicResponse{Status: wire.OK}, nil
}

func (s *grpcServer) DeleteTopic(_ context.Context, req *pb.BrokerDeleteTopicRequest) (*pb.BrokerDeleteTopicResponse, error) {
	if err := s.b.checkWritable(); err != nil {
		return &pb.BrokerDeleteTopicResponse{Status: wire.Status(err)}, nil
	}
	existed, err := s.b.topics.remove(req.Topic)
	if err != nil {
		return &pb.BrokerDeleteTopicResponse{Status: wire.Status(err)}, nil
	}
	if !existed {
		return &pb.BrokerDeleteTopicResponse{Status: wire.Status(wire.Errorf(pb.Code_TOPIC_NOT_EXIST, "topic %s does not exist on broker %s", req.Topic, s.b.opts.BrokerName))}, nil
	}
	s.b.offsets.RemoveTopic(req.Topic)
	if err := s.b.store.DeleteTopic(req.Topic); err != nil {
		return &pb.BrokerDeleteTopicResponse{Status: wire.Status(storeError(err))}, nil
	}
	s.b.reg.trigger()
	return &pb.BrokerDeleteTopicResponse{Status: wire.OK}, nil
}

func (s *grpcServer) GetTopicConfigs(context.Context, *pb.GetTopicConfigsRequest) (*pb.GetTopicConfigsResponse, error) {
	resp := &pb.GetTopicConfigsResponse{Status: wire.OK}
	for _, t := range s.b.topics.all() {
		resp.Topics = append(resp.Topics, remote.TopicToProto(&t))
	}
	return resp, nil
}

func (s *grpcServer) GetBrokerInfo(context.Context, *pb.GetBrokerInfoRequest) (*pb.GetBrokerInfoResponse, error) {
	b := s.b
	clog := b.store.CommitLog()
	repl := b.replicationInfo()
	var storeBytes int64
	for _, seg := range clog.Segments() {
		storeBytes += seg.End - seg.Start
	}
	return &pb.GetBrokerInfoResponse{
		Status: wire.OK, Cluster: b.opts.Cluster, BrokerName: b.opts.BrokerName, BrokerId: b.brokerID(),
		Addr: b.addr, Version: b.opts.Version, Role: repl.Role, FlushMode: clog.Options().FlushMode.String(),
		MasterAddr: repl.MasterAddr, Epoch: repl.Epoch, Replication: repl,
		CommitLogMinOffset: clog.MinOffset(), CommitLogMaxOffset: clog.MaxOffset(),
		DispatchBehindBytes: b.store.DispatchBehind(), DiskUsedRatio: clog.DiskUsage(),
		StoreBytes: storeBytes, StartTimeMs: b.started.UnixMilli(),
	}, nil
}

func (s *grpcServer) ListConsumerGroups(context.Context, *pb.ListConsumerGroupsRequest) (*pb.ListConsumerGroupsResponse, error) {
	groups := s.b.consumers.groupList()
	seen := make(map[string]bool, len(groups))
	for _, g := range groups {
		seen[g.Group] = true
	}
	for _, g := range s.b.offsets.Groups() {
		if !seen[g] {
			groups = append(groups, &pb.ConsumerGroupInfo{Group: g})
		}
	}
	return &pb.ListConsumerGroupsResponse{Status: wire.OK, Groups: groups}, nil
}

func (s *grpcServer) GetConsumeStats(_ context.Context, req *pb.GetConsumeStatsRequest) (*pb.GetConsumeStatsResponse, error) {
	b := s.b
	if err := message.ValidateGroup(req.Group); err != nil {
		return &pb.GetConsumeStatsResponse{Status: wire.Status(wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err))}, nil
	}
	topics := []string{req.Topic}
	if req.Topic == "" {
		seen := make(map[string]bool)
		topics = topics[:0]
		// The group's retry and dead-letter topics count too (GroupTopics).
		for _, t := range append(append(b.offsets.TopicsOf(req.Group), b.consumers.subscribedTopics(req.Group)...), b.retry.GroupTopics(req.Group)...) {
			if !seen[t] {
				seen[t] = true
				topics = append(topics, t)
			}
		}
	}
	resp := &pb.GetConsumeStatsResponse{Status: wire.OK}
	for _, t := range topics {
		tc, ok := b.topics.get(t)
		if !ok {
			if req.Topic != "" {
				return &pb.GetConsumeStatsResponse{Status: wire.Status(wire.Errorf(pb.Code_TOPIC_NOT_EXIST, "topic %s does not exist on broker %s", t, b.opts.BrokerName))}, nil
			}
			continue
		}
		for q := int32(0); q < tc.ReadQueueNums; q++ {
			_, maxOff := b.store.QueueOffsets(t, q)
			resp.Queues = append(resp.Queues, &pb.QueueStats{Topic: t, QueueId: q, BrokerOffset: maxOff,
				ConsumerOffset: b.offsets.Query(req.Group, t, q), LastTimestamp: b.lastStoreTime(t, q)})
		}
	}
	return resp, nil
}

func (s *grpcServer) ResetOffset(_ context.Context, req *pb.ResetOffsetRequest) (*pb.ResetOffsetResponse, error) {
	if err := message.ValidateGroup(req.Group); err != nil {
		return &pb.ResetOffsetResponse{Status: wire.Status(wire.Errorf(pb.Code_ILLEGAL_GROUP, "%v", err))}, nil
	}
	changes, err := s.b.resetOffset(req.Group, req.Topic, req.TimestampMs, req.ToEarliest, req.ToLatest, req.DryRun)
	if err != nil {
		return &pb.ResetOffsetResponse{Status: wire.Status(err)}, nil
	}
	return &pb.ResetOffsetResponse{Status: wire.OK, Changes: changes}, nil
}
