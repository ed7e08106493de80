// Package nameserver is Bolide's NameServer as a library: a route table of
// topics, broker groups and clusters that brokers keep fresh by registering
// every 30 s, served over gRPC (proto/bolide/v1/nameserver.proto) and, on
// the same port, over RocketMQ's remoting protocol for RocketMQ's clients
// and mqadmin (see "Remoting" below); Bolide's SDK asks for routes over the
// frame protocol of internal/frame (method GetRoute; framed.go).
//
// NameServers are stateless and never talk to each other; a broker registers
// with every one of them. The table follows RocketMQ's RouteInfoManager:
//
//	topic       -> broker name -> queue data    (taken from masters only)
//	broker name -> cluster, addresses by broker id (0 = master)
//	cluster     -> broker names
//	broker addr -> liveness (last registration, timeout, data version, ...)
//
// A master's registration carries its whole topic table, applied when its
// data version changed, or, once the NameServer holds a version of it and
// answered topic_delta_accepted, a delta: the topics changed since the
// version held and those removed (RegisterBrokerRequest.topics_delta). A
// delta is applied only on the version held for that address and id;
// otherwise nothing changes and the answer says topics_stale, and the
// broker sends its whole table (so a NameServer that restarted, evicted the
// broker or deleted one of its topics' routes is brought up to date). An
// empty delta is a heartbeat. Applying either costs work in the topics
// registered and the group's own, not in the whole table.
//
// A broker leaves the table in three ways: it unregisters on a clean stop;
// its gossip node leaves or is declared dead (membership, seconds); or it
// stays silent longer than its heartbeat timeout (the sweep, 120 s by
// default, the slow and authoritative path).
//
// Membership is an accelerator, never the authority: a broker removed
// because its gossip node was declared dead comes back with its next
// registration, and a registered broker whose gossip node is missing from
// the pool (never joined, wrongly declared dead, partitioned) is joined by
// the NameServer so that it is watched again.
//
// A broker name and id belong to one address at a time (identity.go): a
// registration for a name and id that a live broker at another address
// holds is refused with INVALID_PARAMETER, naming both addresses and how to
// resolve it, and changes nothing; the refusal is logged at WARN once a
// minute per identity and address. The holder counts as gone when it left
// the table in one of the three ways above, or when a TCP dial of its
// address fails (500 ms timeout, outside the table's lock, answer reused
// for 2 s): a broker restarted on a new port takes its id over at once. A
// master (id 0) registering with an epoch higher than the holder's is a
// promoted slave and replaces it, as epoch fencing always did.
//
// # Remoting
//
// The port is shared through internal/portmux: a connection opening with
// the HTTP/2 preface is gRPC's, one opening with "BLD1" the frame
// protocol's, one whose first byte is 0 (a remoting frame length under 16
// MiB) is remoting's (internal/remoting frames), and any other is closed;
// with Options.Remoting off, remoting connections are closed too, and
// with Options.NoFrames frame connections. Requests served, with their header fields (extFields) and
// answers:
//
//	105 GET_ROUTEINFO_BY_TOPIC        topic          0 + TopicRouteData, or 17 TOPIC_NOT_EXIST
//	106 GET_BROKER_CLUSTER_INFO       -              0 + ClusterInfo
//	206 GET_ALL_TOPIC_LIST_FROM_NAMESERVER -         0 + TopicList
//	216 DELETE_TOPIC_IN_NAMESRV       topic [clusterName]  0, also when nothing was deleted
//	224 GET_TOPICS_BY_CLUSTER         cluster        0 + TopicList ([] for an unknown cluster)
//	304 GET_SYSTEM_TOPIC_LIST_FROM_NS -              0 + TopicList of cluster and broker names, brokerAddr
//	100 PUT_KV_CONFIG                 namespace key value  0
//	101 GET_KV_CONFIG                 namespace key  0 + value field, or 22 QUERY_NOT_FOUND
//	102 DELETE_KV_CONFIG              namespace key  0
//	219 GET_KVLIST_BY_NAMESPACE       namespace      0 + KVTable, or 22 QUERY_NOT_FOUND
//	318 UPDATE_NAMESRV_CONFIG         body: properties  0 when every key is on the runtime allow-list
//	                                                 (internal/remoting/config.go; empty today), else 16 naming them
//	319 GET_NAMESRV_CONFIG            -              0 + properties (no paths, no secrets)
//
// A missing required field is answered 1 SYSTEM_ERROR naming it. Every other
// code, REGISTER_BROKER (103) and UNREGISTER_BROKER (104) from a Java broker
// included, is answered 3 REQUEST_CODE_NOT_SUPPORTED with a remark; the
// connection stays open.
//
// Access control (package auth; remoting.go's table): with ACL on, every
// request carries an ACL 1.0 signature; reads need a known user, 216, 100,
// 102 and 318 an admin, 103/104 an admin (the daemons' own keys), and a code
// not in the table is refused. With ACL off, the administrative codes are
// accepted from loopback only (unless --allow-remote-admin). Refusals are
// 16 NO_PERMISSION with the reason as remark.
//
// The bodies are JSON as RocketMQ's NameServer writes them with fastjson
// (compact, keys sorted, null fields left out), because clients decode them
// by hand:
//
//	TopicRouteData {"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},
//	                 "brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],
//	                "filterServerTable":{},
//	                "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,
//	                 "topicSysFlag":0,"writeQueueNums":4}]}
//	ClusterInfo    {"brokerAddrTable":{"broker-a":<BrokerData>},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}
//	TopicList      {"brokerAddr":"10.0.0.1:10911","topicList":["T1","T2"]}   (brokerAddr only from 304)
//	KVTable        {"table":{"key":"value"}}
//
// rocketmq-client-go reads brokerAddrs from the object's raw text, cut at
// commas and colons: a space or a newline anywhere in it corrupts the
// addresses, and a missing or null brokerAddrs panics the client. It needs
// queueDatas as an array of JSON numbers, and takes a non-empty
// orderTopicConf ("broker:queues;...") over queueDatas, panicking on a
// malformed one. So the body has no whitespace, brokerAddrs is always an
// object (ids quoted, in numeric order; fastjson accepts the quotes, and
// RocketMQ 4.9.4+ writes them too), and orderTopicConf is never written:
// Bolide has no order configuration, and the key-value pairs mqadmin stores
// (ORDER_TOPIC_CONFIG) are kept in memory for it to read back, never put
// into routes. Broker addresses are those the brokers registered, which
// serve remoting on the same port.
//
// # RocketMQ 5 access point
//
// The gRPC server also serves apache.rocketmq.v2.MessagingService (v5.go,
// with the official Go client's generated code), so RocketMQ 5's clients
// take the NameServer's address as their access point. Only QueryRoute
// and QueryAssignment are served; the clients send every other RPC to the
// brokers a route names, and here they answer gRPC's Unimplemented.
//
// QueryRoute lists, for each broker group serving the topic (sorted by
// broker name) whose master is registered, queues 0 .. max(read, write)-1
// of the master: Broker{name, id 0, endpoints = its registered address as
// one Address, scheme IPv4 or IPv6 for an IP literal, DOMAIN_NAME
// otherwise}; permission READ_WRITE, READ, WRITE or NONE per queue from
// the topic's perm and queue counts; accept_message_types from the topic's
// "message.type" attribute, which brokers register with their topics
// (NORMAL, FIFO, DELAY or TRANSACTION alone; none, MIXED or unknown: all
// four). Slaves are not listed (POP state changes go through the master).
// Statuses: TOPIC_NOT_FOUND when no group serves the topic, NOT_FOUND when
// none of them has a master registered, ILLEGAL_TOPIC for a bad or system
// topic name. The request's Resource is echoed in every queue, and the
// answer is the same as long as the table is (clients compare routes).
//
// QueryAssignment gives, per broker group with readable queues, one
// assignment of queue id -1 (any queue of that master), or, for a group
// that consumes in order, one per readable queue; FORBIDDEN "no readable
// queue" when there are none. A group consumes in order when the master of
// one of the topic's broker groups lists it in fifo_groups
// (RegisterBrokerRequest; each master registration replaces its list).
//
// A Resource's namespace folds into the name as the brokers fold it
// ("<namespace>%<name>", the header x-mq-namespace when the Resource has
// none).
package nameserver
