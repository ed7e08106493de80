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
// Brokers register over bolide.v1 only; a Java broker's REGISTER_BROKER
// and UNREGISTER_BROKER are answered REQUEST_CODE_NOT_SUPPORTED (after the
// access check of a call between daemons), like every request not served
// here, and the connection is kept.

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
	handlers := s.remotingHandlers()
	h := remoting.HandlerFunc(func(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		start := time.Now()
		var resp *remoting.Command
		label := strconv.Itoa(int(req.Code))
		f := handlers[req.Code]
		if resp = s.rmqCheck(conn, req); resp != nil {
			if f == nil {
				label = "unsupported"
			}
		} else if f != nil {
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

// remotingHandlers are the requests the NameServer serves over remoting;
// rmqAccess classifies each.
func (s *Server) remotingHandlers() map[int32]remotingHandler {
	notBolide := func(req *remoting.Command) *remoting.Command {
		return req.Reply(remoting.RequestCodeNotSupported,
			"REGISTER_BROKER and UNREGISTER_BROKER: Bolide's NameServer registers Bolide brokers only (bolide.v1 gRPC)")
	}
	return map[int32]remotingHandler{
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
		remoting.UpdateNamesrvConfig:           s.rmqUpdateConfig,
		remoting.GetNamesrvConfig:              s.rmqGetConfig,
		remoting.RegisterBroker:                notBolide,
		remoting.UnregisterBroker:              notBolide,
	}
}

// Access control of the NameServer's remoting requests (package auth).
// With ACL on every request is authenticated by its ACL 1.0 signature,
// then checked by its class: reads (routes, cluster info, topic lists, KV
// reads, the configuration) need an authenticated caller; changes (topic
// deletion, KV writes, configuration updates) an admin user; broker
// registration is a call between daemons (Internal). Codes the table does
// not name are refused. With ACL off the admin requests are accepted from
// loopback only (unless --allow-remote-admin). A refusal is NO_PERMISSION
// (16) with the guard's message, and the handler does not run.

// rmqClass is what a NameServer remoting request needs.
type rmqClass uint8

const (
	rmqRead     rmqClass = iota + 1 // an authenticated caller
	rmqAdmin                        // an admin user; loopback while ACL is off
	rmqInternal                     // another daemon (an admin user while ACL is on)
)

type rmqAccess struct {
	class rmqClass
	what  string // names the request in refusals
}

// rmqAccessTable classifies every request code the NameServer serves over
// remoting.
var rmqAccessTable = map[int32]rmqAccess{
	remoting.GetRouteInfoByTopic:           {rmqRead, "GET_ROUTEINFO_BY_TOPIC"},
	remoting.GetBrokerClusterInfo:          {rmqRead, "GET_BROKER_CLUSTER_INFO"},
	remoting.GetAllTopicListFromNameServer: {rmqRead, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER"},
	remoting.GetTopicsByCluster:            {rmqRead, "GET_TOPICS_BY_CLUSTER"},
	remoting.GetSystemTopicListFromNS:      {rmqRead, "GET_SYSTEM_TOPIC_LIST_FROM_NS"},
	remoting.GetKVConfig:                   {rmqRead, "GET_KV_CONFIG"},
	remoting.GetKVListByNamespace:          {rmqRead, "GET_KVLIST_BY_NAMESPACE"},
	remoting.GetNamesrvConfig:              {rmqRead, "GET_NAMESRV_CONFIG"},
	remoting.DeleteTopicInNameServer:       {rmqAdmin, "DELETE_TOPIC_IN_NAMESRV"},
	remoting.PutKVConfig:                   {rmqAdmin, "PUT_KV_CONFIG"},
	remoting.DeleteKVConfig:                {rmqAdmin, "DELETE_KV_CONFIG"},
	remoting.UpdateNamesrvConfig:           {rmqAdmin, "UPDATE_NAMESRV_CONFIG"},
	remoting.RegisterBroker:                {rmqInternal, "REGISTER_BROKER"},
	remoting.UnregisterBroker:              {rmqInternal, "UNREGISTER_BROKER"},
}

// rmqCheck authorizes req before its handler: nil to serve it, or the
// refusal. With ACL off it costs a map lookup, and the peer's address for
// admin requests only.
func (s *Server) rmqCheck(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	a, known := rmqAccessTable[req.Code]
	if !s.guard.Enabled() {
		if known && a.class == rmqAdmin {
			if err := s.guard.Admin(nil, conn.RemoteAddr().String(), a.what); err != nil {
				return req.Reply(remoting.NoPermission, err.Error())
			}
		}
		return nil
	}
	if !known {
		return req.Reply(remoting.NoPermission, fmt.Sprintf("request code %d is not served by this NameServer and is refused while ACL is on", req.Code))
	}
	peer := conn.RemoteAddr().String()
	p, err := s.guard.Remoting(peer, req.Ext, req.Body, req.Language)
	if err == nil {
		switch a.class {
		case rmqRead:
			err = s.guard.Authenticated(p, peer)
		case rmqAdmin:
			err = s.guard.Admin(p, peer, a.what)
		case rmqInternal:
			err = s.guard.Internal(p, peer, a.what)
		}
	}
	if err != nil {
		return req.Reply(remoting.NoPermission, err.Error())
	}
	return nil
}

// namesrvConfig is the allow-list of the NameServer's configuration keys
// that UPDATE_NAMESRV_CONFIG may change while it runs (internal/remoting's
// ConfigAllowList): none today. configStorePath, kvConfigPath (the keys of
// CVE-2023-37582), every other path and every key not listed are refused.
var namesrvConfig = remoting.NewConfigAllowList("NameServer")

// rmqUpdateConfig is UPDATE_NAMESRV_CONFIG (318): a properties body whose
// keys must all be in namesrvConfig; otherwise NO_PERMISSION naming the
// allowed keys, and nothing changes.
func (s *Server) rmqUpdateConfig(req *remoting.Command) *remoting.Command {
	keys, err := namesrvConfig.Update(req.Body)
	if err != nil {
		return req.Reply(remoting.NoPermission, err.Error())
	}
	if len(keys) > 0 {
		s.lg.Info("configuration changed over remoting", zap.Strings("keys", keys))
	}
	return req.Reply(remoting.Success, "")
}

// rmqGetConfig is GET_NAMESRV_CONFIG (319): the NameServer's settings as
// properties text, in RocketMQ's names where it has them. Never a secret
// or a path.
func (s *Server) rmqGetConfig(req *remoting.Command) *remoting.Command {
	resp := req.Reply(remoting.Success, "")
	resp.Body = remoting.EncodeProperties(map[string]string{
		"listenAddr":                  s.Addr(),
		"scanNotActiveBrokerInterval": strconv.FormatInt(s.opts.ScanInterval.Milliseconds(), 10),
		"brokerChannelExpiredTime":    strconv.FormatInt(s.opts.BrokerTimeout.Milliseconds(), 10),
		"aclEnable":                   strconv.FormatBool(s.guard.Enabled()),
		"controllerEnable":            strconv.FormatBool(s.opts.Controller != nil),
	})
	return resp
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
