// Command rmqbench sends messages to a Bolide (or RocketMQ) cluster with
// Apache RocketMQ's Go client over the remoting protocol, from several
// goroutines, and prints the throughput and send latencies. It is the
// remoting counterpart of `bolide bench`, to compare the broker's CPU per
// message on the two paths.
//
//	rmqbench --namesrv 127.0.0.1:9876 --topic bench --count 200000 --goroutines 16 --size 1024
//
// The topic must exist (`bolide topic create bench`). The NameServer
// address must be an IP literal: the RocketMQ client refuses host names.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rmqbench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		namesrv    = flag.String("namesrv", "127.0.0.1:9876", "NameServer addresses (ip:port), separated by ';'")
		topic      = flag.String("topic", "bench", "topic to send to (must exist)")
		count      = flag.Int("count", 100000, "messages to send in all")
		goroutines = flag.Int("goroutines", 16, "concurrent senders")
		size       = flag.Int("size", 1024, "body size in bytes")
		group      = flag.String("group", "rmqbench", "producer group")
		timeout    = flag.Duration("timeout", 3*time.Second, "send timeout")
		warmup     = flag.Int("warmup", 1000, "messages sent (and not counted) before the measurement")
		logLevel   = flag.String("log-level", "error", "the RocketMQ client's log level")
	)
	flag.Parse()
	if *count <= 0 || *goroutines <= 0 || *size < 0 {
		return errors.New("count and goroutines must be positive, size not negative")
	}
	rlog.SetLogLevel(*logLevel)
	p, err := rocketmq.NewProducer(
		producer.WithNameServer(strings.Split(*namesrv, ";")),
		producer.WithGroupName(*group),
		producer.WithInstanceName(fmt.Sprintf("rmqbench-%d", os.Getpid())),
		producer.WithSendMsgTimeout(*timeout),
		producer.WithRetry(2),
		// 1 KiB bodies are not compressed anyway; keep larger ones as they
		// are too, so that the broker's work per byte is what is measured.
		producer.WithCompressMsgBodyOverHowmuch(1<<30),
	)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer func() { _ = p.Shutdown() }()

	body := make([]byte, *size)
	_, _ = rand.Read(body)
	send := func() (time.Duration, error) {
		m := primitive.NewMessage(*topic, body)
		start := time.Now()
		res, err := p.SendSync(context.Background(), m)
		if err == nil && res.Status != primitive.SendOK {
			err = fmt.Errorf("send status %d", res.Status)
		}
		return time.Since(start), err
	}
	for i := 0; i < *warmup; i++ {
		if _, err := send(); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}

	var (
		next     atomic.Int64
		failed   atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
		lats     = make([][]time.Duration, *goroutines)
	)
	start := time.Now()
	for g := range *goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(*count) {
				d, err := send()
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				lats[g] = append(lats[g], d)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lats...)
	slices.Sort(all)
	pct := func(q float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(q*float64(len(all))))]
	}
	ok := len(all)
	fmt.Printf("sent %d messages of %d bytes from %d goroutines in %v: %.0f msgs/s, %.1f MiB/s; latency p50 %v p99 %v max %v; %d failed\n",
		ok, *size, *goroutines, elapsed.Round(time.Millisecond), float64(ok)/elapsed.Seconds(),
		float64(ok)*float64(*size)/elapsed.Seconds()/(1<<20), pct(0.50), pct(0.99), pct(1), failed.Load())
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("%d sends failed, the first: %w", failed.Load(), err)
	}
	return nil
}
