// Command loopback-rtt measures this machine's own latency floor for the
// end-to-end benches: a client sends a message of --size bytes over TCP on
// loopback every 1/--rate seconds, a server in the same process echoes it,
// and each round trip is timed from the moment it was scheduled (as
// `bolide bench e2e` times its messages) to the end of the echo. A message
// through a broker makes at least two such trips (producer to broker,
// broker to consumer), so when this floor is high — a busy host, a vCPU
// descheduled — the end-to-end figures measured in the same minute are too.
//
// It prints one JSON object: the rate, the count and p50, p99, p99.9 and max
// in milliseconds.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"github.com/bolide-mq/bolide/internal/pace"
)

func main() {
	rate := flag.Int("rate", 10000, "round trips per second")
	duration := flag.Duration("duration", 10*time.Second, "how long to measure")
	size := flag.Int("size", 1024, "message size in bytes")
	flag.Parse()
	if *rate < 1 || *duration <= 0 || *size < 1 {
		fmt.Fprintln(os.Stderr, "loopback-rtt: --rate, --duration and --size must be positive")
		os.Exit(2)
	}
	lat, err := measure(context.Background(), *rate, *duration, *size)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loopback-rtt:", err)
		os.Exit(1)
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{
		"rate": *rate, "count": len(lat), "p50": q(0.5), "p99": q(0.99), "p999": q(0.999), "max": q(1),
	})
}

// measure runs the round trips and returns their times, in the order made.
func measure(ctx context.Context, rate int, d time.Duration, size int) ([]time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	echoErr := make(chan error, 1)
	go func() { echoErr <- echo(ln, size) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	buf := make([]byte, size)
	n := int(float64(rate) * d.Seconds())
	lat := make([]time.Duration, 0, n)
	per := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		sched := start.Add(time.Duration(i) * per)
		pace.SleepUntil(ctx, sched)
		if _, err := c.Write(buf); err != nil {
			return nil, fmt.Errorf("write: %w", err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		lat = append(lat, time.Since(sched))
	}
	_ = c.Close()
	if err := <-echoErr; err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return lat, nil
}

// echo answers the one connection it accepts, message by message, until it
// closes.
func echo(ln net.Listener, size int) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, size)
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if _, err := c.Write(buf); err != nil {
			return err
		}
	}
}
