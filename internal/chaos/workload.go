package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/client"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// Workload is the producers' side of a run: Producers SDK producers, each
// sending its own sharding keys' sequence numbers one send at a time and
// retrying a sequence number until it is acknowledged.
type Workload struct {
	NameServers []string
	Topic       string
	// Producers (8) each own KeysPerProducer (4) sharding keys, used in
	// turn.
	Producers, KeysPerProducer int
	// BodySize of every message (128 bytes).
	BodySize int
	// SendTimeout bounds one attempt (1 s).
	SendTimeout time.Duration
	// Backoff is the pause after a failed attempt (50 ms).
	Backoff time.Duration
	// Rate limits each producer's sends per second (0: as fast as acks
	// come).
	Rate float64
	// Hosts maps a store host to a broker name.
	Hosts func(storeHost string) string
	Log   *zap.Logger
}

func (w *Workload) defaults() {
	if w.Producers == 0 {
		w.Producers = 8
	}
	if w.KeysPerProducer == 0 {
		w.KeysPerProducer = 4
	}
	if w.BodySize == 0 {
		w.BodySize = 128
	}
	if w.SendTimeout == 0 {
		w.SendTimeout = time.Second
	}
	if w.Backoff == 0 {
		w.Backoff = 50 * time.Millisecond
	}
	if w.Log == nil {
		w.Log = zap.NewNop()
	}
}

// Load is a running workload.
type Load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts the producers; they record into h until Stop.
func (w Workload) Start(ctx context.Context, h *History) (*Load, error) {
	w.defaults()
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{cancel: cancel}
	prods := make([]*client.Producer, w.Producers)
	for i := range prods {
		p, err := client.NewProducer(fmt.Sprintf("chaos-p%d", i),
			client.WithNameServers(w.NameServers...), client.WithLogger(w.Log),
			client.WithSendTimeout(w.SendTimeout), client.WithRPCTimeout(w.SendTimeout))
		if err == nil {
			err = p.Start(ctx)
		}
		if err != nil {
			cancel()
			for _, q := range prods[:i] {
				_ = q.Close()
			}
			return nil, fmt.Errorf("producer %d: %w", i, err)
		}
		prods[i] = p
	}
	for i, p := range prods {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer func() { _ = p.Close() }()
			w.produce(ctx, int32(i), p, h)
		}()
	}
	return l, nil
}

// Stop stops the producers and waits for them.
func (l *Load) Stop() {
	l.cancel()
	l.wg.Wait()
}

func (w *Workload) produce(ctx context.Context, id int32, p *client.Producer, h *History) {
	keys := make([]int32, w.KeysPerProducer)
	seqs := make([]int32, w.KeysPerProducer)
	for j := range keys {
		keys[j] = id*int32(w.KeysPerProducer) + int32(j)
		seqs[j] = 1
	}
	var interval time.Duration
	if w.Rate > 0 {
		interval = time.Duration(float64(time.Second) / w.Rate)
	}
	next := time.Now()
	for j := 0; ctx.Err() == nil; j = (j + 1) % len(keys) {
		key := keys[j]
		for attempt := int32(1); ctx.Err() == nil; attempt++ {
			if interval > 0 {
				if d := time.Until(next); d > 0 {
					sleep(ctx, d)
				}
				next = next.Add(interval)
				if time.Until(next) < -time.Second {
					next = time.Now() // do not burst after a long stall
				}
			}
			c := CopyID{MsgKey{key, seqs[j]}, attempt}
			a := w.send(ctx, p, h, id, c)
			h.Add(a)
			if a.Outcome == Acked {
				seqs[j]++
				break
			}
			sleep(ctx, w.Backoff)
		}
	}
}

func (w *Workload) send(ctx context.Context, p *client.Producer, h *History, id int32, c CopyID) Attempt {
	a := Attempt{CopyID: c, Producer: id, Offset: -1, Queue: -1}
	sctx, cancel := context.WithTimeout(ctx, w.SendTimeout+500*time.Millisecond)
	a.Start = h.Now()
	res, err := p.Send(sctx, &client.Message{Topic: w.Topic, Body: Body(c, w.BodySize)}, client.WithShardingKey(fmt.Sprintf("key-%d", c.Key)))
	a.End = h.Now()
	cancel()
	if err != nil {
		a.Outcome, a.Code = classify(ctx, err)
		a.Err = err.Error()
		return a
	}
	a.Outcome, a.Offset, a.Queue = Acked, res.CommitLogOffset, res.QueueID
	if host, _, err := message.ParseOffsetMsgID(res.OffsetMsgID); err == nil && w.Hosts != nil {
		a.Broker = w.Hosts(host.String())
	}
	if a.Broker == "" {
		a.Broker = "?" + res.OffsetMsgID
	}
	return a
}

// classify turns a send error into an outcome and a code name.
func classify(ctx context.Context, err error) (Outcome, string) {
	var ce *errcode.Error
	switch {
	case errors.As(err, &ce):
		if ce.Code == errcode.Timeout {
			return Unknown, ce.Code.String()
		}
		return Failed, ce.Code.String()
	case errors.Is(err, client.ErrBrokerUnreachable):
		return Unknown, "UNREACHABLE"
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return Unknown, "CANCELED"
	case errors.Is(err, context.DeadlineExceeded):
		return Unknown, "TIMEOUT"
	case errors.Is(err, client.ErrNoRoute):
		return Failed, "NO_ROUTE"
	}
	return Unknown, "OTHER"
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
