package remoting_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/server"
	"github.com/bolide-mq/bolide/broker/store"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/internal/testutil"
	"github.com/bolide-mq/bolide/message"
)

// consumerBroker is a broker serving every front end on its port, and a
// RocketMQ-style connection to it.
type consumerBroker struct {
	b    *broker.Broker
	conn *rmq.Conn
	addr string
}

// startConsumerBroker starts a broker on 127.0.0.1:0 without NameServers
// and connects to it.
func startConsumerBroker(t *testing.T) *consumerBroker {
	t.Helper()
	srv := startBroker(t)
	return &consumerBroker{b: srv.Broker, conn: dialBroker(t, srv.Addr(), nil), addr: srv.Addr()}
}

func (cb *consumerBroker) createTopic(t *testing.T, name string, queues int32) {
	t.Helper()
	if err := cb.b.CreateTopic(broker.TopicConfig{Name: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
}

// send stores one message with the core and returns where it went.
func (cb *consumerBroker) send(t *testing.T, topic string, q int32, body, tag string, props ...string) store.PutResult {
	t.Helper()
	m := &message.Ext{Message: message.Message{Topic: topic, Body: []byte(body), Flag: 7}, QueueID: q,
		BornTimestamp: time.Now().UnixMilli(), BornHost: netip.MustParseAddrPort("10.0.0.5:50000")}
	if tag != "" {
		m.SetProperty(message.PropertyTags, tag)
	}
	for i := 0; i+1 < len(props); i += 2 {
		m.SetProperty(props[i], props[i+1])
	}
	res, err := cb.b.Send(context.Background(), []*message.Ext{m})
	if err != nil {
		t.Fatalf("send to %s/%d: %v", topic, q, err)
	}
	return res[0]
}

// waitQueue waits until dispatch has made n messages of a queue readable.
func (cb *consumerBroker) waitQueue(t *testing.T, topic string, q int32, n int64) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, fmt.Sprintf("%s/%d to hold %d messages", topic, q, n), func() error {
		if _, maxOff := cb.b.Store().QueueOffsets(topic, q); maxOff < n {
			return fmt.Errorf("max offset %d", maxOff)
		}
		return nil
	})
}

// invoke sends a request on the test's connection and returns its answer.
func (cb *consumerBroker) invoke(t *testing.T, code int32, ext map[string]string, body []byte) *rmq.Command {
	t.Helper()
	return invoke(t, cb.conn, code, ext, body)
}

// pullExt is a PULL_MESSAGE header as RocketMQ's Go push consumer builds
// it (sysFlag 2, no subscription); fields may be overridden in pairs.
func pullExt(group, topic string, q int32, offset int64, kv ...string) map[string]string {
	ext := map[string]string{"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(q)),
		"queueOffset": strconv.FormatInt(offset, 10), "maxMsgNums": "32", "sysFlag": "6", "commitOffset": "-1",
		"suspendTimeoutMillis": "20000", "subscription": "*", "subVersion": "0", "expressionType": "TAG", "bname": "broker-a"}
	for i := 0; i+1 < len(kv); i += 2 {
		ext[kv[i]] = kv[i+1]
	}
	return ext
}

// pulledMsg is a message as RocketMQ's clients decode a pull body.
type pulledMsg struct {
	storeSize, queueID, flag, sysFlag, reconsume int32
	queueOffset, physOffset, bornTS, storeTS     int64
	bornHost, storeHost                          netip.AddrPort
	body                                         []byte
	topic                                        string
	props                                        map[string]string
}

// decodePullBody decodes a pull body strictly sequentially, as the Go
// client's DecodeMessage does (V1 layout: one-byte topic length, int16
// properties length), and checks every TOTALSIZE against what it read.
func decodePullBody(t *testing.T, body []byte) []pulledMsg {
	t.Helper()
	be := binary.BigEndian
	var out []pulledMsg
	for p := 0; p < len(body); {
		start := p
		take := func(n int) []byte {
			if p+n > len(body) {
				t.Fatalf("body ends inside message %d at byte %d (+%d of %d)", len(out), p, n, len(body))
			}
			b := body[p : p+n]
			p += n
			return b
		}
		host := func(v6 bool) netip.AddrPort {
			n := 4
			if v6 {
				n = 16
			}
			ip, _ := netip.AddrFromSlice(take(n))
			return netip.AddrPortFrom(ip, uint16(be.Uint32(take(4))))
		}
		var m pulledMsg
		m.storeSize = int32(be.Uint32(take(4)))
		if magic := be.Uint32(take(4)); magic != message.MagicV1 {
			t.Fatalf("message %d: magic %#x, want V1", len(out), magic)
		}
		take(4) // BODYCRC
		m.queueID = int32(be.Uint32(take(4)))
		m.flag = int32(be.Uint32(take(4)))
		m.queueOffset = int64(be.Uint64(take(8)))
		m.physOffset = int64(be.Uint64(take(8)))
		m.sysFlag = int32(be.Uint32(take(4)))
		m.bornTS = int64(be.Uint64(take(8)))
		m.bornHost = host(m.sysFlag&0x10 != 0)
		m.storeTS = int64(be.Uint64(take(8)))
		m.storeHost = host(m.sysFlag&0x20 != 0)
		m.reconsume = int32(be.Uint32(take(4)))
		take(8) // PREPAREDTRANSACTIONOFFSET
		m.body = take(int(be.Uint32(take(4))))
		m.topic = string(take(int(take(1)[0])))
		props := take(int(int16(be.Uint16(take(2)))))
		m.props = map[string]string{}
		for _, kv := range strings.Split(string(props), "\x02") {
			if k, v, ok := strings.Cut(kv, "\x01"); ok {
				m.props[k] = v
			}
		}
		if int(m.storeSize) != p-start {
			t.Fatalf("message %d: TOTALSIZE %d, read %d bytes", len(out), m.storeSize, p-start)
		}
		out = append(out, m)
	}
	return out
}

// checkPullExt checks the four offset fields every pull answer carries.
func checkPullExt(t *testing.T, resp *rmq.Command, next, minOff, maxOff int64) {
	t.Helper()
	want := map[string]int64{"nextBeginOffset": next, "minOffset": minOff, "maxOffset": maxOff, "suggestWhichBrokerId": 0}
	for k, v := range want {
		got, err := resp.Int64(k)
		if err != nil || got != v {
			t.Errorf("code %d (%s): %s = %q, want %d", resp.Code, resp.Remark, k, resp.String(k), v)
		}
	}
}

func TestPullFoundBodyAsClientsDecodeIt(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "TopicA", 2)
	var sent []store.PutResult
	for i := 0; i < 5; i++ {
		sent = append(sent, cb.send(t, "TopicA", 1, fmt.Sprint("body-", i), fmt.Sprint("Tag", i%2),
			message.PropertyKeys, fmt.Sprint("k", i), message.PropertyUniqueKey, fmt.Sprintf("UNIQ%02d", i), "custom", "v"))
	}
	cb.waitQueue(t, "TopicA", 1, 5)
	resp := cb.invoke(t, rmq.PullMessage, pullExt("CG1", "TopicA", 1, 1), nil)
	if resp.Code != rmq.Success || !resp.IsResponse() {
		t.Fatalf("pull: code %d flag %d %s", resp.Code, resp.Flag, resp.Remark)
	}
	checkPullExt(t, resp, 5, 0, 5)
	msgs := decodePullBody(t, resp.Body)
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4 (offsets 1..4)", len(msgs))
	}
	storeHost := netip.MustParseAddrPort(cb.b.Addr())
	for i, m := range msgs {
		n := i + 1
		if m.queueOffset != int64(n) || m.physOffset != sent[n].PhysicalOffset || m.queueID != 1 || m.topic != "TopicA" {
			t.Errorf("message %d: queue %d offset %d phys %d topic %q; sent at phys %d", n, m.queueID, m.queueOffset, m.physOffset, m.topic, sent[n].PhysicalOffset)
		}
		if string(m.body) != fmt.Sprint("body-", n) || m.flag != 7 {
			t.Errorf("message %d: body %q flag %d", n, m.body, m.flag)
		}
		if m.props[message.PropertyTags] != fmt.Sprint("Tag", n%2) || m.props[message.PropertyKeys] != fmt.Sprint("k", n) ||
			m.props[message.PropertyUniqueKey] != fmt.Sprintf("UNIQ%02d", n) || m.props["custom"] != "v" {
			t.Errorf("message %d: properties %v", n, m.props)
		}
		// STOREHOST is the broker's address, so that the offset id the
		// client computes is the one the send returned.
		if m.storeHost != storeHost || m.bornHost != netip.MustParseAddrPort("10.0.0.5:50000") {
			t.Errorf("message %d: store host %s (broker %s), born host %s", n, m.storeHost, storeHost, m.bornHost)
		}
		if id := message.OffsetMsgID(m.storeHost, m.physOffset); id != sent[n].MsgID {
			t.Errorf("message %d: offset id %s, the send returned %s", n, id, sent[n].MsgID)
		}
		if m.storeTS < m.bornTS || m.storeTS > time.Now().UnixMilli() {
			t.Errorf("message %d: store time %d, born %d", n, m.storeTS, m.bornTS)
		}
	}
}

func TestPullMaxMsgNumsZeroTakesOne(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	for i := 0; i < 3; i++ {
		cb.send(t, "T", 0, "m", "")
	}
	cb.waitQueue(t, "T", 0, 3)
	// The Go pull consumer's Poll sends maxMsgNums 0 with sysFlag 6.
	resp := cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 0, "maxMsgNums", "0", "sysFlag", "6", "subscription", "*"), nil)
	if resp.Code != rmq.Success {
		t.Fatalf("pull: %d %s", resp.Code, resp.Remark)
	}
	if msgs := decodePullBody(t, resp.Body); len(msgs) != 1 || msgs[0].queueOffset != 0 {
		t.Fatalf("maxMsgNums 0 gave %d messages", len(msgs))
	}
	checkPullExt(t, resp, 1, 0, 3)
	// maxMsgNums 2 takes two.
	resp = cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 1, "maxMsgNums", "2"), nil)
	if msgs := decodePullBody(t, resp.Body); len(msgs) != 2 {
		t.Fatalf("maxMsgNums 2 gave %d messages", len(msgs))
	}
	checkPullExt(t, resp, 3, 0, 3)
}

func TestPullLongPollWakesOnArrival(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	cb.send(t, "T", 0, "first", "")
	cb.waitQueue(t, "T", 0, 1)
	type answer struct {
		resp *rmq.Command
		took time.Duration
	}
	got := make(chan answer, 1)
	start := time.Now()
	go func() {
		resp, err := cb.conn.Invoke(context.Background(), rmq.NewRequest(rmq.PullMessage, pullExt("CG", "T", 0, 1, "suspendTimeoutMillis", "15000"), nil))
		if err != nil {
			resp = &rmq.Command{Code: -1, Remark: err.Error()}
		}
		got <- answer{resp, time.Since(start)}
	}()
	select {
	case a := <-got:
		t.Fatalf("a pull at the queue's end was answered at once: %d %s", a.resp.Code, a.resp.Remark)
	case <-time.After(300 * time.Millisecond):
	}
	// Other requests on the same connection are served meanwhile.
	if resp := cb.invoke(t, rmq.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil); resp.String("offset") != "1" {
		t.Fatalf("max offset while a pull is held: %d %v", resp.Code, resp.Ext)
	}
	cb.send(t, "T", 0, "second", "")
	a := <-got
	if a.resp.Code != rmq.Success {
		t.Fatalf("held pull: %d %s", a.resp.Code, a.resp.Remark)
	}
	if a.took > 10*time.Second {
		t.Fatalf("the held pull took %v: not woken by the arrival", a.took)
	}
	msgs := decodePullBody(t, a.resp.Body)
	if len(msgs) != 1 || string(msgs[0].body) != "second" || msgs[0].queueOffset != 1 {
		t.Fatalf("held pull got %+v", msgs)
	}
	checkPullExt(t, a.resp, 2, 0, 2)
}

// TestPullsAtTheEndAreParked: long-polled pulls of a queue that holds
// nothing past their offset wait parked in the core, with no goroutine of
// the broker's each; one arrival answers them all, long before their hold
// ends, and a closing connection ends its parked pulls.
func TestPullsAtTheEndAreParked(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "fan", 1)
	waitParked := func(n int64) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d pulls parked", n), func() error {
			if got := cb.b.ParkedPulls(); got != n {
				return fmt.Errorf("%d parked", got)
			}
			return nil
		})
	}
	const groups = 40
	answers := make(chan string, groups)
	for i := range groups {
		go func() {
			resp, err := cb.conn.Invoke(context.Background(), rmq.NewRequest(rmq.PullMessage,
				pullExt(fmt.Sprint("g", i), "fan", 0, 0, "suspendTimeoutMillis", "20000"), nil))
			switch {
			case err != nil:
				answers <- err.Error()
			case resp.Code != rmq.Success:
				answers <- fmt.Sprintf("%d %s", resp.Code, resp.Remark)
			default:
				if msgs := decodePullBody(t, resp.Body); len(msgs) != 1 || string(msgs[0].body) != "one" {
					answers <- fmt.Sprintf("%d messages", len(msgs))
					return
				}
				answers <- ""
			}
		}()
	}
	waitParked(groups)
	stacks := make([]byte, 1<<22)
	stacks = stacks[:runtime.Stack(stacks, true)]
	for _, fn := range []string{"broker.(*Broker).pull(", "remoting.(*Frontend).pullMessage("} {
		if n := bytes.Count(stacks, []byte(fn)); n != 0 {
			t.Errorf("%d goroutines in %s while %d pulls are parked, want none", n, fn, groups)
		}
	}
	cb.send(t, "fan", 0, "one", "")
	timeout := time.After(10 * time.Second)
	for i := range groups {
		select {
		case a := <-answers:
			if a != "" {
				t.Fatalf("a parked pull after the arrival: %s", a)
			}
		case <-timeout:
			t.Fatalf("%d of %d parked pulls answered within 10s of the arrival (their hold is 20s)", i, groups)
		}
	}
	waitParked(0)

	// A connection that closes ends its parked pulls.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := rmq.Dial(ctx, cb.addr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		go func() {
			_, _ = conn.Invoke(context.Background(), rmq.NewRequest(rmq.PullMessage,
				pullExt(fmt.Sprint("closing", i), "fan", 0, 1, "suspendTimeoutMillis", "20000"), nil))
		}()
	}
	waitParked(3)
	_ = conn.Close()
	waitParked(0)
}

// TestParkedPullsEndWithTheBroker: a broker that closes answers its
// parked pulls (no new message) before it closes their connection, and
// closes in seconds, not at the end of their 20 s holds.
func TestParkedPullsEndWithTheBroker(t *testing.T) {
	srv := startBroker(t)
	if err := srv.CreateTopic(broker.TopicConfig{Name: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: broker.PermReadWrite}, false); err != nil {
		t.Fatal(err)
	}
	conn := dialBroker(t, srv.Addr(), nil)
	answers := make(chan *rmq.Command, 3)
	for i := range 3 {
		go func() {
			resp, err := conn.Invoke(context.Background(), rmq.NewRequest(rmq.PullMessage,
				pullExt(fmt.Sprint("g", i), "T", 0, 0, "suspendTimeoutMillis", "20000"), nil))
			if err != nil {
				resp = &rmq.Command{Code: -1, Remark: err.Error()}
			}
			answers <- resp
		}()
	}
	testutil.WaitFor(t, 10*time.Second, "3 pulls parked", func() error {
		if n := srv.ParkedPulls(); n != 3 {
			return fmt.Errorf("%d parked", n)
		}
		return nil
	})
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the broker took %v to close with parked pulls", took)
	}
	for range 3 {
		if resp := <-answers; resp.Code != rmq.PullNotFound {
			t.Fatalf("a parked pull as the broker closed: %d %s", resp.Code, resp.Remark)
		}
	}
}

func TestPullHoldEndsNotFound(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	cb.send(t, "T", 0, "m", "")
	cb.waitQueue(t, "T", 0, 1)
	start := time.Now()
	resp := cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 1, "suspendTimeoutMillis", "300"), nil)
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("answered after %v: not held", took)
	}
	if resp.Code != rmq.PullNotFound || len(resp.Body) != 0 {
		t.Fatalf("pull at the end: %d %s, %d body bytes", resp.Code, resp.Remark, len(resp.Body))
	}
	checkPullExt(t, resp, 1, 0, 1)
	// Without the suspend bit the answer is immediate.
	start = time.Now()
	resp = cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 1, "sysFlag", "4"), nil)
	if took := time.Since(start); took > 200*time.Millisecond || resp.Code != rmq.PullNotFound {
		t.Fatalf("unsuspended pull: %d after %v", resp.Code, took)
	}
	checkPullExt(t, resp, 1, 0, 1)
	// An empty queue at offset 0 is "not found" too.
	cb.createTopic(t, "Empty", 1)
	resp = cb.invoke(t, rmq.PullMessage, pullExt("CG", "Empty", 0, 0, "sysFlag", "4"), nil)
	if resp.Code != rmq.PullNotFound {
		t.Fatalf("empty queue: %d %s", resp.Code, resp.Remark)
	}
	checkPullExt(t, resp, 0, 0, 0)
}

func TestPullHoldEndsWhenTheConnectionCloses(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := rmq.Dial(ctx, cb.addr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.Invoke(context.Background(), rmq.NewRequest(rmq.PullMessage, pullExt("CG", "T", 0, 0, "suspendTimeoutMillis", "20000"), nil))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a pull at the queue's end was answered at once: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	_ = conn.Close()
	if err := <-done; err == nil {
		t.Fatal("the pull was answered on a closed connection")
	}
	// The front end's shutdown (in the cleanup) waits for the held pull's
	// handler: it must have ended with the connection, well before its 20 s.
	start := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer scancel()
	conn2, err := rmq.Dial(sctx, cb.addr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if resp, err := conn2.Invoke(sctx, rmq.NewRequest(rmq.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil)); err != nil || resp.Code != rmq.Success {
		t.Fatalf("after the close: %v %v", err, resp)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatal("the front end stalled after a connection with a held pull closed")
	}
}

func TestPullOffsetMoved(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	for i := 0; i < 3; i++ {
		cb.send(t, "T", 0, "m", "")
	}
	cb.waitQueue(t, "T", 0, 3)
	resp := cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 100), nil)
	if resp.Code != rmq.PullOffsetMoved {
		t.Fatalf("pull past the end: %d %s", resp.Code, resp.Remark)
	}
	checkPullExt(t, resp, 3, 0, 3)
}

func TestPullErrorsKeepTheOffsetFields(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	for _, tc := range []struct {
		name string
		ext  map[string]string
		code int32
	}{
		{"unknown topic", pullExt("CG", "Nope", 0, 4), rmq.TopicNotExist},
		{"queue out of range", pullExt("CG", "T", 9, 4), rmq.InvalidParameter},
		{"SQL92 that does not parse", pullExt("CG", "T", 0, 4, "sysFlag", "6", "subscription", "a >", "expressionType", "SQL92"), rmq.SubscriptionParseFailed},
		{"unknown expression type", pullExt("CG", "T", 0, 4, "sysFlag", "6", "subscription", "a", "expressionType", "XPATH"), rmq.SubscriptionParseFailed},
		{"bad tags", pullExt("CG", "T", 0, 4, "sysFlag", "6", "subscription", "a | b"), rmq.SubscriptionParseFailed},
		{"no queue offset", pullExt("CG", "T", 0, 4, "queueOffset", "x"), rmq.InvalidParameter},
	} {
		resp := cb.invoke(t, rmq.PullMessage, tc.ext, nil)
		if resp.Code != tc.code {
			t.Errorf("%s: code %d (%s), want %d", tc.name, resp.Code, resp.Remark, tc.code)
		}
		for _, k := range []string{"nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"} {
			if !resp.Has(k) {
				t.Errorf("%s: no %s", tc.name, k)
			}
		}
	}
}

// pulledTags returns the TAGS of decoded messages.
func pulledTags(msgs []pulledMsg) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.props[message.PropertyTags]
	}
	return out
}

func TestPullFiltersWithTheHeartbeatSubscription(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	for i := 0; i < 6; i++ {
		cb.send(t, "T", 0, fmt.Sprint(i), []string{"TagA", "TagB", "TagC"}[i%3])
	}
	cb.waitQueue(t, "T", 0, 6)
	// No heartbeat yet: a push consumer's pull (no subscription) waits a
	// little for it, then gets nothing at the same offset (not held for its
	// 20 s): served unfiltered, a subscriber racing its heartbeat would get
	// what its condition excludes.
	noSub := []string{"sysFlag", "2", "subscription", ""}
	for _, off := range []int64{6, 0} {
		start := time.Now()
		resp := cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, off, noSub...), nil)
		if resp.Code != rmq.PullNotFound || len(resp.Body) != 0 || time.Since(start) > 10*time.Second {
			t.Fatalf("a filterless pull at %d before any heartbeat: code %d, %d bytes after %v; want PULL_NOT_FOUND, nothing, within seconds",
				off, resp.Code, len(resp.Body), time.Since(start))
		}
		checkPullExt(t, resp, off, 0, 6)
	}
	// The group's heartbeat subscribes to TagA || TagC.
	s, err := cb.b.Connect(broker.Heartbeat{ClientID: "192.0.2.2@1", Consumers: []broker.ConsumerData{{Group: "CG",
		Subscriptions: []broker.Subscription{{Topic: "T", Expression: "TagA||TagC"}, {Topic: "%RETRY%CG", Expression: "*"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp := cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 0, noSub...), nil)
	if got := strings.Join(pulledTags(decodePullBody(t, resp.Body)), ","); got != "TagA,TagC,TagA,TagC" {
		t.Fatalf("pull filtered by the heartbeat: %s", got)
	}
	checkPullExt(t, resp, 6, 0, 6)
	// A subscription in the request (sysFlag bit 4) wins, RocketMQ's
	// spacing and empty tags included.
	resp = cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 0, "sysFlag", "6", "subscription", "TagB || "), nil)
	if got := strings.Join(pulledTags(decodePullBody(t, resp.Body)), ","); got != "TagB,TagB" {
		t.Fatalf("pull filtered by its own subscription: %s", got)
	}
	resp = cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 0, "sysFlag", "6", "subscription", "TagA || || TagC"), nil)
	if got := strings.Join(pulledTags(decodePullBody(t, resp.Body)), ","); got != "TagA,TagC,TagA,TagC" {
		t.Fatalf("pull with an empty tag in its subscription: %s", got)
	}
	// Messages skipped by the filter still move the offset: from offset 5
	// (TagC) a TagB pull finds nothing, and is told to go on from 6.
	resp = cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 5, "sysFlag", "4", "subscription", "TagB"), nil)
	if resp.Code != rmq.PullRetryImmediately && resp.Code != rmq.PullNotFound {
		t.Fatalf("pull with nothing matching: %d %s", resp.Code, resp.Remark)
	}
	checkPullExt(t, resp, 6, 0, 6)
}

func TestPullCommitsTheOffsetItCarries(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	for i := 0; i < 4; i++ {
		cb.send(t, "T", 0, "m", "")
	}
	cb.waitQueue(t, "T", 0, 4)
	// Without the commit bit the offset is not stored.
	cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 2, "commitOffset", "2"), nil)
	if off, _ := cb.b.QueryOffset("CG", "T", 0); off != -1 {
		t.Fatalf("offset %d stored without the commit bit", off)
	}
	// With it (sysFlag 3, the push consumer's), it is.
	cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 2, "sysFlag", "7", "commitOffset", "2"), nil)
	if off, _ := cb.b.QueryOffset("CG", "T", 0); off != 2 {
		t.Fatalf("offset %d after a pull committing 2", off)
	}
	// Negative offsets are ignored.
	cb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 2, "sysFlag", "7", "commitOffset", "-1"), nil)
	if off, _ := cb.b.QueryOffset("CG", "T", 0); off != 2 {
		t.Fatalf("offset %d after a pull committing -1", off)
	}
}

func TestPullLitePullCode(t *testing.T) {
	cb := startConsumerBroker(t)
	cb.createTopic(t, "T", 1)
	cb.send(t, "T", 0, "m", "")
	cb.waitQueue(t, "T", 0, 1)
	// The Java lite pull consumer sends LITE_PULL_MESSAGE (sysFlag bit 5
	// set) with PULL_MESSAGE's header.
	resp := cb.invoke(t, rmq.LitePullMessage, pullExt("CG", "T", 0, 0, "sysFlag", "22", "subscription", "*"), nil)
	if resp.Code != rmq.Success || len(decodePullBody(t, resp.Body)) != 1 {
		t.Fatalf("lite pull: %d %s", resp.Code, resp.Remark)
	}
}

// replicated configures fast replication for a test broker; slave makes it
// a slave of master.
func replicated(master *server.Server, id int64) func(*broker.Options) {
	return func(o *broker.Options) {
		o.Replication.Mode = broker.ReplicationAsync
		o.Replication.HAListenAddr = "127.0.0.1:0"
		o.Replication.HeartbeatInterval = 100 * time.Millisecond
		o.Replication.Timeout = time.Second
		o.Replication.SlaveTimeout = 2 * time.Second
		o.Replication.MetadataSyncInterval = 100 * time.Millisecond
		if master != nil {
			o.BrokerID = id
			o.Replication.MasterHAAddr = master.HAServerAddr()
		}
	}
}

func TestPullFromSlave(t *testing.T) {
	master := startBroker(t, replicated(nil, 0))
	mb := &consumerBroker{b: master.Broker}
	mb.createTopic(t, "T", 1)
	for i := 0; i < 3; i++ {
		mb.send(t, "T", 0, fmt.Sprint("m", i), "")
	}
	slave := startBroker(t, replicated(master, 1))
	sb := &consumerBroker{b: slave.Broker, conn: dialBroker(t, slave.Addr(), nil), addr: slave.Addr()}
	testutil.WaitFor(t, 10*time.Second, "the slave to copy the topic and its messages", func() error {
		if _, err := slave.QueueState("T", 0); err != nil {
			return err
		}
		if _, maxOff := slave.Store().QueueOffsets("T", 0); maxOff < 3 {
			return fmt.Errorf("slave holds %d messages", maxOff)
		}
		return nil
	})
	// A slave serves reads, read-only: the offset a pull carries is the
	// master's business, and the client is sent back to the master (id 0).
	resp := sb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 0, "sysFlag", "7", "commitOffset", "2"), nil)
	if resp.Code != rmq.Success {
		t.Fatalf("pull from the slave: %d %s", resp.Code, resp.Remark)
	}
	msgs := decodePullBody(t, resp.Body)
	if len(msgs) != 3 || string(msgs[2].body) != "m2" {
		t.Fatalf("slave pull got %d messages", len(msgs))
	}
	// Records are the master's bytes: STOREHOST is the master's address.
	if want := netip.MustParseAddrPort(master.Addr()); msgs[0].storeHost != want {
		t.Fatalf("store host %s, master %s", msgs[0].storeHost, want)
	}
	checkPullExt(t, resp, 3, 0, 3)
	if off, _ := slave.QueryOffset("CG", "T", 0); off != -1 {
		t.Fatalf("a pull to the slave committed offset %d", off)
	}
	// Past the slave's end (the client got the offset from the master), the
	// pull is held until the slave catches up, never moved.
	got := make(chan *rmq.Command, 1)
	go func() {
		resp, err := sb.conn.Invoke(context.Background(), rmq.NewRequest(rmq.PullMessage, pullExt("CG", "T", 0, 5), nil))
		if err != nil {
			resp = &rmq.Command{Code: -1, Remark: err.Error()}
		}
		got <- resp
	}()
	time.Sleep(200 * time.Millisecond)
	for i := 3; i < 8; i++ {
		mb.send(t, "T", 0, fmt.Sprint("m", i), "")
	}
	resp = <-got
	if resp.Code != rmq.Success {
		t.Fatalf("held slave pull past its end: %d %s %v", resp.Code, resp.Remark, resp.Ext)
	}
	if msgs := decodePullBody(t, resp.Body); len(msgs) == 0 || msgs[0].queueOffset != 5 {
		t.Fatalf("held slave pull got %+v", msgs)
	}
	// Far past the end, the hold ends (at most 3 s on a slave) with the
	// offset unmoved.
	start := time.Now()
	resp = sb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 100), nil)
	if took := time.Since(start); resp.Code != rmq.PullNotFound || took < 2*time.Second || took > 10*time.Second {
		t.Fatalf("slave pull far past the end: %d %s after %v", resp.Code, resp.Remark, took)
	}
	if next, _ := resp.Int64("nextBeginOffset"); next != 100 {
		t.Fatalf("slave moved the offset to %d", next)
	}
	// At the end, the hold is the slave's (3 s), not the client's 20 s.
	start = time.Now()
	resp = sb.invoke(t, rmq.PullMessage, pullExt("CG", "T", 0, 8), nil)
	if took := time.Since(start); resp.Code != rmq.PullNotFound || took > 10*time.Second {
		t.Fatalf("slave pull at the end: %d %s after %v", resp.Code, resp.Remark, took)
	}
	checkPullExt(t, resp, 8, 0, 8)
}
