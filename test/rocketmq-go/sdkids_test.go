package rocketmqgo_test

import "github.com/bolide-mq/bolide/client"

// The Bolide SDK's names for the two message ids, in one place: the unique
// id (UNIQ_KEY, RocketMQ's MsgId) and the offset id (RocketMQ's
// OffsetMsgId). The SDK uses RocketMQ's names: MsgID and OffsetMsgID.

func sdkMsgID(m *client.MessageExt) string          { return m.MsgID }
func sdkOffsetID(m *client.MessageExt) string       { return m.OffsetMsgID }
func sdkSendMsgID(r *client.SendResult) string      { return r.MsgID }
func sdkSendOffsetID(r *client.SendResult) string   { return r.OffsetMsgID }
func sdkDeadLetterMsgID(d client.DeadLetter) string { return d.MsgID }
