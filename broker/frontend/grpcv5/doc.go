// Package grpcv5 is the broker's front end for RocketMQ 5's gRPC protocol,
// apache.rocketmq.v2.MessagingService, the one service every official
// RocketMQ 5 client (Java, Go, C++, C#, Python, Node.js, Rust) speaks. It
// registers the generated code the official Go client ships
// (github.com/apache/rocketmq-clients/golang/v5/protocol/v2) on the
// broker's gRPC server: the protocol's .proto files are compiled into a
// binary once, from there.
//
// What a client does against a broker, in protocol order:
//
//   - Telemetry: one long-lived stream per client and broker. The client's
//     Settings (producer or consumer, topics or group and subscriptions)
//     are stored under its x-mq-client-id and written back in full with
//     the broker's values; the stream later carries transaction
//     check-backs (RecoverOrphanedTransactionCommand) to producers.
//   - Heartbeat every 10 s and NotifyClientTermination on stop.
//   - SendMessage (normal, FIFO with a message group, delayed by a delivery
//     timestamp, transactional) and EndTransaction.
//   - ReceiveMessage (POP: messages handed out with receipt handles and
//     kept invisible until acknowledged), AckMessage,
//     ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue, over the
//     core's POP consumption (broker/pop).
//
// QueryRoute and QueryAssignment are the access point's: the NameServer
// answers them (package nameserver), naming each broker's own port as its
// endpoint. A broker answers them too, relaying them to its NameServers (the
// Node.js and Java push consumers ask a broker for their assignments), or
// from its own topics when it has none (route.go). With the broker's ACL
// on, every RPC is authenticated by its signed x-mq-date-time header and
// authorized by what it names before its handler runs (auth.go); refusals
// are UNAUTHORIZED (40100) and FORBIDDEN (40300). Application errors travel in the responses' Status with gRPC
// status OK, as the clients expect; docs/rocketmq-compat/v5.md lists the
// codes.
package grpcv5
