package nameserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/internal/wire"
)

// RocketMQ's remoting protocol on the NameServer's port: the requests that
// RocketMQ's clients and mqadmin send to a NameServer (doc.go lists them).
// Brokers register over bolide.v1 only; a Java broker's REGISTER_BROKER is
// refused like every request not served here, with
// REQUEST_CODE_NOT_SUPPORTED and the connection kept.

// remotingProtocol serves remoting connections: those whose first byte is 0
// (a frame length under 16 MiB).
type remotingProtocol struct{ srv *remoting.Server }

func (remotingProtocol) Name() string { return "remoting" }

func (remotingProtocol) Claims(head []byte) bool { return len(head) > 0 && head[0] == 0 }

func (p remotingProtocol) Serve(lis net.Listener) error { return p.srv.Serve(lis) }

func (p remotingProtocol) Shutdown(ctx context.Context) error { return p.srv.Shutdown(ctx) }

// remotingHandler answers one request; it never blocks.
type remotingHandler func(req *remoting.Command) *remoting.Command

func (s *Server) newRemoting() remotingProtocol {
	s.kv = newKVConfig()
	handlers := map[int32]remotingHandler{
		remoting.GetRouteInfoByTopic:           s.rmqRoute,
		remoting.GetBrokerClusterInfo:          s.rmqClusterInfo,
		remoting.GetAllTopicListFromNameServer: s.rmqAllTopics,
		remoting.DeleteTopicInNameServer:       s.rmqDeleteTopic,
		remoting.GetTopicsByCluster:            s.rmqTopicsByCluster,
		remoting.GetSystemTopicListFromNS:      s.rmqSystemTopics,
		remoting.PutKVConfig:                   s.rmqPutKV,
		remoting.GetKVConfig:                   s.rmqGetKV,
		remoting.DeleteKVConfig:                s.rmqDeleteKV,
		remoting.GetKVListByNamespace:          s.rmqKVList,
		remoting.RegisterBroker: func(req *remoting.Command) *remoting.Command {
			return req.Reply(remoting.RequestCodeNotSupported,
				"REGISTER_BROKER: Bolide's NameServer registers Bolide brokers only (bolide.v1 gRPC)")
		},
	}
	h := remoting.HandlerFunc(func(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		start := time.Now()
		var resp *remoting.Command
		label := strconv.Itoa(int(req.Code))
		if f := handlers[req.Code]; f != nil {
			resp = f(req)
		} else {
			resp = req.Reply(remoting.RequestCodeNotSupported,
				fmt.Sprintf("request code %d is not supported by Bolide's NameServer", req.Code))
			label = "unsupported" // any int32 may come: keep the label set bounded
		}
		s.metrics.init().rpcLatency.WithLabelValues("remoting", label, strconv.Itoa(int(resp.Code))).
			Observe(float64(time.Since(start)) / float64(time.Millisecond))
		if resp.Code != remoting.Success {
			s.lg.Debug("remoting request refused", zap.Int32("code", req.Code), zap.Int32("response_code", resp.Code),
				zap.String("remark", resp.Remark), zap.Stringer("remote", conn.RemoteAddr()))
		}
		return resp
	})
	return remotingProtocol{srv: remoting.NewServer(h, remoting.ServerOptions{}, s.lg.Named("remoting"))}
}

// replyBody answers with a JSON body, or SYSTEM_ERROR when it cannot be
// encoded.
func replyBody(req *remoting.Command, body []byte, err error) *remoting.Command {
	if err != nil {
		return req.Reply(remoting.SystemError, err.Error())
	}
	resp := req.Reply(remoting.Success, "")
	resp.Body = body
	return resp
}

// rmqRoute is GET_ROUTEINFO_BY_TOPIC (105): the topic's TopicRouteData, or
// TOPIC_NOT_EXIST (which sends producers to TBW102's route).
func (s *Server) rmqRoute(req *remoting.Command) *remoting.Command {
	topic, err := req.Required("topic")
	if err != nil {
		return req.Reply(remoting.SystemError, err.Error())
	}
	rt, err := s.routes.Route(topic)
	if err != nil {
		if errors.Is(err, wire.ErrTopicNotExist) {
			return req.Reply(remoting.TopicNotExist, "No topic route info in name server for the topic: "+topic)
		}
		// An illegal name has no route either; RocketMQ answers the same.
		return req.Reply(remoting.TopicNotExist, fmt.Sprintf("No topic route info in name server for the topic: %s (%v)", topic, err))
	}
	body, err := encodeRoute(rt)
	return replyBody(req, body, err)
}

// rmqClusterInfo is GET_BROKER_CLUSTER_INFO (106).
func (s *Server) rmqClusterInfo(req *remoting.Command) *remoting.Command {
	body, err := encodeClusterInfo(s.routes.ClusterInfo())
	return replyBody(req, body, err)
}

// rmqAllTopics is GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206).
func (s *Server) rmqAllTopics(req *remoting.Command) *remoting.Command {
	body, err := encodeTopicList(s.routes.Topics(), "")
	return replyBody(req, body, err)
}

// rmqDeleteTopic is DELETE_TOPIC_IN_NAMESRV (216): the topic's queue data
// goes, of every group or of the groups of clusterName. As in RocketMQ it
// succeeds when there was nothing to delete. A master that still has the
// topic brings it back with its next topic table: mqadmin deletes the topic
// on the brokers first.
func (s *Server) rmqDeleteTopic(req *remoting.Command) *remoting.Command {
	topic, err := req.Required("topic")
	if err != nil {
		return req.Reply(remoting.SystemError, err.Error())
	}
	cluster := req.String("clusterName")
	switch err := s.routes.DeleteTopic(topic, cluster); {
	case err == nil:
		s.lg.Info("topic deleted from routes", zap.String("topic", topic), zap.String("cluster", cluster), zap.String("protocol", "remoting"))
	case errors.Is(err, wire.ErrTopicNotExist):
	default:
		return req.Reply(remoting.InvalidParameter, err.Error())
	}
	return req.Reply(remoting.Success, "")
}

// rmqTopicsByCluster is GET_TOPICS_BY_CLUSTER (224).
func (s *Server) rmqTopicsByCluster(req *remoting.Command) *remoting.Command {
	cluster, err := req.Required("cluster")
	if err != nil {
		return req.Reply(remoting.SystemError, err.Error())
	}
	body, err := encodeTopicList(s.routes.TopicsByCluster(cluster), "")
	return replyBody(req, body, err)
}

// rmqSystemTopics is GET_SYSTEM_TOPIC_LIST_FROM_NS (304). Like RocketMQ's
// NameServer it lists every cluster name and broker name (each is a topic a
// broker may create for itself), with the address of one broker for the
// caller to ask for the brokers' own system topics.
func (s *Server) rmqSystemTopics(req *remoting.Command) *remoting.Command {
	ci := s.routes.ClusterInfo()
	var topics []string
	for c, names := range ci.Clusters {
		topics = append(topics, c)
		topics = append(topics, names...)
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	addr := ""
	if len(ci.Live) > 0 {
		addr = ci.Live[0].Addr
	}
	body, err := encodeTopicList(topics, addr)
	return replyBody(req, body, err)
}

// rmqPutKV is PUT_KV_CONFIG (100).
func (s *Server) rmqPutKV(req *remoting.Command) *remoting.Command {
	ns, key := req.String("namespace"), req.String("key")
	if !req.Has("namespace") || !req.Has("key") {
		return req.Reply(remoting.SystemError, "namespace or key is null")
	}
	s.kv.put(ns, key, req.String("value"))
	s.lg.Info("kv config put", zap.String("namespace", ns), zap.String("key", key), zap.String("value", req.String("value")))
	return req.Reply(remoting.Success, "")
}

// rmqGetKV is GET_KV_CONFIG (101): the value, or QUERY_NOT_FOUND. Java
// clients ask for ORDER_TOPIC_CONFIG; nothing is found unless mqadmin put
// it.
func (s *Server) rmqGetKV(req *remoting.Command) *remoting.Command {
	ns, key := req.String("namespace"), req.String("key")
	v, ok := s.kv.get(ns, key)
	if !ok {
		return req.Reply(remoting.QueryNotFound, fmt.Sprintf("No config item, Namespace: %s Key: %s", ns, key))
	}
	return req.Reply(remoting.Success, "").Set("value", v)
}

// rmqDeleteKV is DELETE_KV_CONFIG (102); deleting nothing succeeds.
func (s *Server) rmqDeleteKV(req *remoting.Command) *remoting.Command {
	ns, key := req.String("namespace"), req.String("key")
	s.kv.delete(ns, key)
	return req.Reply(remoting.Success, "")
}

// rmqKVList is GET_KVLIST_BY_NAMESPACE (219): the namespace as a KVTable,
// or QUERY_NOT_FOUND when it is empty.
func (s *Server) rmqKVList(req *remoting.Command) *remoting.Command {
	ns := req.String("namespace")
	table := s.kv.list(ns)
	if len(table) == 0 {
		return req.Reply(remoting.QueryNotFound, "No config item, Namespace: "+ns)
	}
	body, err := encodeKVTable(table)
	return replyBody(req, body, err)
}
