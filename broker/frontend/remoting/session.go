package remoting

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/broker/filter"
	"github.com/bolide-mq/bolide/broker/txn"
	"github.com/bolide-mq/bolide/internal/errcode"
	rmq "github.com/bolide-mq/bolide/internal/remoting"
	"github.com/bolide-mq/bolide/message"
)

// A RocketMQ client has one connection per broker address, shared by all
// its producers and consumers, and says who it is on it with HEART_BEAT
// (every 30 s). The connection's first heartbeat opens a core session
// (broker.Connect), later ones update it, and the session ends with the
// connection: that is how the broker learns that a client left (the Go
// client never sends UNREGISTER_CLIENT). The session's notices — a consumer
// group's member list changed, a transaction to check — go to the client
// as NOTIFY_CONSUMER_IDS_CHANGED and CHECK_TRANSACTION_STATE on the same
// connection.
//
// A producer may send (and start transactions) before its first heartbeat,
// which may come 30 s later; for its transactions to be checked back, the
// producer groups named in SEND requests are added to the session, one is
// opened for them if the connection has none yet (under a provisional
// client id, replaced by the client's own at its first heartbeat).

// sessionRefresh is how often a session that only SEND requests keep alive
// is given its heartbeat again (or every third of the core's ClientExpiry,
// 120 s, after which the core drops a silent client, when that is shorter).
const sessionRefresh = 30 * time.Second

// maxSendGroups bounds the producer groups a connection's SEND requests
// add to its session.
const maxSendGroups = 64

// sessionState is the client session of a connection.
type sessionState struct {
	smu      sync.Mutex
	sess     *broker.Session
	clientID string           // of sess: the client's, or a provisional one
	hb       broker.Heartbeat // the client's last heartbeat (ClientID "" before the first)
	extra    []string         // producer groups seen in SEND requests, not in hb
	beat     time.Time        // when sess was last given a heartbeat
	fwd      *forwarder       // delivers sess's notices
	closed   bool
	// language and version are what the client's requests say it is
	// ("JAVA", "GO"; RocketMQ's MQVersion ordinal), for the admin listings.
	language string
	version  int32
	// requester is the client id a request (request-reply) sent on this
	// connection named for its reply, so that the reply finds the
	// connection before the client's first heartbeat.
	requester string

	cfgOnce sync.Once
	cfg     sendConfig // the broker's settings a send needs (config)
}

// sendConfig is what a send needs from the broker's options, read once
// per connection (the options are large to copy on every send). The body
// limit is not among them: it may change while the broker runs
// (Broker.MaxMessageSize is read per send).
type sendConfig struct {
	cluster string
	refresh time.Duration // sessionRefresh, or less for a short ClientExpiry
}

// config returns the connection's copy of the broker settings a send needs.
func (f *Frontend) config(cs *connState) *sendConfig {
	cs.cfgOnce.Do(func() {
		o := f.b.Options()
		cs.cfg = sendConfig{cluster: o.Cluster, refresh: min(sessionRefresh, o.ClientExpiry/3)}
	})
	return &cs.cfg
}

// forwarder is the goroutine that delivers one session's notices.
type forwarder struct {
	stop chan struct{}
	done chan struct{}
}

// provisionalID is the client id of a session opened for a connection's
// SEND requests before its client's first heartbeat.
func provisionalID(conn *rmq.Conn) string { return "remoting@" + conn.RemoteAddr().String() }

// merged is the heartbeat the core is given: the client's own plus the
// producer groups it sent with.
func (s *sessionState) merged() broker.Heartbeat {
	hb := s.hb
	if hb.ClientID == "" {
		hb.ClientID = s.clientID
	}
	if len(s.extra) > 0 {
		hb.ProducerGroups = append(slices.Clip(hb.ProducerGroups), s.extra...)
	}
	return hb
}

// apply gives the core the session's current heartbeat, opening a session
// or replacing one whose client id changed. The caller holds s.smu.
func (f *Frontend) apply(cs *connState) error {
	s := &cs.sessionState
	hb := s.merged()
	// The version is RocketMQ's MQVersion number, as the client sends it.
	hb.Conn = broker.ConnInfo{RemoteAddr: cs.conn.RemoteAddr().String(), Language: s.language,
		Version: strconv.Itoa(int(s.version)), Protocol: broker.ProtocolRemoting}
	if s.sess != nil && s.clientID == hb.ClientID {
		s.sess.Heartbeat(hb)
		s.beat = time.Now()
		return nil
	}
	sess, err := f.b.Connect(hb)
	if err != nil {
		return err
	}
	old, oldFwd := s.sess, s.fwd
	s.sess, s.clientID, s.beat = sess, hb.ClientID, time.Now()
	s.fwd = f.forward(cs.conn, sess)
	if old != nil {
		// The new session holds the groups before the old one lets go;
		// what the old one was told still reaches the client.
		stopForwarder(oldFwd)
		old.Close()
		f.drain(cs.conn, old)
	}
	return nil
}

// noteProducer makes sure the connection's session names a producer group
// seen in a SEND request, so that its transactions can be checked back on
// this connection before (or without) a heartbeat naming it.
func (f *Frontend) noteProducer(cs *connState, req *rmq.Command, group string) {
	if group == "" {
		return
	}
	s := &cs.sessionState
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.closed {
		return
	}
	known := slices.Contains(s.hb.ProducerGroups, group) || slices.Contains(s.extra, group)
	if known && s.sess != nil && time.Since(s.beat) < f.config(cs).refresh {
		return
	}
	if s.language == "" {
		s.language, s.version = req.Language, req.Version
	}
	if !known {
		if len(s.extra) >= maxSendGroups || message.ValidateGroup(group) != nil {
			return
		}
		s.extra = append(s.extra, group)
	}
	if s.clientID == "" {
		s.clientID = provisionalID(cs.conn)
	}
	if err := f.apply(cs); err != nil {
		f.log.Debug("producer session not opened", zap.String("group", group), zap.Error(err))
	}
}

// closed ends what a connection left behind: its session (its groups
// rebalance) and the session's forwarder.
func (f *Frontend) closed(cs *connState) {
	s := &cs.sessionState
	s.smu.Lock()
	defer s.smu.Unlock()
	s.closed = true
	if s.sess == nil {
		return
	}
	stopForwarder(s.fwd)
	s.sess.Close()
	s.sess, s.fwd = nil, nil
}

// forward starts the goroutine that delivers sess's notices on conn until
// stopped, the connection ends or the broker stops.
func (f *Frontend) forward(conn *rmq.Conn, sess *broker.Session) *forwarder {
	fw := &forwarder{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(fw.done)
		for {
			select {
			case n := <-sess.Notices():
				f.notify(conn, n)
			case <-fw.stop:
				return
			case <-conn.Done():
				return
			case <-sess.Done():
				return
			}
		}
	}()
	return fw
}

func stopForwarder(fw *forwarder) {
	if fw == nil {
		return
	}
	close(fw.stop)
	<-fw.done
}

// drain delivers the notices a replaced session still holds.
func (f *Frontend) drain(conn *rmq.Conn, sess *broker.Session) {
	for {
		select {
		case n := <-sess.Notices():
			f.notify(conn, n)
		default:
			return
		}
	}
}

// notify sends one notice to the client, oneway as RocketMQ's broker does
// (the clients do not answer either request).
func (f *Frontend) notify(conn *rmq.Conn, n broker.Notice) {
	var req *rmq.Command
	switch {
	case n.CheckTransaction != nil:
		var err error
		if req, err = f.checkRequest(n.CheckTransaction); err != nil {
			f.log.Warn("transaction check not sent", zap.String("group", n.CheckTransaction.Group),
				zap.String("id", n.CheckTransaction.TransactionID), zap.Error(err))
			return
		}
	case n.ConsumerIDsChanged != "":
		req = rmq.NewRequest(rmq.NotifyConsumerIDsChanged, map[string]string{"consumerGroup": n.ConsumerIDsChanged}, nil)
	default:
		return
	}
	if err := conn.Oneway(req); err != nil {
		f.log.Debug("notice not delivered", zap.Int32("code", req.Code), zap.Stringer("remote", conn.RemoteAddr()), zap.Error(err))
	}
}

// checkRequest is CHECK_TRANSACTION_STATE for a check: the header RocketMQ's
// broker sends, and as body the half message's stored record with its real
// topic and queue restored (what a producer's check listener is given; the
// REAL_TOPIC, PGROUP and TRAN_MSG properties stay, as in RocketMQ).
func (f *Frontend) checkRequest(c *txn.Check) (*rmq.Command, error) {
	m, err := message.Decode(c.Record)
	if err != nil {
		return nil, fmt.Errorf("decode half message at %d: %w", c.CommitLogOffset, err)
	}
	topic, qid, err := message.RealDestination(m)
	if err != nil {
		return nil, err
	}
	m.Topic, m.QueueID = topic, qid
	body, err := message.Encode(nil, m)
	if err != nil {
		return nil, fmt.Errorf("encode half message at %d: %w", c.CommitLogOffset, err)
	}
	ext := map[string]string{
		"topic":                message.TransHalfTopic,
		"tranStateTableOffset": strconv.FormatInt(c.HalfQueueOffset, 10),
		"commitLogOffset":      strconv.FormatInt(c.CommitLogOffset, 10),
		"msgId":                c.UniqueID,
		"transactionId":        c.TransactionID,
		"offsetMsgId":          c.OffsetMsgID,
		"bname":                f.b.Options().BrokerName,
	}
	return rmq.NewRequest(rmq.CheckTransactionState, ext, body), nil
}

// heartbeatData is RocketMQ's HeartbeatData as the Java (fastjson) and Go
// clients write it. What the core does not need is not decoded: codeSet
// (strings from Go, numbers from Java), tagsSet and subVersion (a big
// number) are derived from subString again.
type heartbeatData struct {
	ClientID        string `json:"clientID"`
	ProducerDataSet []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
	ConsumerDataSet []struct {
		GroupName           string `json:"groupName"`
		ConsumeType         string `json:"consumeType"`
		MessageModel        string `json:"messageModel"`
		SubscriptionDataSet []struct {
			Topic          string `json:"topic"`
			SubString      string `json:"subString"`
			ExpressionType string `json:"expressionType"`
		} `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
	// WithoutSub: a RocketMQ 5 "v2" heartbeat that leaves the
	// subscriptions out because they did not change.
	WithoutSub bool `json:"withoutSub"`
}

// parseHeartbeat turns a HEART_BEAT body into the core's heartbeat. prev
// supplies the subscriptions of a heartbeat without them. Subscriptions of
// an expression type other than TAG and SQL92, SQL92 conditions that do not
// parse, or tag expressions Bolide does not take (a tag with inner white
// space, "*" among tags), are left out and reported in dropped.
func parseHeartbeat(body []byte, prev broker.Heartbeat) (hb broker.Heartbeat, dropped []string, err error) {
	var d heartbeatData
	if err := json.Unmarshal(body, &d); err != nil {
		return hb, nil, errcode.Errorf(errcode.InvalidParameter, "heartbeat body is not HeartbeatData JSON: %v", err)
	}
	hb.ClientID = d.ClientID
	for _, p := range d.ProducerDataSet {
		if p.GroupName != "" && !slices.Contains(hb.ProducerGroups, p.GroupName) {
			hb.ProducerGroups = append(hb.ProducerGroups, p.GroupName)
		}
	}
	for _, c := range d.ConsumerDataSet {
		cd := broker.ConsumerData{Group: c.GroupName, Pull: c.ConsumeType == "CONSUME_ACTIVELY"}
		if c.MessageModel == "BROADCASTING" {
			cd.Model = broker.Broadcasting
		}
		if d.WithoutSub {
			for _, p := range prev.Consumers {
				if p.Group == cd.Group {
					cd.Subscriptions, cd.Orderly = p.Subscriptions, p.Orderly
				}
			}
		}
		for _, s := range c.SubscriptionDataSet {
			t, err := broker.NormalizeExpressionType(s.ExpressionType)
			if err != nil {
				dropped = append(dropped, fmt.Sprintf("%s of %s (%s)", s.Topic, cd.Group, s.ExpressionType))
				continue
			}
			if t == broker.ExprSQL92 {
				// Whether this broker evaluates SQL92 at all is for its
				// pulls to say (RocketMQ registers the subscription too).
				if _, err := filter.Parse(s.SubString); err != nil {
					dropped = append(dropped, fmt.Sprintf("%s of %s (SQL92: %v)", s.Topic, cd.Group, err))
					continue
				}
				cd.Subscriptions = append(cd.Subscriptions, broker.Subscription{Topic: s.Topic, Expression: s.SubString, Type: t})
				continue
			}
			expr := strings.TrimSpace(s.SubString)
			if expr == "" {
				expr = "*"
			}
			if _, err := message.ParseTagExpression(expr); err != nil {
				// Empty tags, as RocketMQ's clients skip them (pull.go).
				expr = tagExpression(expr)
				if _, err := message.ParseTagExpression(expr); err != nil {
					dropped = append(dropped, fmt.Sprintf("%s of %s (%v)", s.Topic, cd.Group, err))
					continue
				}
			}
			cd.Subscriptions = append(cd.Subscriptions, broker.Subscription{Topic: s.Topic, Expression: expr})
		}
		hb.Consumers = append(hb.Consumers, cd)
	}
	return hb, dropped, nil
}

// heartbeat serves HEART_BEAT (34): the connection's first opens its
// session, later ones update it.
func (f *Frontend) heartbeat(_ context.Context, cs *connState, req *rmq.Command) *rmq.Command {
	s := &cs.sessionState
	s.smu.Lock()
	defer s.smu.Unlock()
	hb, dropped, err := parseHeartbeat(req.Body, s.hb)
	if err == nil {
		err = hb.Validate()
	}
	if err != nil {
		return errorReply(req, err)
	}
	if s.closed {
		return req.Reply(rmq.SystemError, "connection closed")
	}
	prev := s.hb
	s.hb = hb
	s.language, s.version = req.Language, req.Version
	// Producer groups the heartbeat names need no separate record.
	s.extra = slices.DeleteFunc(s.extra, func(g string) bool { return slices.Contains(hb.ProducerGroups, g) })
	if err := f.apply(cs); err != nil {
		s.hb = prev
		return errorReply(req, err)
	}
	if len(dropped) > 0 {
		f.log.Warn("subscriptions not registered", zap.String("client", hb.ClientID), zap.Strings("subscriptions", dropped))
		return req.Reply(rmq.SubscriptionParseFailed, "only TAG subscriptions of tags without white space and valid SQL92 conditions are supported; not registered: "+strings.Join(dropped, ", "))
	}
	return req.Reply(rmq.Success, "")
}

// unregisterClient serves UNREGISTER_CLIENT (35), which the Java client
// sends for each of its groups when it shuts down: the group leaves the
// connection's session (its consumers rebalance).
func (f *Frontend) unregisterClient(_ context.Context, cs *connState, req *rmq.Command) *rmq.Command {
	pg, cg := req.String("producerGroup"), req.String("consumerGroup")
	s := &cs.sessionState
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.sess == nil || s.closed {
		return req.Reply(rmq.Success, "")
	}
	if id := req.String("clientID"); id != "" && s.hb.ClientID != "" && id != s.hb.ClientID {
		return req.Reply(rmq.Success, "") // not this connection's client
	}
	if pg != "" {
		s.hb.ProducerGroups = slices.DeleteFunc(slices.Clone(s.hb.ProducerGroups), func(g string) bool { return g == pg })
		s.extra = slices.DeleteFunc(s.extra, func(g string) bool { return g == pg })
	}
	if cg != "" {
		s.hb.Consumers = slices.DeleteFunc(slices.Clone(s.hb.Consumers), func(c broker.ConsumerData) bool { return c.Group == cg })
	}
	if err := f.apply(cs); err != nil {
		return errorReply(req, err)
	}
	return req.Reply(rmq.Success, "")
}

// sendHandlers registers heartbeats and the producer side.
func (f *Frontend) sendHandlers() map[int32]handler {
	return map[int32]handler{
		rmq.HeartBeat:           f.heartbeat,
		rmq.UnregisterClient:    f.unregisterClient,
		rmq.CheckClientConfig:   f.checkClientConfig,
		rmq.SendMessage:         f.send,
		rmq.SendMessageV2:       f.send,
		rmq.SendBatchMessage:    f.send,
		rmq.SendReplyMessage:    f.send,
		rmq.SendReplyMessageV2:  f.send,
		rmq.EndTransaction:      f.endTransaction,
		rmq.ConsumerSendMsgBack: f.sendBack,
	}
}
