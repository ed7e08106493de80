package grpcapi

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/metadata"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/frontend/v1wire"
	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// brokerService is bolide.v1's Broker service: the data path, client
// sessions, offsets, locks, lookups and topic administration.
type brokerService struct {
	pb.UnimplementedBrokerServer
	b  *broker.Broker
	az *authorizer
}

func (s *brokerService) Send(ctx context.Context, req *pb.SendRequest) (*pb.SendResponse, error) {
	return v1wire.Send(ctx, s.b, Name, req), nil
}

// maxStreamInflight bounds concurrent sends on one stream.
const maxStreamInflight = 1024

// SendStream handles pipelined sends: each request is stored concurrently
// (they meet in the CommitLog's group commit) and answered as it completes.
// The stream ends when the client closes it or the broker stops.
func (s *brokerService) SendStream(stream pb.Broker_SendStreamServer) error {
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
		case <-s.b.Stopping():
			return wire.Errorf(pb.Code_SHUTTING_DOWN, "broker %s is stopping", s.b.Options().BrokerName)
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
			var resp *pb.SendResponse
			if err := s.az.authorizeSend(ctx, req); err != nil {
				resp = &pb.SendResponse{RequestId: req.RequestId, Status: wire.Status(err)}
			} else {
				resp = v1wire.Send(ctx, s.b, Name, req)
			}
			sendMu.Lock()
			if sendErr == nil {
				sendErr = stream.Send(resp)
			}
			sendMu.Unlock()
		}()
	}
}

func (s *brokerService) Pull(ctx context.Context, req *pb.PullRequest) (*pb.PullResponse, error) {
	return v1wire.Pull(ctx, s.b, Name, req), nil
}

// Connect keeps a client registered while its stream is open and pushes
// the broker's notices to it.
func (s *brokerService) Connect(stream pb.Broker_ConnectServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hb := first.GetHeartbeat()
	if hb == nil || hb.ClientId == "" {
		return wire.Errorf(pb.Code_INVALID_PARAMETER, "the first message on a connection must be a heartbeat with a client id")
	}
	ctx := stream.Context()
	if err := s.az.authorizeHeartbeat(ctx, hb); err != nil {
		return wire.GRPCError(err)
	}
	conn := connInfo(ctx)
	sess, err := s.b.Connect(withConn(v1wire.Heartbeat(hb), conn))
	if err != nil {
		return err
	}
	defer sess.Close()
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if hb := m.GetHeartbeat(); hb != nil {
				// A heartbeat may subscribe to more: checked like the first.
				if err := s.az.authorizeHeartbeat(ctx, hb); err != nil {
					recvErr <- wire.GRPCError(err)
					return
				}
				sess.Heartbeat(withConn(v1wire.Heartbeat(hb), conn))
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
		case n := <-sess.Notices():
			if c := n.CheckTransaction; c != nil && s.az.authorizeCheck(ctx, c.Topic) != nil {
				// A check carries the half message: only to a producer
				// that may publish to its topic (and end it).
				continue
			}
			if err := stream.Send(noticeToProto(n, s.b.Options().BrokerName)); err != nil {
				return err
			}
		case <-sess.Done():
			return wire.Errorf(pb.Code_SHUTTING_DOWN, "broker %s is stopping", s.b.Options().BrokerName)
		}
	}
}

func noticeToProto(n broker.Notice, brokerName string) *pb.BrokerMessage {
	if c := n.CheckTransaction; c != nil {
		return &pb.BrokerMessage{Kind: &pb.BrokerMessage_CheckTransaction{CheckTransaction: transactionCheckToProto(c, brokerName)}}
	}
	return &pb.BrokerMessage{Kind: &pb.BrokerMessage_ConsumerIdsChanged{ConsumerIdsChanged: &pb.ConsumerIdsChanged{Group: n.ConsumerIDsChanged}}}
}

func (s *brokerService) GetConsumerList(_ context.Context, req *pb.GetConsumerListRequest) (*pb.GetConsumerListResponse, error) {
	ids, err := s.b.ConsumerList(req.Group)
	return &pb.GetConsumerListResponse{Status: wire.Status(err), ClientIds: ids}, nil
}

func (s *brokerService) CommitOffsets(_ context.Context, req *pb.CommitOffsetsRequest) (*pb.CommitOffsetsResponse, error) {
	offs := make([]broker.QueueOffset, 0, len(req.Offsets))
	for _, o := range req.Offsets {
		offs = append(offs, broker.QueueOffset{Queue: broker.Queue{Topic: o.Topic, ID: o.QueueId}, Offset: o.Offset})
	}
	return &pb.CommitOffsetsResponse{Status: wire.Status(s.b.CommitOffsets(req.Group, offs))}, nil
}

func (s *brokerService) QueryOffset(_ context.Context, req *pb.QueryOffsetRequest) (*pb.QueryOffsetResponse, error) {
	off, err := s.b.QueryOffset(req.Group, req.Topic, req.QueueId)
	return &pb.QueryOffsetResponse{Status: wire.Status(err), Offset: off}, nil
}

func (s *brokerService) GetQueueOffsets(_ context.Context, req *pb.GetQueueOffsetsRequest) (*pb.GetQueueOffsetsResponse, error) {
	q, err := s.b.QueueState(req.Topic, req.QueueId)
	if err != nil {
		return &pb.GetQueueOffsetsResponse{Status: wire.Status(err)}, nil
	}
	return &pb.GetQueueOffsetsResponse{Status: wire.OK, MinOffset: q.MinOffset, MaxOffset: q.MaxOffset,
		LastStoreTimestamp: q.LastStoreTimestamp}, nil
}

func (s *brokerService) SearchOffset(_ context.Context, req *pb.SearchOffsetRequest) (*pb.SearchOffsetResponse, error) {
	off, err := s.b.SearchOffset(req.Topic, req.QueueId, req.TimestampMs)
	return &pb.SearchOffsetResponse{Status: wire.Status(err), Offset: off}, nil
}

func (s *brokerService) LockQueues(_ context.Context, req *pb.LockQueuesRequest) (*pb.LockQueuesResponse, error) {
	held, err := s.b.LockQueues(req.Group, req.ClientId, v1wire.Queues(req.Queues))
	if err != nil {
		return &pb.LockQueuesResponse{Status: wire.Status(err)}, nil
	}
	return &pb.LockQueuesResponse{Status: wire.OK, Locked: v1wire.QueueRefs(held)}, nil
}

func (s *brokerService) UnlockQueues(_ context.Context, req *pb.UnlockQueuesRequest) (*pb.UnlockQueuesResponse, error) {
	s.b.UnlockQueues(req.Group, req.ClientId, v1wire.Queues(req.Queues))
	return &pb.UnlockQueuesResponse{Status: wire.OK}, nil
}

func (s *brokerService) ViewMessage(ctx context.Context, req *pb.ViewMessageRequest) (*pb.ViewMessageResponse, error) {
	rec, err := s.b.ViewMessage(req.MsgId, req.CommitLogOffset)
	if err == nil && s.az.g.Enabled() {
		// The request names no topic: the message's own needs SUB.
		d, derr := message.DecodeDispatch(rec)
		if derr == nil {
			err = s.az.authorizeRead(ctx, d.Topic)
		} else {
			err = s.az.g.Admin(auth.FromContext(ctx), wire.CallPeer(ctx), "ViewMessage of an undecodable record")
		}
		if err != nil {
			return &pb.ViewMessageResponse{Status: wire.Status(err)}, nil
		}
	}
	return &pb.ViewMessageResponse{Status: wire.Status(err), Record: rec}, nil
}

func (s *brokerService) QueryMessage(_ context.Context, req *pb.QueryMessageRequest) (*pb.QueryMessageResponse, error) {
	recs, err := s.b.QueryMessage(req.Topic, req.Key, req.BeginMs, req.EndMs, int(req.Max))
	return &pb.QueryMessageResponse{Status: wire.Status(err), Records: recs}, nil
}

func (s *brokerService) CreateTopic(_ context.Context, req *pb.CreateTopicRequest) (*pb.CreateTopicResponse, error) {
	if req.Topic == nil {
		return &pb.CreateTopicResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER, "no topic given"))}, nil
	}
	tc := v1wire.TopicFromProto(req.Topic)
	if v, ok := tc.Attributes[topic.AttrMessageType]; ok {
		mt, ok := topic.ParseMessageType(v)
		if !ok {
			return &pb.CreateTopicResponse{Status: wire.Status(wire.Errorf(pb.Code_INVALID_PARAMETER,
				"topic %s: message type %q is not one of %v", tc.Name, v, topic.MessageTypes))}, nil
		}
		tc.Attributes[topic.AttrMessageType] = mt
	}
	return &pb.CreateTopicResponse{Status: wire.Status(s.b.CreateTopic(tc, req.Update))}, nil
}

func (s *brokerService) DeleteTopic(_ context.Context, req *pb.BrokerDeleteTopicRequest) (*pb.BrokerDeleteTopicResponse, error) {
	return &pb.BrokerDeleteTopicResponse{Status: wire.Status(s.b.DeleteTopic(req.Topic))}, nil
}

func (s *brokerService) GetTopicConfigs(context.Context, *pb.GetTopicConfigsRequest) (*pb.GetTopicConfigsResponse, error) {
	resp := &pb.GetTopicConfigsResponse{Status: wire.OK}
	for _, t := range s.b.TopicConfigs() {
		resp.Topics = append(resp.Topics, v1wire.TopicToProto(t))
	}
	return resp, nil
}

func (s *brokerService) GetBrokerInfo(context.Context, *pb.GetBrokerInfoRequest) (*pb.GetBrokerInfoResponse, error) {
	i := s.b.Info()
	repl := replicationToProto(i.Replication)
	return &pb.GetBrokerInfoResponse{
		Status: wire.OK, Cluster: i.Cluster, BrokerName: i.BrokerName, BrokerId: i.BrokerID,
		Addr: i.Addr, Version: i.Version, Role: repl.Role, FlushMode: i.FlushMode,
		MasterAddr: repl.MasterAddr, Epoch: repl.Epoch, Replication: repl,
		CommitLogMinOffset: i.CommitLogMinOffset, CommitLogMaxOffset: i.CommitLogMaxOffset,
		DispatchBehindBytes: i.DispatchBehindBytes, DiskUsedRatio: i.DiskUsedRatio,
		StoreBytes: i.StoreBytes, StartTimeMs: i.StartTime.UnixMilli(),
	}, nil
}

func (s *brokerService) ListConsumerGroups(context.Context, *pb.ListConsumerGroupsRequest) (*pb.ListConsumerGroupsResponse, error) {
	resp := &pb.ListConsumerGroupsResponse{Status: wire.OK}
	for _, g := range s.b.ConsumerGroups() {
		info := &pb.ConsumerGroupInfo{Group: g.Group, MessageModel: pb.MessageModel(g.Model), Orderly: g.Orderly, ClientIds: g.ClientIDs}
		for _, sub := range g.Subscriptions {
			info.Subscriptions = append(info.Subscriptions, &pb.Subscription{Topic: sub.Topic, Expression: sub.Expression, ExpressionType: sub.Type})
		}
		resp.Groups = append(resp.Groups, info)
	}
	return resp, nil
}

func (s *brokerService) GetConsumeStats(_ context.Context, req *pb.GetConsumeStatsRequest) (*pb.GetConsumeStatsResponse, error) {
	stats, err := s.b.ConsumeStats(req.Group, req.Topic)
	if err != nil {
		return &pb.GetConsumeStatsResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.GetConsumeStatsResponse{Status: wire.OK}
	for _, q := range stats {
		resp.Queues = append(resp.Queues, &pb.QueueStats{Topic: q.Topic, QueueId: q.ID, BrokerOffset: q.BrokerOffset,
			ConsumerOffset: q.ConsumerOffset, LastTimestamp: q.LastTimestamp})
	}
	return resp, nil
}

func (s *brokerService) ResetOffset(_ context.Context, req *pb.ResetOffsetRequest) (*pb.ResetOffsetResponse, error) {
	changes, err := s.b.ResetOffset(req.Group, req.Topic, req.TimestampMs, req.ToEarliest, req.ToLatest, req.DryRun)
	if err != nil {
		return &pb.ResetOffsetResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.ResetOffsetResponse{Status: wire.OK}
	for _, c := range changes {
		resp.Changes = append(resp.Changes, &pb.OffsetChange{QueueId: c.QueueID, Before: c.Before, After: c.After})
	}
	return resp, nil
}

func (s *brokerService) GetBrokerRuntime(context.Context, *pb.GetBrokerRuntimeRequest) (*pb.GetBrokerRuntimeResponse, error) {
	rt := s.b.Runtime()
	i := rt.Info
	return &pb.GetBrokerRuntimeResponse{
		Status: wire.OK, Cluster: i.Cluster, BrokerName: i.BrokerName, BrokerId: i.BrokerID, Addr: i.Addr,
		Version: i.Version, Role: replicationToProto(i.Replication).Role, StartTimeMs: i.StartTime.UnixMilli(),
		BrokerPermission: rt.Permission,
		PutMessagesTotal: rt.PutMessages, GetMessagesTotal: rt.GetMessages,
		PutBytesTotal: rt.PutBytes, GetBytesTotal: rt.GetBytes, PutTps: rt.PutTPS, GetTps: rt.GetTPS,
		CommitLogMinOffset: i.CommitLogMinOffset, CommitLogMaxOffset: i.CommitLogMaxOffset,
		DispatchBehindBytes: i.DispatchBehindBytes, StoreBytes: i.StoreBytes, DiskUsedRatio: i.DiskUsedRatio,
		DiskTotalBytes: rt.DiskTotal, DiskFreeBytes: rt.DiskFree,
		Topics: int32(rt.Topics), Queues: int32(rt.Queues), Groups: int32(rt.Groups),
		ConsumerConnections: int32(rt.ConsumerConnections), ProducerConnections: int32(rt.ProducerConnections),
		HeapBytes: rt.HeapBytes, RssBytes: rt.RSSBytes, Goroutines: int32(rt.Goroutines), Extra: rt.Extra,
	}, nil
}

func configEntriesToProto(es []broker.ConfigEntry) []*pb.BrokerConfigEntry {
	out := make([]*pb.BrokerConfigEntry, 0, len(es))
	for _, e := range es {
		out = append(out, &pb.BrokerConfigEntry{Key: e.Key, Value: e.Value, DefaultValue: e.Default,
			Runtime: e.Runtime, Description: e.Description})
	}
	return out
}

func (s *brokerService) GetBrokerConfig(context.Context, *pb.GetBrokerConfigRequest) (*pb.GetBrokerConfigResponse, error) {
	return &pb.GetBrokerConfigResponse{Status: wire.OK, Entries: configEntriesToProto(s.b.Config())}, nil
}

func (s *brokerService) UpdateBrokerConfig(_ context.Context, req *pb.UpdateBrokerConfigRequest) (*pb.UpdateBrokerConfigResponse, error) {
	entries, err := s.b.UpdateConfig(req.GetEntries())
	if err != nil {
		return &pb.UpdateBrokerConfigResponse{Status: wire.Status(err)}, nil
	}
	return &pb.UpdateBrokerConfigResponse{Status: wire.OK, Entries: configEntriesToProto(entries)}, nil
}

func (s *brokerService) GetTopicStats(_ context.Context, req *pb.GetTopicStatsRequest) (*pb.GetTopicStatsResponse, error) {
	stats := s.b.TopicStats(req.GetTopics())
	resp := &pb.GetTopicStatsResponse{Status: wire.OK, Topics: make([]*pb.TopicStat, 0, len(stats))}
	for _, t := range stats {
		resp.Topics = append(resp.Topics, &pb.TopicStat{Topic: t.Topic, ReadQueues: t.ReadQueues, WriteQueues: t.WriteQueues,
			Perm: t.Perm, MessageType: t.MessageType, MinOffsetSum: t.MinOffsetSum, MaxOffsetSum: t.MaxOffsetSum,
			LastStoreTimeMs: t.LastStoreTimeMS})
	}
	return resp, nil
}

// connInfo describes the connection of a Connect stream: Bolide's SDK is
// Go's, and its version is the gRPC user agent it sends.
func connInfo(ctx context.Context) broker.ConnInfo {
	ci := broker.ConnInfo{RemoteAddr: wire.CallPeer(ctx), Language: "GO", Protocol: broker.ProtocolBolide}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if ua := md.Get("user-agent"); len(ua) > 0 {
			ci.Version = ua[0]
		}
	}
	return ci
}

func withConn(hb broker.Heartbeat, ci broker.ConnInfo) broker.Heartbeat {
	hb.Conn = ci
	return hb
}

// GetGroupConnections lists the group's producers and consumers connected
// to this broker (over every protocol).
func (s *brokerService) GetGroupConnections(_ context.Context, req *pb.GetGroupConnectionsRequest) (*pb.GetGroupConnectionsResponse, error) {
	gc, err := s.b.GroupConnections(req.Group)
	if err != nil {
		return &pb.GetGroupConnectionsResponse{Status: wire.Status(err)}, nil
	}
	resp := &pb.GetGroupConnectionsResponse{Status: wire.OK}
	for _, c := range gc.Producers {
		resp.Producers = append(resp.Producers, clientConnectionToProto(c))
	}
	for _, c := range gc.Consumers {
		pc := clientConnectionToProto(c)
		pc.ConsumeType, pc.MessageModel = c.ConsumeType, pb.MessageModel(c.Model)
		for _, sub := range c.Subscriptions {
			pc.Subscriptions = append(pc.Subscriptions, &pb.Subscription{Topic: sub.Topic, Expression: sub.Expression, ExpressionType: sub.Type})
		}
		resp.Consumers = append(resp.Consumers, pc)
	}
	return resp, nil
}

func clientConnectionToProto(c broker.ClientConnection) *pb.ClientConnection {
	return &pb.ClientConnection{ClientId: c.ClientID, RemoteAddr: c.RemoteAddr, Language: c.Language, Version: c.Version,
		Protocol: c.Protocol, ConnectedSinceMs: c.ConnectedSince.UnixMilli(), LastHeartbeatMs: c.LastHeartbeat.UnixMilli()}
}
