package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
)

const (
	envOrderlyChild = "BOLIDE_ORDERLY_CHILD"
	envOrderlyNS    = "BOLIDE_ORDERLY_NS"
	envOrderlyTopic = "BOLIDE_ORDERLY_TOPIC"
)

// TestOrderlyCrashChild is the consumer that gets killed: it prints every
// message it has processed, in order, then keeps consuming until killed.
func TestOrderlyCrashChild(t *testing.T) {
	if os.Getenv(envOrderlyChild) != "1" {
		t.Skip("child process of TestOrderlyAcrossConsumerCrash")
	}
	ns := strings.Split(os.Getenv(envOrderlyNS), ",")
	c, err := NewPushConsumer("orderly-crash", fastConsumerOptions(fastShared(ns), WithConsumeFrom(ConsumeFromFirst))...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var mu sync.Mutex
	err = c.Subscribe(os.Getenv(envOrderlyTopic), "*", OrderlyListener(func(_ context.Context, msgs []*MessageExt) OrderlyResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			fmt.Fprintln(os.Stdout, string(m.Body))
		}
		time.Sleep(2 * time.Millisecond) // slow enough to be killed mid-stream
		return OrderlySuccess
	}))
	if err == nil {
		err = c.Start(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	select {} // until SIGKILL
}

// TestOrderlyAcrossConsumerCrash: an orderly consumer is killed (SIGKILL,
// no unlock, no commit) mid-stream; once its queue locks expire another
// consumer takes over. For every sharding key the messages are seen in
// order: the survivor starts at or before where the dead one stopped (it
// may repeat uncommitted ones) and never goes backwards.
func TestOrderlyAcrossConsumerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	c := cluster.Start(t, cluster.Options{BrokerGroups: 2, Broker: func(o *broker.Options) { o.LockExpiry = 2 * time.Second }})
	c.CreateTopic("orderly-crash", 4)
	ctx := context.Background()
	p, err := NewProducer("orderly-crash-pg", fastProducerOptions(c.NameServerAddrs())...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const keys, perKey = 8, 150
	for seq := 0; seq < perKey; seq++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("key%d", k)
			if _, err := p.Send(ctx, &Message{Topic: "orderly-crash", Body: []byte(fmt.Sprintf("%s:%d", key, seq))}, WithShardingKey(key)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrderlyCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envOrderlyChild+"=1", envOrderlyNS+"="+strings.Join(c.NameServerAddrs(), ","), envOrderlyTopic+"=orderly-crash")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var before []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		before = append(before, sc.Text())
		if len(before) == keys*perKey/3 {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	_, _ = io.Copy(io.Discard, out)
	_ = cmd.Wait()
	if len(before) < keys*perKey/3 {
		t.Fatalf("child consumed only %d messages", len(before))
	}
	// The survivor.
	var mu sync.Mutex
	var after []string
	cons, err := NewPushConsumer("orderly-crash", fastConsumerOptions(fastShared(c.NameServerAddrs()), WithConsumeFrom(ConsumeFromFirst))...)
	if err != nil {
		t.Fatal(err)
	}
	err = cons.Subscribe("orderly-crash", "*", OrderlyListener(func(_ context.Context, msgs []*MessageExt) OrderlyResult {
		mu.Lock()
		for _, m := range msgs {
			after = append(after, string(m.Body))
		}
		mu.Unlock()
		return OrderlySuccess
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	last := func(lines []string) map[string]int {
		m := make(map[string]int)
		for _, l := range lines {
			k, s, _ := strings.Cut(l, ":")
			n, _ := strconv.Atoi(s)
			m[k] = n
		}
		return m
	}
	if err := cluster.Poll(60*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		got := last(after)
		for k := 0; k < keys; k++ {
			if got[fmt.Sprintf("key%d", k)] != perKey-1 {
				return fmt.Errorf("survivor at %v", got)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	check := func(who string, lines []string, start map[string]int) {
		prev := make(map[string]int)
		for k, v := range start {
			prev[k] = v
		}
		for _, l := range lines {
			k, s, _ := strings.Cut(l, ":")
			n, _ := strconv.Atoi(s)
			if p, ok := prev[k]; ok && n <= p {
				t.Fatalf("%s: %s after %s:%d — out of order", who, l, k, p)
			}
			if p, ok := prev[k]; !ok && n != 0 || ok && n != p+1 {
				t.Fatalf("%s: %s after %s:%d — gap", who, l, k, prev[k])
			}
			prev[k] = n
		}
	}
	check("crashed consumer", before, nil)
	// The survivor restarts each key at the committed offset: at or before
	// one past where the dead consumer stopped.
	died := last(before)
	firstAfter := make(map[string]int)
	for _, l := range after {
		k, s, _ := strings.Cut(l, ":")
		if _, ok := firstAfter[k]; !ok {
			firstAfter[k], _ = strconv.Atoi(s)
		}
	}
	start := make(map[string]int)
	repeats := 0
	for k, f := range firstAfter {
		d, ok := died[k]
		if !ok {
			d = -1
		}
		if f > d+1 {
			t.Fatalf("%s: survivor started at %d, the dead consumer stopped at %d: messages skipped", k, f, d)
		}
		repeats += d + 1 - f
		start[k] = f - 1
	}
	check("survivor", after, start)
	t.Logf("crashed after %d messages; survivor repeated %d uncommitted ones and finished in order", len(before), repeats)
}
