package topic

import (
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// Reserved topics: the rule every front end reaches through the broker's
// core, so that no client can forge the state the broker keeps in topics
// of its own (replay marks, POP log, half messages, delayed messages).
//
//   - A topic of the system (message.IsSystemTopic: rmq_sys_*, RMQ_SYS_*,
//     TBW102, SCHEDULE_TOPIC_XXXX, ...) is the broker's: a client can
//     neither create, change nor delete it (ILLEGAL_TOPIC; RocketMQ's
//     broker answers "The topic[...] is conflict with system topic") nor
//     send to it (NO_PERMISSION, as RocketMQ's "Sending message to
//     topic[...] is forbidden").
//   - %DLQ%<group> is written by the broker only, when it dead-letters a
//     message; clients may create, change and delete it (mqadmin does, for
//     a group's topics) and read it.
//   - %RETRY%<group> takes what a consumer sends back: the send-back call,
//     or a single message the consumer sends to it itself carrying
//     RETRY_TOPIC (RocketMQ's clients do when the send-back call fails, and
//     orderly consumers when they give up); the broker then applies the
//     group's retry rule (broker/retry). Anything else sent to it is
//     refused.
//
// The broker's own writes (retries, dead letters, delays, transactions, POP
// log, replay marks) go to its store directly and are not judged here.

// CheckChange returns the error a client's request to create, change or
// delete topic name is refused with, or nil.
func CheckChange(name string) error {
	if message.IsSystemTopic(name) {
		return errcode.Errorf(errcode.IllegalTopic, "the topic[%s] conflicts with a system topic: names rmq_sys_*, RMQ_SYS_*, TBW102, SCHEDULE_TOPIC_XXXX and TRANS_CHECK_MAX_TIME_TOPIC are reserved for the broker", name)
	}
	return nil
}

// CheckSend returns the error a client's send of a message with properties
// props to topic name is refused with, or nil. batch says the message is
// one of a batch.
func CheckSend(name string, props map[string]string, batch bool) error {
	switch {
	case message.IsSystemTopic(name):
		return forbidden(name, "the topic is reserved for the broker")
	case message.IsDLQTopic(name):
		return forbidden(name, "dead-letter topics are written by the broker only")
	case message.IsRetryTopic(name) && batch:
		return forbidden(name, "a retry topic takes one message at a time, sent back by a consumer of its group")
	case message.IsRetryTopic(name) && props[message.PropertyRetryTopic] == "":
		return forbidden(name, "a retry topic takes only messages a consumer of its group sends back, with property "+message.PropertyRetryTopic)
	}
	return nil
}

func forbidden(name, why string) error {
	return errcode.Errorf(errcode.NoPermission, "sending message to topic[%s] is forbidden: %s", name, why)
}
