package grpcv5

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/v5wire"
)

// The headers RocketMQ 5's clients send on every call.
const (
	headerClientID  = "x-mq-client-id"
	headerNamespace = "x-mq-namespace"
	headerLanguage  = "x-mq-language"
	headerVersion   = "x-mq-client-version"
	headerRequestID = "x-mq-request-id"
)

// callMeta is what a call's headers and connection say about its client.
type callMeta struct {
	clientID  string
	namespace string // x-mq-namespace: used when a Resource names none
	language  string // "GO", "JAVA", "HTTP" (Node.js), ...
	version   string
	requestID string
	peer      netip.AddrPort // the connection's remote address (zero if unknown)
	accessKey string         // the authenticated caller's (ACL on), else ""
}

// readMeta reads a call's headers. Missing headers are empty: what a call
// requires it checks itself (requireClient).
func readMeta(ctx context.Context) callMeta {
	var m callMeta
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		first := func(k string) string {
			if v := md.Get(k); len(v) > 0 {
				return strings.TrimSpace(v[0])
			}
			return ""
		}
		m.clientID = first(headerClientID)
		m.namespace = first(headerNamespace)
		m.language = first(headerLanguage)
		m.version = first(headerVersion)
		m.requestID = first(headerRequestID)
	}
	if p := auth.FromContext(ctx); p != nil {
		m.accessKey = p.AccessKey
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if t, ok := p.Addr.(*net.TCPAddr); ok {
			m.peer = t.AddrPort()
		} else if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
			m.peer = ap
		}
		m.peer = netip.AddrPortFrom(m.peer.Addr().Unmap(), m.peer.Port())
	}
	return m
}

// requireClient refuses a call without x-mq-client-id
// (CLIENT_ID_REQUIRED): Telemetry, Heartbeat, NotifyClientTermination and
// the calls that act for a client (receive, transactions) need it.
func (m callMeta) requireClient() error {
	if m.clientID == "" {
		return errorf(v2.Code_CLIENT_ID_REQUIRED, "header %s is required", headerClientID)
	}
	return nil
}

// Namespaces. A Resource (topic or group) may name a namespace; Bolide
// folds it into the name the way Apache RocketMQ does (NamespaceUtil):
//
//   - the namespace is the Resource's resource_namespace, else the call's
//     x-mq-namespace header (the clients send both, equal);
//   - an empty namespace leaves the name as it is;
//   - otherwise the name becomes "<namespace>%<name>", unless it already
//     starts with "<namespace>%"; a retry or dead-letter name keeps its
//     prefix outside: "%RETRY%<namespace>%<group>", "%DLQ%<namespace>%<group>".
//
// So a topic "orders" in namespace "shop" is the topic "shop%orders" of
// Bolide's other protocols (remoting clients with setNamespace fold the
// same way), and names the broker stores or hands back (a check-back's
// topic) are unfolded again for the client (unfold). The namespace itself
// must be letters, digits, '_' and '-'.

// resourceNamespace is the namespace a Resource is in.
func (m callMeta) resourceNamespace(r *v2.Resource) string {
	if ns := strings.TrimSpace(r.GetResourceNamespace()); ns != "" {
		return ns
	}
	return m.namespace
}

// topicName is the (folded) topic a Resource names, validated:
// ILLEGAL_TOPIC when it is empty or not a legal name.
func (m callMeta) topicName(r *v2.Resource) (string, error) {
	name, code, msg := v5wire.TopicName(m.resourceNamespace(r), r.GetName())
	if code != v2.Code_OK {
		return "", errorf(code, "%s", msg)
	}
	return name, nil
}

// groupName is the (folded) consumer group a Resource names, validated:
// ILLEGAL_CONSUMER_GROUP when it is empty or not a legal name.
func (m callMeta) groupName(r *v2.Resource) (string, error) {
	name, code, msg := v5wire.GroupName(m.resourceNamespace(r), r.GetName())
	if code != v2.Code_OK {
		return "", errorf(code, "%s", msg)
	}
	return name, nil
}
