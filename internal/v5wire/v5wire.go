// Package v5wire holds what the NameServer (the access point) and the
// broker's front end (broker/frontend/grpcv5) both say in RocketMQ 5's gRPC
// protocol, apache.rocketmq.v2, so that they say it alike: endpoints,
// queue permissions, the message types a topic accepts, and how a
// namespace folds into topic and group names. Pure functions over the
// generated code the official Go client ships.
package v5wire

import (
	"net"
	"strconv"
	"strings"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/broker/topic"
	"github.com/bolide-mq/bolide/message"
)

// Endpoints is a registered host:port as a route names it: exactly one
// address (the Go client panics on none, the Java client refuses several
// with DOMAIN_NAME), scheme IPv4 or IPv6 for an IP literal, DOMAIN_NAME
// otherwise. ok is false for an address that is not host:port.
func Endpoints(addr string) (*v2.Endpoints, bool) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return nil, false
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return nil, false
	}
	scheme := v2.AddressScheme_DOMAIN_NAME
	if ip := net.ParseIP(host); ip != nil {
		scheme = v2.AddressScheme_IPv6
		if ip.To4() != nil {
			scheme = v2.AddressScheme_IPv4
		}
	}
	return &v2.Endpoints{Scheme: scheme, Addresses: []*v2.Address{{Host: host, Port: int32(port)}}}, true
}

// Permission is a queue's permission.
func Permission(read, write bool) v2.Permission {
	switch {
	case read && write:
		return v2.Permission_READ_WRITE
	case read:
		return v2.Permission_READ
	case write:
		return v2.Permission_WRITE
	}
	return v2.Permission_NONE
}

// QueuePermissions numbers a broker's queues of a topic from 0 and gives
// each its permission: queue i is readable when the topic is and i < its
// read queue count, writable likewise. A topic neither readable nor
// writable has max(1, read, write) queues with permission NONE, as Apache
// lists them.
func QueuePermissions(readable, writable bool, readQueues, writeQueues int32) []v2.Permission {
	n := max(readQueues, writeQueues)
	if !readable && !writable {
		n = max(n, 1)
	}
	out := make([]v2.Permission, n)
	for i := range n {
		out[i] = Permission(readable && i < readQueues, writable && i < writeQueues)
	}
	return out
}

// MessageType is a topic message type (broker/topic's NORMAL, FIFO, DELAY,
// TRANSACTION) in the protocol's enum; anything else is NORMAL.
func MessageType(t string) v2.MessageType {
	switch t {
	case topic.TypeFIFO:
		return v2.MessageType_FIFO
	case topic.TypeDelay:
		return v2.MessageType_DELAY
	case topic.TypeTransaction:
		return v2.MessageType_TRANSACTION
	}
	return v2.MessageType_NORMAL
}

// AcceptTypes are the message types the queues of a topic accept, given
// its message.type attribute: its own type, or all four for no attribute,
// MIXED or an unknown value (as topic.Config.MessageType reads them).
func AcceptTypes(attr string) []v2.MessageType {
	if mt, ok := topic.ParseMessageType(strings.TrimSpace(attr)); ok && mt != topic.TypeMixed {
		return []v2.MessageType{MessageType(mt)}
	}
	return []v2.MessageType{v2.MessageType_NORMAL, v2.MessageType_FIFO, v2.MessageType_DELAY, v2.MessageType_TRANSACTION}
}

// Namespaces, folded as Apache's NamespaceUtil folds them: a non-empty
// namespace makes a name "<namespace>%<name>" unless it already starts so;
// the retry and dead-letter prefixes stay outside.

// NamespaceHeader is the metadata header a client names its namespace in
// (every Resource carries it too).
const NamespaceHeader = "x-mq-namespace"

// nsSeparator separates a namespace from a name.
const nsSeparator = "%"

// ValidNamespace reports whether ns can prefix a name: letters, digits,
// '_' and '-'.
func ValidNamespace(ns string) bool {
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Fold is name in namespace ns.
func Fold(ns, name string) string {
	if ns == "" || name == "" {
		return name
	}
	for _, p := range []string{message.RetryTopicPrefix, message.DLQTopicPrefix} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			return p + Fold(ns, rest)
		}
	}
	if strings.HasPrefix(name, ns+nsSeparator) {
		return name
	}
	return ns + nsSeparator + name
}

// Unfold is the name a client of namespace ns knows a folded name by.
func Unfold(ns, name string) string {
	if ns == "" {
		return name
	}
	for _, p := range []string{message.RetryTopicPrefix, message.DLQTopicPrefix} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			return p + Unfold(ns, rest)
		}
	}
	return strings.TrimPrefix(name, ns+nsSeparator)
}

// TopicName is the (folded) topic a Resource of namespace ns names, or why
// it is refused: ILLEGAL_TOPIC for a bad namespace, an illegal name or a
// topic of the broker's own.
func TopicName(ns, name string) (string, v2.Code, string) {
	if !ValidNamespace(ns) {
		return "", v2.Code_ILLEGAL_TOPIC, "namespace " + strconv.Quote(ns) + " may hold only letters, digits, '_' and '-'"
	}
	folded := Fold(ns, name)
	if err := message.ValidateTopic(folded); err != nil {
		return "", v2.Code_ILLEGAL_TOPIC, "topic " + strconv.Quote(name) + ": " + err.Error()
	}
	if message.IsSystemTopic(folded) {
		return "", v2.Code_ILLEGAL_TOPIC, "topic " + folded + " is reserved for the broker"
	}
	return folded, v2.Code_OK, ""
}

// GroupName is the (folded) consumer group a Resource of namespace ns
// names, or why it is refused: ILLEGAL_CONSUMER_GROUP.
func GroupName(ns, name string) (string, v2.Code, string) {
	if !ValidNamespace(ns) {
		return "", v2.Code_ILLEGAL_CONSUMER_GROUP, "namespace " + strconv.Quote(ns) + " may hold only letters, digits, '_' and '-'"
	}
	folded := Fold(ns, name)
	if err := message.ValidateGroup(folded); err != nil {
		return "", v2.Code_ILLEGAL_CONSUMER_GROUP, "consumer group " + strconv.Quote(name) + ": " + err.Error()
	}
	return folded, v2.Code_OK, ""
}
