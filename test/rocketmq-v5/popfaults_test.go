package rocketmqv5

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/bolide-mq/bolide/internal/proccluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// TestPopUnderFaults: RMQV5_POP_N messages (default 3000; make pop-faults:
// 100 000), 1 % of them (at least 100) in 20 message groups on a FIFO
// topic read by a FIFO group, the rest on a normal topic; 4 v5 simple
// consumers (2 of the normal topic's group, 2 of the FIFO group) ack 90 %
// of what they receive and let 10 % run out of invisibility once; the
// broker is killed with -9 and started again three times meanwhile (at a
// quarter, half and three quarters of the acks), down 2 s each time. In
// the end every message is acknowledged, none twice (no delivery after an
// accepted ack), none lost; the groups' committed offsets reach the
// queues' ends (the server's view); no message of a message group is
// delivered before its predecessor was acknowledged. Redeliveries are
// counted and printed.
//
// The simple consumer's Ack ignores the status the broker answers, so the
// consumers acknowledge with the generated AckMessage stub on the message's
// broker instead and record each entry's status: OK, refused (the code),
// or unknown (the call failed: the broker died meanwhile).
func TestPopUnderFaults(t *testing.T) {
	n := 3000
	if s := os.Getenv("RMQV5_POP_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 100 {
			t.Fatalf("RMQV5_POP_N=%q: want a number ≥ 100", s)
		}
		n = v
	}
	nFIFO := max(n/100, 100)
	const (
		msgGroups = 20
		consumers = 4
		invisible = 10 * time.Second
		kills     = 3
		downFor   = 2 * time.Second
	)
	c := harness.Private(t, proccluster.OneGroup)
	normalTopic := newTopic(t, c, "popf", "NORMAL", 8)
	fifoTopic := newTopic(t, c, "popf-fifo", "FIFO", 4)
	normalGroup := uniq("popfg")
	fifoGroup := newGroup(t, c, "popf-fifog", "--fifo")
	needRPCs(t, c, "QueryRoute", "Telemetry", "SendMessage", "ReceiveMessage", "AckMessage")

	st := &popState{
		msgs:      map[string]popMsg{},
		ackOK:     map[string]int{},
		ackUnk:    map[string]int{},
		refused:   map[string]int{},
		delivered: map[string]int{},
		lastAcked: map[string]int{},
		ackSent:   map[string]int{},
	}

	// Send: 16 v5 producers, FIFO messages of a group from one producer in
	// order.
	p := newProducer(t, c, rmq.WithTopics(normalTopic, fifoTopic))
	began := time.Now()
	var (
		wg      sync.WaitGroup
		sendErr atomic.Value
	)
	record := func(id string, m popMsg) {
		st.mu.Lock()
		st.msgs[id] = m
		st.mu.Unlock()
	}
	send := func(msg *rmq.Message, m popMsg) {
		for attempt := 0; ; attempt++ {
			r, err := p.Send(context.Background(), msg)
			if err == nil {
				record(r[0].MessageID, m)
				return
			}
			if attempt == 5 {
				sendErr.Store(err)
				return
			}
			time.Sleep(time.Second)
		}
	}
	for g := range msgGroups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; seq*msgGroups+g < nFIFO; seq++ {
				m := popMsg{topic: fifoTopic, group: fmt.Sprintf("mg-%d", g), seq: seq}
				msg := &rmq.Message{Topic: fifoTopic, Body: []byte(fmt.Sprintf("%s/%d", m.group, seq))}
				msg.SetMessageGroup(m.group)
				msg.AddProperty("seq", strconv.Itoa(seq))
				send(msg, m)
			}
		}()
	}
	var next atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n-nFIFO {
					return
				}
				msg := &rmq.Message{Topic: normalTopic, Body: []byte(fmt.Sprintf("m-%d", i))}
				msg.SetTag("popf")
				send(msg, popMsg{topic: normalTopic, seq: -1})
			}
		}()
	}
	wg.Wait()
	if err := sendErr.Load(); err != nil {
		t.Fatalf("send: %v", err)
	}
	if len(st.msgs) != n {
		t.Fatalf("%d distinct message ids for %d messages", len(st.msgs), n)
	}
	t.Logf("sent %d messages (%d FIFO in %d message groups) in %v", n, nFIFO, msgGroups, time.Since(began).Round(time.Millisecond))

	// Consume.
	conn, err := grpc.NewClient(c.Brokers[0].Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	acker := v2.NewMessagingServiceClient(conn)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	began = time.Now()
	var cwg sync.WaitGroup
	for i := range consumers {
		topic, group, fifo := normalTopic, normalGroup, false
		if i >= consumers/2 {
			topic, group, fifo = fifoTopic, fifoGroup, true
		}
		sc := newSimpleConsumer(t, c, group, topic, "*", 2*time.Second)
		w := &popWorker{st: st, sc: sc, acker: acker, topic: topic, group: group, fifo: fifo,
			invisible: invisible, clientID: fmt.Sprintf("popf-acker-%d", i)}
		cwg.Add(1)
		go func() { defer cwg.Done(); w.run(ctx) }()
	}

	// Kill the broker at a quarter, half and three quarters of the acks.
	var killLog []string
	for k := 1; k <= kills; k++ {
		target := n * k / (kills + 1)
		if !waitFor(time.Duration(n/50+300)*time.Second, func() bool { return st.acked() >= target }) {
			stop()
			cwg.Wait()
			t.Fatalf("before kill %d: %d of %d acked; %s", k, st.acked(), n, st.report())
		}
		c.Brokers[0].Proc.Kill()
		downAt := time.Now()
		time.Sleep(downFor) // the consumers' calls fail meanwhile
		if err := c.StartBroker(0); err != nil {
			stop()
			cwg.Wait()
			t.Fatal(err)
		}
		killLog = append(killLog, fmt.Sprintf("kill %d at %d acks, down %v", k, target, time.Since(downAt).Round(100*time.Millisecond)))
	}
	done := waitFor(time.Duration(n/50+600)*time.Second, func() bool { return st.complete() })
	stop()
	cwg.Wait()
	t.Logf("consumed in %v; %s", time.Since(began).Round(time.Millisecond), strings.Join(killLog, "; "))
	t.Logf("%s", st.report())
	if !done {
		t.Fatalf("not every message acknowledged: %s", st.missing(20))
	}
	// The server's view: the committed offsets (POP's acked low
	// watermark) reach the ends of the queues, and nothing comes again.
	waitAcked(t, c, normalGroup, normalTopic, 60*time.Second)
	waitAcked(t, c, fifoGroup, fifoTopic, 60*time.Second)
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.violations) > 0 {
		t.Errorf("%d violations, first %d:\n%s", len(st.violations), min(20, len(st.violations)),
			strings.Join(st.violations[:min(20, len(st.violations))], "\n"))
	}
	for id, k := range st.ackOK {
		if k > 1 {
			t.Errorf("%s acknowledged %d times", id, k)
		}
	}
}

// popMsg is a sent message: its topic, and for a FIFO one its message
// group and sequence number in it.
type popMsg struct {
	topic, group string
	seq          int
}

// popState is the consumers' shared accounting.
type popState struct {
	mu        sync.Mutex
	msgs      map[string]popMsg
	ackOK     map[string]int // accepted acks by message id
	ackUnk    map[string]int // acks whose call failed
	refused   map[string]int // refused acks by status code name
	delivered map[string]int // deliveries by message id
	// FIFO: per message group the highest sequence number acknowledged
	// (accepted), and the highest whose ack was sent (it may have been
	// applied before the answer came or the call failed).
	lastAcked map[string]int
	ackSent   map[string]int

	deliveries, expected, redeliveries, afterAck int
	violations                                   []string
}

func (s *popState) acked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ackOK)
}

// complete: every message acknowledged with an accepted ack, or its ack
// call failed and it never came again (the server's offsets decide).
func (s *popState) complete() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.msgs {
		if s.ackOK[id] == 0 && s.ackUnk[id] == 0 {
			return false
		}
	}
	return true
}

func (s *popState) missing(limit int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, m := range s.msgs {
		if s.ackOK[id] == 0 && s.ackUnk[id] == 0 {
			ids = append(ids, fmt.Sprintf("%s (%s %s/%d, delivered %d times)", id, m.topic, m.group, m.seq, s.delivered[id]))
		}
	}
	sort.Strings(ids)
	return fmt.Sprintf("%d unacknowledged: %s", len(ids), strings.Join(ids[:min(limit, len(ids))], ", "))
}

func (s *popState) report() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	unk := 0
	for id := range s.ackUnk {
		if s.ackOK[id] == 0 {
			unk++
		}
	}
	return fmt.Sprintf("%d messages, %d deliveries, %d redeliveries (%d of them after a let-expire, %d after an accepted ack), "+
		"%d acknowledged with an accepted ack, %d only by an ack whose call failed, refused acks %v, %d violations",
		len(s.msgs), s.deliveries, s.redeliveries, s.expected, s.afterAck, len(s.ackOK), unk, s.refused, len(s.violations))
}

// letExpire reports whether a message is one of the 10 % left to run out
// of invisibility on its first delivery.
func letExpire(id string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return h.Sum32()%10 == 0
}

// popWorker is one consumer.
type popWorker struct {
	st           *popState
	sc           rmq.SimpleConsumer
	acker        v2.MessagingServiceClient
	topic, group string
	fifo         bool
	invisible    time.Duration
	clientID     string
}

func (w *popWorker) run(ctx context.Context) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		mvs, err := w.sc.Receive(rctx, 32, w.invisible)
		cancel()
		if err != nil {
			if !isNotFound(err) && ctx.Err() == nil {
				time.Sleep(200 * time.Millisecond)
			}
			continue
		}
		w.handle(mvs)
	}
}

// handle decides, per message of a batch, to ack it or let it expire, and
// acks in one call.
func (w *popWorker) handle(mvs []*rmq.MessageView) {
	s := w.st
	var ack []*rmq.MessageView
	s.mu.Lock()
	skipRest := false
	for _, mv := range mvs {
		id := mv.GetMessageId()
		m, ok := s.msgs[id]
		if !ok {
			s.violations = append(s.violations, fmt.Sprintf("received %s, never sent", id))
			continue
		}
		s.deliveries++
		s.delivered[id]++
		if mv.GetDeliveryAttempt() > 1 || s.delivered[id] > 1 {
			s.redeliveries++
			if s.ackOK[id] > 0 {
				s.afterAck++
				s.violations = append(s.violations, fmt.Sprintf("%s (%s/%d) delivered again (attempt %d) after an accepted ack",
					id, m.group, m.seq, mv.GetDeliveryAttempt()))
			}
		}
		if mv.GetDeliveryAttempt() == 2 && letExpire(id) {
			s.expected++
		}
		if skipRest {
			continue
		}
		if front := s.front(m.group); w.fifo && m.seq > front+1 && !inBatchBefore(ack, s, m) {
			s.violations = append(s.violations, fmt.Sprintf("%s: message %d delivered while %d was the last acknowledged",
				m.group, m.seq, front))
		}
		if mv.GetDeliveryAttempt() == 1 && letExpire(id) {
			if w.fifo {
				skipRest = true // the rest of the batch waits behind it
			}
			continue
		}
		ack = append(ack, mv)
		if w.fifo {
			s.ackSent[m.group] = max(s.ackSent[m.group], m.seq)
		}
	}
	s.mu.Unlock()
	if len(ack) == 0 {
		return
	}
	req := &v2.AckMessageRequest{Group: &v2.Resource{Name: w.group}, Topic: &v2.Resource{Name: w.topic}}
	for _, mv := range ack {
		req.Entries = append(req.Entries, &v2.AckMessageEntry{MessageId: mv.GetMessageId(), ReceiptHandle: mv.ReceiptHandle})
	}
	actx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(),
		"x-mq-client-id", w.clientID, "x-mq-language", "GO", "x-mq-protocol", "v2", "x-mq-client-version", "5.1.4",
		"x-mq-namespace", "", "x-mq-request-id", fmt.Sprint(time.Now().UnixNano())), 5*time.Second)
	resp, err := w.acker.AckMessage(actx, req)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	status := map[string]v2.Code{}
	if err == nil {
		for _, e := range resp.GetEntries() {
			status[e.GetMessageId()] = e.GetStatus().GetCode()
		}
	}
	for _, mv := range ack {
		id := mv.GetMessageId()
		m := s.msgs[id]
		code, ok := status[id]
		if err == nil && !ok {
			code = resp.GetStatus().GetCode()
		}
		switch {
		case err != nil:
			s.ackUnk[id]++
		case code == v2.Code_OK:
			s.ackOK[id]++
			if w.fifo {
				if last, seen := s.lastAcked[m.group]; !seen || m.seq > last {
					s.lastAcked[m.group] = m.seq
				}
			}
		default:
			s.refused[code.String()]++
		}
	}
}

// front is the highest sequence number of message group g acknowledged
// or being acknowledged (-1: none): a FIFO queue may hand out the next.
func (s *popState) front(g string) int {
	f := -1
	if v, ok := s.lastAcked[g]; ok {
		f = v
	}
	if v, ok := s.ackSent[g]; ok {
		f = max(f, v)
	}
	return f
}

// inBatchBefore reports whether the predecessor of m is among the
// messages to ack ahead of it in the same batch.
func inBatchBefore(ack []*rmq.MessageView, s *popState, m popMsg) bool {
	for _, mv := range ack {
		if p := s.msgs[mv.GetMessageId()]; p.group == m.group && p.seq == m.seq-1 {
			return true
		}
	}
	return false
}
