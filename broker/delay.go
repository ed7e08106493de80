package broker

import (
	"github.com/bolide-mq/bolide/internal/wire"
	"github.com/bolide-mq/bolide/message"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// DelayOptions configure delayed delivery.
type DelayOptions struct{}

func defaultDelayOptions() DelayOptions { return DelayOptions{} }

func (o *DelayOptions) validate() error { return nil }

// rewriteDelayed turns messages that ask for delayed delivery into their
// stored form. Delayed delivery is not built yet, so such messages are
// refused rather than delivered at once.
func (b *Broker) rewriteDelayed(msgs []*message.Ext) error {
	for _, m := range msgs {
		for _, k := range []string{message.PropertyDelayLevel, message.PropertyTimerDeliverMS,
			message.PropertyTimerDelaySec, message.PropertyTimerDelayMS} {
			if v := m.Properties[k]; v != "" && v != "0" {
				return wire.Errorf(pb.Code_REQUEST_NOT_SUPPORTED, "delayed delivery (%s) is not supported by this broker yet", k)
			}
		}
	}
	return nil
}

func (b *Broker) startDelay() error { return nil }

func (b *Broker) stopDelay() error { return nil }
