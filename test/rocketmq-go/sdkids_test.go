package rocketmqgo_test

import "github.com/bolide-mq/bolide/client"

// The Bolide SDK's names for the two message ids, in one place: the unique
// id (UNIQ_KEY, RocketMQ's MsgId) and the offset id (RocketMQ's
// OffsetMsgId).

func sdkMsgID(m *client.MessageExt) string    { return m.UniqueID }
func sdkOffsetID(m *client.MessageExt) string { return m.MsgID }
func sdkSendMsgID(r *client.SendResult) string {
	return r.UniqueID
}
func sdkSendOffsetID(r *client.SendResult) string { return r.MsgID }
func sdkDeadLetterMsgID(d client.DeadLetter) string {
	return d.UniqueID
}
