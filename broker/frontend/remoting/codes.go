package remoting

import (
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
)

// responseCode maps an error of the core (internal/errcode) to RocketMQ's
// response code: the codes RocketMQ has keep their numbers, Bolide's own
// become the code a RocketMQ broker answers in the same situation. A nil
// error is SUCCESS; an error without a code is SYSTEM_ERROR.
//
// What the clients do with them matters more than the names: the producers
// retry a send on another broker after SYSTEM_ERROR (1),
// SERVICE_NOT_AVAILABLE (14), NO_PERMISSION (16) and TOPIC_NOT_EXIST (17)
// only, and take FLUSH_DISK_TIMEOUT (10), SLAVE_NOT_AVAILABLE (11) and
// FLUSH_SLAVE_TIMEOUT (12) as "stored, but not as safely as asked". So a
// refusal that another broker may not share (a slave, a stopping broker, a
// full disk, too few in-sync slaves) is 14 or 1, and a message that can never
// be stored is MESSAGE_ILLEGAL (13).
func responseCode(err error) int32 {
	switch c := errcode.Of(err); c {
	case errcode.OK:
		return rmq.Success
	case errcode.SystemError, errcode.SystemBusy, errcode.RequestNotSupported,
		errcode.FlushDiskTimeout, errcode.SlaveNotAvailable, errcode.FlushSlaveTimeout,
		errcode.MessageIllegal, errcode.ServiceNotAvailable, errcode.NoPermission,
		errcode.TopicNotExist, errcode.TopicExistAlready, errcode.PullNotFound,
		errcode.PullRetryImmediately, errcode.PullOffsetMoved, errcode.QueryNotFound,
		errcode.SubscriptionParseFailed, errcode.InvalidParameter, errcode.BrokerNotExist:
		return int32(c) // the same numbers as RocketMQ's ResponseCode
	case errcode.SubscriptionGroupMissing:
		return rmq.SubscriptionGroupNotExist
	case errcode.MessageTooLarge, errcode.IllegalTopic, errcode.PropertiesTooLarge, errcode.IllegalDeliveryTime:
		// RocketMQ: MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED and
		// WHEEL_TIMER_MSG_ILLEGAL are all answered MESSAGE_ILLEGAL.
		return rmq.MessageIllegal
	case errcode.IllegalGroup:
		return rmq.InvalidParameter
	case errcode.DiskFull, errcode.NotMaster, errcode.ShuttingDown:
		// RocketMQ: "the broker's disk is full, messages are put to the
		// slave, message store has been shut down".
		return rmq.ServiceNotAvailable
	case errcode.InSyncReplicasNotEnough:
		// Refused before it was stored (RocketMQ: IN_SYNC_REPLICAS_NOT_ENOUGH
		// is a SYSTEM_ERROR); a send that was stored and then not replicated
		// in time is answered SLAVE_NOT_AVAILABLE by send.go.
		return rmq.SystemError
	case errcode.LockNotHeld, errcode.DelayAlreadyDelivered, errcode.TransactionStateConflict:
		return rmq.IllegalOperation
	case errcode.Timeout, errcode.TransactionNotFound:
		return rmq.SystemError
	}
	return rmq.SystemError
}

// errorReply answers req with err's response code and message.
func errorReply(req *rmq.Command, err error) *rmq.Command {
	return req.Reply(responseCode(err), err.Error())
}
