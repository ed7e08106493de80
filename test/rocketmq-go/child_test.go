package rocketmqgo_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/bolide-mq/bolide/client"
	"go.uber.org/zap"
)

// Consumers in child processes, so that a test can kill one with SIGKILL:
// the test binary started again with RMQGO_CHILD=<kind> ("rmq": a RocketMQ
// push consumer, "sdk": a Bolide SDK push consumer). The child appends one
// line per consumed message to the file RMQGO_OUT before its listener
// returns success, and shuts its consumer down cleanly on SIGTERM.

const childEnv = "RMQGO_CHILD"

// sdkCommitInterval is how often the SDK consumers of the crash tests
// commit; the RocketMQ client persists every 5 s (first 10 s after start).
const (
	sdkCommitInterval = time.Second
	rmqCommitInterval = 5 * time.Second
)

// record is one consumed message, as a child or the parent saw it.
type record struct {
	id     string // MsgId (UNIQ_KEY)
	queue  string // broker/queue
	offset int64
	body   string
	recons int32
	at     time.Time
	by     string // member and incarnation, e.g. "child#1"
}

func (r record) line() string {
	return fmt.Sprintf("%s\t%s\t%d\t%s\t%d\t%d\n", r.id, r.queue, r.offset, r.body, r.recons, r.at.UnixNano())
}

func parseRecord(s, by string) (record, bool) {
	f := strings.Split(s, "\t")
	if len(f) != 6 {
		return record{}, false
	}
	off, err1 := strconv.ParseInt(f[2], 10, 64)
	rc, err2 := strconv.Atoi(f[4])
	ns, err3 := strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return record{}, false
	}
	return record{id: f[0], queue: f[1], offset: off, body: f[3], recons: int32(rc), at: time.Unix(0, ns), by: by}, true
}

// recorder appends records to a file, one write per record.
type recorder struct {
	mu sync.Mutex
	f  *os.File
}

func (r *recorder) write(rec record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.f.WriteString(rec.line())
}

// runChild is the child process's main.
func runChild(kind string) int {
	ns, topic, group, out := os.Getenv("RMQGO_NS"), os.Getenv("RMQGO_TOPIC"), os.Getenv("RMQGO_GROUP"), os.Getenv("RMQGO_OUT")
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer f.Close()
	rec := &recorder{f: f}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch kind {
	case "rmq":
		opts := []consumer.Option{
			consumer.WithNameServer([]string{ns}),
			consumer.WithGroupName(group),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		}
		if inst := os.Getenv("RMQGO_INSTANCE"); inst != "" {
			opts = append(opts, consumer.WithInstance(inst))
		}
		pc, err := rocketmq.NewPushConsumer(opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		err = pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				rec.write(rmqRecord(m, ""))
			}
			return consumer.ConsumeSuccess, nil
		})
		if err == nil {
			err = pc.Start()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		fmt.Fprintln(os.Stderr, "child: rocketmq consumer started")
		<-ctx.Done()
		_ = pc.Shutdown()
	case "sdk":
		opts := []client.ConsumerOption{
			client.WithNameServers(ns), client.WithLogger(zap.NewNop()),
			client.WithConsumeFrom(client.ConsumeFromFirst), client.WithCommitInterval(sdkCommitInterval),
		}
		if inst := os.Getenv("RMQGO_INSTANCE"); inst != "" {
			opts = append(opts, client.WithInstanceName(inst))
		}
		pc, err := client.NewPushConsumer(group, opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		err = pc.Subscribe(topic, "*", client.ConcurrentListener(func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				rec.write(sdkRecord(m, ""))
			}
			return client.ConsumeSuccess
		}))
		if err == nil {
			err = pc.Start(context.Background())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		fmt.Fprintln(os.Stderr, "child: sdk consumer started")
		<-ctx.Done()
		_ = pc.Close()
	default:
		fmt.Fprintln(os.Stderr, "child: unknown kind", kind)
		return 2
	}
	fmt.Fprintln(os.Stderr, "child: stopped")
	return 0
}

func rmqRecord(m *primitive.MessageExt, by string) record {
	q := ""
	if m.Queue != nil {
		q = fmt.Sprintf("%s/%d", m.Queue.BrokerName, m.Queue.QueueId)
	}
	return record{id: m.MsgId, queue: q, offset: m.QueueOffset, body: string(m.Body), recons: m.ReconsumeTimes, at: time.Now(), by: by}
}

func sdkRecord(m *client.MessageExt, by string) record {
	return record{id: sdkMsgID(m), queue: fmt.Sprintf("%s/%d", m.BrokerName, m.QueueID), offset: m.QueueOffset,
		body: string(m.Body), recons: m.ReconsumeTimes, at: time.Now(), by: by}
}

// child is a consumer process; each start is a new incarnation with its
// own records file.
type child struct {
	name, kind string
	env        []string
	dir        string
	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
	inc        int
	started    time.Time
	pid        int
}

// newChild prepares a child consumer of group on topic; start runs it.
func newChild(t testing.TB, c *cluster, name, kind, topic, group, instance string) *child {
	ch := &child{name: name, kind: kind, dir: t.TempDir(),
		env: []string{childEnv + "=" + kind, "RMQGO_NS=" + c.NameSrv, "RMQGO_TOPIC=" + topic, "RMQGO_GROUP=" + group,
			"RMQGO_INSTANCE=" + instance}}
	t.Cleanup(func() {
		ch.kill()
		if t.Failed() {
			for i := 1; i <= ch.inc; i++ {
				b, _ := os.ReadFile(ch.logPath(i))
				t.Logf("%s#%d log:\n%s", name, i, b)
			}
		}
	})
	return ch
}

func (ch *child) outPath(inc int) string { return filepath.Join(ch.dir, fmt.Sprintf("out.%d", inc)) }
func (ch *child) logPath(inc int) string { return filepath.Join(ch.dir, fmt.Sprintf("log.%d", inc)) }

// start runs a new incarnation.
func (ch *child) start(t testing.TB) {
	t.Helper()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.inc++
	logf, err := os.Create(ch.logPath(ch.inc))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), ch.env...), "RMQGO_OUT="+ch.outPath(ch.inc))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", ch.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	ch.cmd, ch.done, ch.started, ch.pid = cmd, done, time.Now(), cmd.Process.Pid
}

// kill sends SIGKILL to the running incarnation and waits for it.
func (ch *child) kill() {
	ch.signal(syscall.SIGKILL, time.Minute)
}

// stop sends SIGTERM and waits up to 20 s (then kills).
func (ch *child) stop() {
	if !ch.signal(syscall.SIGTERM, 20*time.Second) {
		ch.kill()
	}
}

func (ch *child) signal(sig syscall.Signal, wait time.Duration) bool {
	ch.mu.Lock()
	cmd, done := ch.cmd, ch.done
	ch.mu.Unlock()
	if cmd == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// exited reports whether the running incarnation has ended.
func (ch *child) exited() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.done == nil {
		return true
	}
	select {
	case <-ch.done:
		return true
	default:
		return false
	}
}

// records returns what every incarnation consumed so far ("name#n").
func (ch *child) records() []record {
	ch.mu.Lock()
	n := ch.inc
	ch.mu.Unlock()
	var out []record
	for i := 1; i <= n; i++ {
		f, err := os.Open(ch.outPath(i))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		by := fmt.Sprintf("%s#%d", ch.name, i)
		for sc.Scan() {
			if r, ok := parseRecord(sc.Text(), by); ok {
				out = append(out, r)
			}
		}
		_ = f.Close()
	}
	return out
}

// memberRecords collects the records of an in-process member.
type memberRecords struct {
	mu   sync.Mutex
	list []record
}

func (m *memberRecords) add(r record) {
	m.mu.Lock()
	m.list = append(m.list, r)
	m.mu.Unlock()
}

func (m *memberRecords) all() []record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]record(nil), m.list...)
}
