package broker

import (
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TransactionOptions configure transactional messages.
type TransactionOptions struct{}

func defaultTransactionOptions() TransactionOptions { return TransactionOptions{} }

func (o *TransactionOptions) validate() error { return nil }

// rewriteTransactional turns half messages into their stored form.
// Transactions are not built yet, so half messages are refused.
func (b *Broker) rewriteTransactional(msgs []*message.Ext) error {
	for _, m := range msgs {
		if message.TransactionType(m.SysFlag) != message.SysFlagTransNotType || m.Properties[message.PropertyTransactionPrepared] == "true" {
			return wire.Errorf(pb.Code_REQUEST_NOT_SUPPORTED, "transactional messages are not supported by this broker yet")
		}
	}
	return nil
}

func (b *Broker) startTransactions() error { return nil }

func (b *Broker) stopTransactions() error { return nil }
