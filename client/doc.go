// Package client is Bolide's Go SDK: a Producer, a PushConsumer, a lite
// PullConsumer, a SimpleConsumer and an Admin, speaking the gRPC protocol of proto/bolidev1 to
// NameServers and brokers.
//
// Every client follows one lifecycle: New… with functional options (nothing
// is dialled yet), Start(ctx) (Producer, consumers), the blocking calls —
// each takes a context.Context first — and Close, which stops and waits for
// every goroutine the client started.
//
// Options are typed by the clients they concern: an Option (WithNameServers,
// WithLogger, ...) is accepted by every client, a ProducerOption
// (WithSendRetries, ...) only by NewProducer and NewTransactionProducer, a
// ConsumerOption (WithConsumeFrom, ...) only by NewPushConsumer and
// NewPullConsumer (NewSimpleConsumer and NewAdmin take only Options), so that a setting given to a client that would ignore it
// does not compile. WithOptions bundles shared options into one.
//
// # Routes
//
// Clients learn where a topic lives from the NameServers given with
// WithNameServers (tried in turn until one answers). Routes are cached per
// topic, refreshed every WithRouteRefreshInterval (30 s) and again at once
// after a send or pull error. Brokers are reached over one gRPC connection
// per address, shared by everything the client does, and — for the data
// path, sends and pulls — over one connection of Bolide's framed protocol
// (internal/frame) to the same address, which costs the broker less CPU per
// request than gRPC. WithTransport(TransportGRPC) keeps the data path on
// gRPC; a broker that does not speak the frame protocol is used over gRPC
// automatically.
//
// # Sending
//
// Producer.Send multiplexes concurrent sends over the broker's frame
// connection (or, over gRPC, one Broker.SendStream per broker), so
// throughput is not bounded by lock-step calls. Queues are picked
// round-robin across brokers; a broker that failed or answered slowly is
// avoided for a while (RocketMQ's latency fault tolerance), and a retryable
// failure is retried on another broker (WithSendRetries, default 2). Ordered
// sends (WithShardingKey, WithQueueSelector, WithQueue) always use the
// queue they select and are never retried elsewhere.
//
// Producer.SendAsync coalesces: the asynchronous sends of one topic that
// are routed alike (the round robin, one WithQueue queue, one sharding
// key) have at most one request on the wire. A send that finds none in
// flight goes at once, alone (no linger); those that arrive meanwhile go
// together, in the order SendAsync took them, as one batch request when it
// returns — within WithAsyncBatch's bounds (256 messages, 1 MiB by
// default) and only with the same context. A batch is sent, retried and
// failed over as one Send of it; each callback gets its own message's
// result. A batch the broker refuses for what it holds (a message it will
// not take, more messages than its limit) is sent again one message at a
// time. Sends with a QueueSelector each go alone.
//
// # Message ids
//
// A message has two ids, named as RocketMQ's clients name them. MsgID
// (SendResult.MsgID, MessageExt.MsgID) is the unique id the producer gives
// it, property UNIQ_KEY: every copy of the message keeps it (retries, its
// dead letter, a repeated send), so it is the id to log, deduplicate on,
// look a message up by and cancel a timer message with. OffsetMsgID is
// where one copy was stored: the store host and CommitLog offset as hex (32
// characters for an IPv4 host). A message stored without UNIQ_KEY (the
// inner messages of a batch some RocketMQ clients send) has its
// OffsetMsgID as MsgID too, as in RocketMQ's clients. Admin.ViewMessage
// takes either and says which matched.
//
// # Consuming
//
// Consumers of one group share the topic's queues (Clustering, the default:
// queues are allocated by an AllocateStrategy, average by default, and
// re-allocated when members join or leave) or each take all of them
// (Broadcasting). Clustering offsets are committed to the brokers,
// broadcasting offsets to a JSON file on the client. PushConsumer pulls with
// long polling and calls a ConcurrentListener (or an ErrorListener) from a
// worker pool, or an OrderlyListener one queue at a time while holding the
// queue's broker-side lock; Subscribe takes only these types. PullConsumer hands messages to Poll and commits what Poll returned.
//
// A subscription selects messages by tag (Subscribe's expression, or
// SubscribeSelector with ByTag) or by an SQL92 condition over their
// properties (SubscribeSelector with SQL92, as RocketMQ's
// MessageSelector.bySql). Both filters run on the brokers; an SQL92
// condition is checked with them when it is subscribed (the SDK does not
// parse the language itself), and the group's offsets move past the
// messages it does not select.
//
// SimpleConsumer consumes over POP, as RocketMQ 5's simple consumers do: no
// queues are assigned and no offsets kept by the client; Receive asks the
// masters of the subscribed topics in turn for messages, which stay
// invisible to the group's other receives until Ack (or until their
// invisibility runs out: they come again with the next DeliveryAttempt);
// ChangeInvisibleDuration moves that deadline and Nack asks for the
// redelivery after the group's retry backoff. The group's FIFO flag,
// maximum delivery attempts and backoff are its subscription group
// settings (Admin.CreateSubscriptionGroup, UpdateSubscriptionGroup).
//
// # Credentials and TLS
//
// Against daemons started with --acl, give every client the keys of a user
// of their ACL files; against daemons with TLS (required with --tls-mode
// enforcing), a TLS configuration:
//
//	secure := client.WithOptions(
//		client.WithCredentials(os.Getenv("BOLIDE_ACCESS_KEY"), os.Getenv("BOLIDE_SECRET_KEY")),
//		client.WithTLS(&tls.Config{RootCAs: pool}),
//	)
//	p, err := client.NewProducer("billing-producer", secure, client.WithNameServers(addrs...))
//
// Each gRPC call carries a date signed with the secret (the secret itself
// is never sent), each frame connection one Auth request. A daemon that
// cannot identify the caller answers UNAUTHENTICATED (ErrUnauthenticated),
// one whose user lacks a permission NO_PERMISSION (ErrNoPermission): the
// call fails at once, never retried, with the code at the head of its text.
// What consumers meet in the background (heartbeats, pulls) is reported:
// PullConsumer.Poll returns it, WithRefusalHandler is told of it. Admin.PutAclUser
// and its siblings manage the users (bolide acl).
//
// # Errors
//
// Errors that come from a broker or NameServer carry a wire code and match
// the sentinels of this package with errors.Is (ErrTopicNotExist,
// ErrMessageTooLarge, ...). Local validation failures use the same codes,
// so a bad message is rejected with the error the broker would have given,
// without a round trip.
package client
