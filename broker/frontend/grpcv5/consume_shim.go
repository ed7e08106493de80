package grpcv5

// Stand-ins for the shared helpers of status.go and metadata.go, used by
// the consume RPCs until those files exist; removed then.

import (
	"context"
	"errors"

	"google.golang.org/grpc/metadata"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/bolide-mq/bolide/internal/errcode"
)

// consumeCodes maps the core's codes to the protocol's for the consume RPCs.
var consumeCodes = map[errcode.Code]v2.Code{
	errcode.InvalidReceiptHandle:     v2.Code_INVALID_RECEIPT_HANDLE,
	errcode.IllegalInvisibleTime:     v2.Code_ILLEGAL_INVISIBLE_TIME,
	errcode.TopicNotExist:            v2.Code_TOPIC_NOT_FOUND,
	errcode.SubscriptionParseFailed:  v2.Code_ILLEGAL_FILTER_EXPRESSION,
	errcode.IllegalTopic:             v2.Code_ILLEGAL_TOPIC,
	errcode.IllegalGroup:             v2.Code_ILLEGAL_CONSUMER_GROUP,
	errcode.SubscriptionGroupMissing: v2.Code_CONSUMER_GROUP_NOT_FOUND,
	errcode.SystemBusy:               v2.Code_TOO_MANY_REQUESTS,
	errcode.NoPermission:             v2.Code_FORBIDDEN,
	errcode.InvalidParameter:         v2.Code_BAD_REQUEST,
	errcode.FlushDiskTimeout:         v2.Code_MASTER_PERSISTENCE_TIMEOUT,
	errcode.FlushSlaveTimeout:        v2.Code_SLAVE_PERSISTENCE_TIMEOUT,
	errcode.SlaveNotAvailable:        v2.Code_HA_NOT_AVAILABLE,
	errcode.InSyncReplicasNotEnough:  v2.Code_HA_NOT_AVAILABLE,
	errcode.NotMaster:                v2.Code_FORBIDDEN,
	errcode.ServiceNotAvailable:      v2.Code_FORBIDDEN,
}

// consumeStatus is the Status of a core error (OK for nil).
func consumeStatus(err error) *v2.Status {
	if err == nil {
		return &v2.Status{Code: v2.Code_OK, Message: "OK"}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &v2.Status{Code: v2.Code_PROXY_TIMEOUT, Message: err.Error()}
	}
	c, ok := consumeCodes[errcode.Of(err)]
	if !ok {
		c = v2.Code_INTERNAL_SERVER_ERROR
	}
	return &v2.Status{Code: c, Message: err.Error()}
}

// consumeClientID is the caller's x-mq-client-id, or "".
func consumeClientID(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-mq-client-id"); len(v) > 0 {
		return v[0]
	}
	return ""
}

// consumeResource is the broker's name of a topic or group: Apache folds a
// non-empty namespace in as "namespace%name".
func consumeResource(r *v2.Resource) string {
	if r.GetResourceNamespace() == "" {
		return r.GetName()
	}
	return r.GetResourceNamespace() + "%" + r.GetName()
}
