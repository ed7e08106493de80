package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/bolide-mq/bolide/client"
)

// popMessageJSON is a message consume --pop prints with -o json: the
// message and its delivery attempt.
type popMessageJSON struct {
	messageJSON
	DeliveryAttempt int32 `json:"deliveryAttempt"`
}

// popLineFormat is consume --pop's table output: consume's columns and the
// delivery attempt.
const popLineFormat = "%-10s %5s %8s %7s  %-24s  %-10s  %-20s  %s\n"

func writePopLineHeader(w io.Writer) {
	fmt.Fprintf(w, popLineFormat, "BROKER", "QUEUE", "OFFSET", "ATTEMPT", "STORED", "TAG", "KEYS", "BODY")
}

func writePopLine(w io.Writer, m *client.MessageView) {
	fmt.Fprintf(w, popLineFormat, m.BrokerName, fmt.Sprint(m.QueueID), fmt.Sprint(m.QueueOffset), fmt.Sprint(m.DeliveryAttempt),
		formatTime(m.StoreTimestamp), cell(m.Tag), joinOrDash(m.Keys, ","), displayBody(m.Body, 0))
}

// runPopConsume is consume --pop: a simple consumer receives, prints and
// acknowledges each message.
func (a *app) runPopConsume(f *consumeFlags) error {
	if f.invisible <= 0 || f.invisible > client.MaxInvisibleDuration {
		return usageErrorf("--invisible must be in (0, %s], not %s", client.MaxInvisibleDuration, f.invisible)
	}
	if err := a.checkTopic(f.topic); err != nil {
		return err
	}
	await := 20 * time.Second
	if f.idle > 0 {
		await = f.idle
	}
	sel, flag := client.ByTag(f.tag), "--tag"
	if f.sqlSet {
		sel, flag = client.SQL92(f.sql), "--sql"
	}
	c, err := client.NewSimpleConsumerSelectors(f.group, map[string]client.Selector{f.topic: sel}, await, a.clientOption())
	if err != nil {
		if errors.Is(err, client.ErrSubscriptionParse) {
			return usageErrorf("%s: %v", flag, err)
		}
		return err
	}
	defer c.Close()
	if err := c.Start(a.ctx); err != nil {
		return forTopic(f.topic, err)
	}
	n := 0
	headerDone := false
	last := time.Now()
	var loopErr error
	for f.count == 0 || n < f.count {
		rctx, cancel := a.ctx, context.CancelFunc(func() {})
		if f.idle > 0 {
			rctx, cancel = context.WithDeadline(a.ctx, last.Add(f.idle))
		}
		want := 32
		if f.count > 0 {
			want = min(want, f.count-n)
		}
		msgs, err := c.Receive(rctx, want, f.invisible)
		cancel()
		if err != nil {
			if a.ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
				loopErr = err
			}
			break // idle, interrupted (Ctrl-C ends a consume normally) or failed
		}
		if len(msgs) == 0 {
			if f.idle > 0 && !time.Now().Before(last.Add(f.idle)) {
				break
			}
			continue
		}
		last = time.Now()
		for _, m := range msgs {
			if err := a.printPopMessage(m, &headerDone); err != nil {
				loopErr = err
				break
			}
			actx, cancel := context.WithTimeout(context.Background(), a.timeout)
			err := c.Ack(actx, m)
			cancel()
			if err != nil {
				// Printed but not acknowledged: it comes again once
				// its invisibility runs out.
				a.warn("ack %s: %s", m.MsgID, oneLine(err.Error()))
				continue
			}
			n++
		}
		if loopErr != nil {
			break
		}
	}
	a.handledInterrupt = true
	if errors.Is(loopErr, client.ErrSubscriptionParse) && n == 0 {
		// The broker refused the selector (it parses SQL92 conditions).
		return usageErrorf("%s: %v", flag, loopErr)
	}
	if loopErr != nil {
		return forTopic(f.topic, loopErr)
	}
	a.info("consumed and acknowledged %d messages from %s as group %s", n, f.topic, f.group)
	return nil
}

func (a *app) printPopMessage(m *client.MessageView, headerDone *bool) error {
	if a.json() {
		return a.emit(popMessageJSON{messageJSON: toMessageJSON(&m.MessageExt), DeliveryAttempt: m.DeliveryAttempt})
	}
	if !*headerDone {
		*headerDone = true
		writePopLineHeader(a.stdout)
	}
	writePopLine(a.stdout, m)
	return nil
}
