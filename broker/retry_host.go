package broker

import (
	"context"

	"github.com/bolide-mq/bolide/broker/retry"
	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/message"
)

// RetryOptions configure consumer retries (see package retry).
type RetryOptions = retry.Options

// retryHost is the broker as package retry sees it.
type retryHost struct{ b *Broker }

var _ retry.Host = retryHost{}

func (h retryHost) Writable() error { return h.b.checkWritable() }

func (h retryHost) ReadMessage(offset int64) (*message.Ext, error) {
	return h.b.store.ReadMessage(offset)
}

// Store stores a retry copy, dead letter or replay mark: delay rewriting (a
// retry copy carries DELAY), the in-sync check, the append and the wait for
// replication, as Send does.
func (h retryHost) Store(ctx context.Context, m *message.Ext) (string, error) {
	b := h.b
	if err := b.scheduleDelayed(m); err != nil {
		return "", err
	}
	res, err := b.put(ctx, []*message.Ext{m})
	if err != nil {
		return "", err
	}
	return res[0].MsgID, nil
}

func (h retryHost) HasTopic(topic string) bool {
	_, ok := h.b.topics.get(topic)
	return ok
}

func (h retryHost) CreateTopic(topic string) error {
	if err := h.b.topics.put(TopicConfig{Name: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: PermReadWrite}, false); err != nil {
		return err
	}
	h.b.reg.trigger()
	h.b.repl.TriggerMetadataPush()
	return nil
}

func (h retryHost) GetMessages(topic string, queueID int32, offset int64, maxCount, maxBytes int) (store.GetResult, error) {
	res, err := h.b.store.GetMessages(topic, queueID, offset, maxCount, maxBytes, nil)
	return res, storeError(err)
}

func (h retryHost) QueueOffsets(topic string, queueID int32) (minOff, maxOff int64) {
	return h.b.store.QueueOffsets(topic, queueID)
}
