// Command v5bench puts a load on Bolide over the RocketMQ 5 gRPC protocol
// with the official Go client: --producers v5 producers (each its own
// client) send --count messages of --size bytes synchronously while
// --consumers simple consumers of one group receive and acknowledge them.
// It prints the send and consume rates and, given the broker's pid, the
// broker's CPU time (utime + stime from /proc/<pid>/stat) per message.
// scripts/bench-v5.sh runs it beside `bolide bench` with the same load.
//
// The client dials TLS unless --tls=false (the broker serves both on one
// port); the comparison with Bolide's SDK, which speaks plaintext, uses
// plaintext.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

type result struct {
	Messages       int64   `json:"messages"`
	SendSeconds    float64 `json:"sendSeconds"`
	SendPerSec     float64 `json:"sendPerSec"`
	Consumed       int64   `json:"consumed"`
	ConsumeSeconds float64 `json:"consumeSeconds"`
	ConsumePerSec  float64 `json:"consumePerSec"`
	SendErrors     int64   `json:"sendErrors"`
	BrokerCPU      float64 `json:"brokerCpuSeconds,omitempty"`
	CPUPerMsgUs    float64 `json:"brokerCpuMicrosPerMsg,omitempty"`
}

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:9876", "access point: the NameServer's address")
	topic := flag.String("topic", "bench", "topic (create it first)")
	group := flag.String("group", "", "consumer group (default: a fresh v5bench-<time> group)")
	producers := flag.Int("producers", 16, "v5 producers, each its own client, sending synchronously")
	consumers := flag.Int("consumers", 4, "v5 simple consumers of the group (0: send only)")
	count := flag.Int64("count", 200000, "messages to send in all")
	size := flag.Int("size", 1024, "body bytes")
	batch := flag.Int("receive-batch", 32, "messages per receive")
	idle := flag.Duration("idle", 10*time.Second, "consumers stop when nothing arrives for this long")
	pid := flag.Int("broker-pid", 0, "the broker's pid: report its CPU per message from /proc")
	tls := flag.Bool("tls", false, "dial TLS (the client's default) instead of plaintext")
	jsonOut := flag.Bool("json", false, "print the result as one JSON line")
	flag.Parse()
	rmq.EnableSsl = *tls
	if *group == "" {
		*group = fmt.Sprintf("v5bench-%d", time.Now().UnixNano())
	}
	res, err := run(*endpoint, *topic, *group, *producers, *consumers, *count, *size, int32(*batch), *idle, *pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, "v5bench:", err)
		os.Exit(1)
	}
	if *jsonOut {
		b, err := json.Marshal(res)
		if err != nil {
			fmt.Fprintln(os.Stderr, "v5bench:", err)
			os.Exit(1)
		}
		fmt.Println(string(b))
		return
	}
	fmt.Printf("sent %d messages in %.2f s: %.0f msgs/s (%d send errors)\n", res.Messages, res.SendSeconds, res.SendPerSec, res.SendErrors)
	if *consumers > 0 {
		fmt.Printf("received and acked %d in %.2f s: %.0f msgs/s\n", res.Consumed, res.ConsumeSeconds, res.ConsumePerSec)
	}
	if *pid > 0 {
		fmt.Printf("broker CPU %.2f s: %.1f µs per message\n", res.BrokerCPU, res.CPUPerMsgUs)
	}
}

func config(endpoint, group string) *rmq.Config {
	return &rmq.Config{Endpoint: endpoint, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

func run(endpoint, topic, group string, producers, consumers int, count int64, size int, batch int32, idle time.Duration, pid int) (*result, error) {
	var ps []rmq.Producer
	defer func() {
		for _, p := range ps {
			_ = p.GracefulStop()
		}
	}()
	for range producers {
		p, err := rmq.NewProducer(config(endpoint, ""), rmq.WithTopics(topic))
		if err != nil {
			return nil, err
		}
		if err := p.Start(); err != nil {
			return nil, fmt.Errorf("start a producer: %w", err)
		}
		ps = append(ps, p)
	}
	var scs []rmq.SimpleConsumer
	defer func() {
		for _, sc := range scs {
			_ = sc.GracefulStop()
		}
	}()
	for range consumers {
		sc, err := rmq.NewSimpleConsumer(config(endpoint, group), rmq.WithSimpleAwaitDuration(2*time.Second),
			rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
		if err != nil {
			return nil, err
		}
		if err := sc.Start(); err != nil {
			return nil, fmt.Errorf("start a simple consumer: %w", err)
		}
		scs = append(scs, sc)
	}
	body := []byte(strings.Repeat("x", size))
	cpu0, err := brokerCPU(pid)
	if err != nil {
		return nil, err
	}
	res := &result{Messages: count}
	var (
		next, sendErrs, consumed atomic.Int64
		lastArrival              atomic.Int64
		wg, cwg                  sync.WaitGroup
	)
	start := time.Now()
	lastArrival.Store(start.UnixNano())
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for _, sc := range scs {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			consume(ctx, sc, batch, &consumed, &lastArrival)
		}()
	}
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= count {
				msg := &rmq.Message{Topic: topic, Body: body}
				msg.SetTag("v5bench")
				if _, err := p.Send(context.Background(), msg); err != nil {
					sendErrs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	res.SendSeconds = time.Since(start).Seconds()
	res.SendErrors = sendErrs.Load()
	sent := count - res.SendErrors
	res.SendPerSec = float64(sent) / res.SendSeconds
	if consumers > 0 {
		for consumed.Load() < sent && time.Since(time.Unix(0, lastArrival.Load())) < idle {
			time.Sleep(50 * time.Millisecond)
		}
		stop()
		cwg.Wait()
		res.Consumed = consumed.Load()
		if res.Consumed > 0 {
			res.ConsumeSeconds = time.Unix(0, lastArrival.Load()).Sub(start).Seconds()
			res.ConsumePerSec = float64(res.Consumed) / res.ConsumeSeconds
		}
	}
	cpu1, err := brokerCPU(pid)
	if err != nil {
		return nil, err
	}
	if pid > 0 && sent > 0 {
		res.BrokerCPU = cpu1 - cpu0
		res.CPUPerMsgUs = res.BrokerCPU / float64(sent) * 1e6
	}
	if sent == 0 {
		return res, errors.New("every send failed")
	}
	if consumers > 0 && res.Consumed < sent {
		fmt.Fprintf(os.Stderr, "v5bench: %d of %d messages received and acked before %v without one\n", res.Consumed, sent, idle)
	}
	return res, nil
}

// consume receives and acknowledges until ctx ends; acks of a batch run
// concurrently.
func consume(ctx context.Context, sc rmq.SimpleConsumer, batch int32, consumed, last *atomic.Int64) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		mvs, err := sc.Receive(rctx, batch, 30*time.Second)
		cancel()
		if err != nil {
			var st *rmq.ErrRpcStatus
			if !errors.As(err, &st) || st.Code != int32(v2.Code_MESSAGE_NOT_FOUND) {
				time.Sleep(20 * time.Millisecond)
			}
			continue
		}
		var wg sync.WaitGroup
		for _, mv := range mvs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if sc.Ack(context.Background(), mv) == nil {
					consumed.Add(1)
				}
			}()
		}
		wg.Wait()
		last.Store(time.Now().UnixNano())
	}
}

// brokerCPU is the process's utime + stime in seconds (0 without a pid).
func brokerCPU(pid int) (float64, error) {
	if pid <= 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("broker CPU: %w", err)
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("broker CPU: short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("broker CPU: /proc/%d/stat: %q %q", pid, f[11], f[12])
	}
	return (ut + st) / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100
