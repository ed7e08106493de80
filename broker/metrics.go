package broker

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bolide-mq/bolide/broker/store"
	"github.com/bolide-mq/bolide/internal/errcode"
	"github.com/bolide-mq/bolide/message"
)

// Metrics. Names follow RocketMQ 5's (rocketmq_*) where it has one, with
// its labels and units (latencies in milliseconds), so dashboards made for
// RocketMQ read them; the rest are bolide_*, in base units. Only the send
// and pull paths update anything as they run (Send, Pull);
// every other figure is read from the broker when Prometheus scrapes
// (Collector), so idle features cost nothing.

// latencyBucketsMS are the rpc latency buckets, in milliseconds; pulls that
// are held (long polling) land in the upper ones.
var latencyBucketsMS = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 3000, 10000, 30000}

// brokerMetrics are the counters and histograms of the send and pull paths.
// The zero value is ready: the vectors are made on first use.
type brokerMetrics struct {
	once       sync.Once
	msgsIn     *prometheus.CounterVec   // topic
	bytesIn    *prometheus.CounterVec   // topic
	msgsOut    *prometheus.CounterVec   // topic, consumer_group
	bytesOut   *prometheus.CounterVec   // topic, consumer_group
	rpcLatency *prometheus.HistogramVec // protocol_type, request_code, response_code, is_long_polling
	msgSize    prometheus.Histogram
	flush      prometheus.Histogram

	// The send path's series, looked up once: a vector hashes its label
	// values on every lookup, and with thousands of topics the lookup
	// cost more than the rest of a send's counting. A topic's counters
	// hang off its entry in the topic table (topicEntry.in), which the
	// send has found already; sent maps a front end to the latency of its
	// successful sends. Series are never deleted, so neither are these.
	sent sync.Map
}

// topicIn are a topic's send counters.
type topicIn struct{ msgs, bytes prometheus.Counter }

// topicIn returns the send counters of e's topic, made on first use.
func (m *brokerMetrics) topicIn(e *topicEntry) *topicIn {
	if in := e.in.Load(); in != nil {
		return in
	}
	name := e.cfg.Name
	in := &topicIn{msgs: m.msgsIn.WithLabelValues(name), bytes: m.bytesIn.WithLabelValues(name)}
	if e.in.CompareAndSwap(nil, in) {
		return in
	}
	return e.in.Load()
}

// sendLatency returns the latency histogram of sends through the front
// end protocol that ended with err.
func (m *brokerMetrics) sendLatency(protocol string, err error) prometheus.Observer {
	if err != nil {
		return m.rpcLatency.WithLabelValues(protocol, "send", responseCode(err), "false")
	}
	if v, ok := m.sent.Load(protocol); ok {
		return v.(prometheus.Observer)
	}
	v, _ := m.sent.LoadOrStore(protocol, m.rpcLatency.WithLabelValues(protocol, "send", responseCode(nil), "false"))
	return v.(prometheus.Observer)
}

func (m *brokerMetrics) init() *brokerMetrics {
	m.once.Do(func() {
		m.msgsIn = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rocketmq_messages_in_total",
			Help: "Messages producers stored, by topic (as sent, before delay or transaction rewriting).",
		}, []string{"topic"})
		m.bytesIn = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rocketmq_throughput_in_total",
			Help: "Body bytes producers stored, by topic.",
		}, []string{"topic"})
		m.msgsOut = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rocketmq_messages_out_total",
			Help: "Messages pulled by consumers, by topic and consumer group.",
		}, []string{"topic", "consumer_group"})
		m.bytesOut = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rocketmq_throughput_out_total",
			Help: "Stored-record bytes pulled by consumers, by topic and consumer group.",
		}, []string{"topic", "consumer_group"})
		m.rpcLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rocketmq_rpc_latency",
			Help:    "Latency of send and pull calls in milliseconds, by request and response code; held pulls have is_long_polling=\"true\".",
			Buckets: latencyBucketsMS,
		}, []string{"protocol_type", "request_code", "response_code", "is_long_polling"})
		m.msgSize = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rocketmq_message_size",
			Help:    "Body size of stored messages in bytes.",
			Buckets: []float64{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20},
		})
		m.flush = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "bolide_storage_flush_seconds",
			Help:    "Time the CommitLog took to make appended bytes durable (fdatasync or msync), per flush.",
			Buckets: []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1},
		})
	})
	return m
}

func (m *brokerMetrics) collectors() []prometheus.Collector {
	m.init()
	return []prometheus.Collector{m.msgsIn, m.bytesIn, m.msgsOut, m.bytesOut, m.rpcLatency, m.msgSize, m.flush}
}

// observeFlush is the CommitLog's OnFlush hook.
func (m *brokerMetrics) observeFlush(took time.Duration, _ int64) {
	m.init().flush.Observe(took.Seconds())
}

func responseCode(err error) string { return errcode.Of(err).String() }

func sinceMS(start time.Time) float64 { return float64(time.Since(start)) / float64(time.Millisecond) }

type frontendKey struct{}

// WithFrontend labels a call's context with the front end it came through
// ("grpc", "frame"): the protocol_type label of the request metrics.
func WithFrontend(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, frontendKey{}, boxedFrontend(name))
}

// frontendBoxes maps each front end name seen to the name boxed once as an
// interface value: boxing a string is a heap allocation, and WithFrontend
// runs on every request.
var frontendBoxes sync.Map // string → any

// boxedFrontend returns name as an interface value, the same one for every
// call with the same name.
func boxedFrontend(name string) any {
	if v, ok := frontendBoxes.Load(name); ok {
		return v
	}
	v, _ := frontendBoxes.LoadOrStore(name, any(name))
	return v
}

// frontendOf is the front end a call came through ("core" for a call made
// on the core directly).
func frontendOf(ctx context.Context) string {
	if name, ok := ctx.Value(frontendKey{}).(string); ok {
		return name
	}
	return "core"
}

// Send stores messages (one, or a batch for one topic queue) and returns
// their results once the flush and replication modes say they are stored.
// It is counted in the metrics under the context's front end (WithFrontend).
// Topics of the system and dead-letter topics are refused, and a retry
// topic takes only what a consumer sends back (topic.CheckSend).
func (b *Broker) Send(ctx context.Context, msgs []*message.Ext) ([]store.PutResult, error) {
	return b.sendCounted(ctx, msgs, -1)
}

// SendRetry stores m, a message a consumer sends to its group's retry
// topic itself (RocketMQ's clients do when CONSUMER_SEND_MSG_BACK fails,
// and orderly consumers when they give up on a message), as Send does,
// judging it by maxReconsumeTimes, the limit the consumer gives (< 0: the
// broker's setting for the group): past it, or at once for a group that
// consumes orderly, the message goes to the group's dead-letter topic
// instead (retry.Service.ClientRetry).
func (b *Broker) SendRetry(ctx context.Context, m *message.Ext, maxReconsumeTimes int32) ([]store.PutResult, error) {
	if m == nil || !message.IsRetryTopic(m.Topic) {
		return nil, errcode.Errorf(errcode.InvalidParameter, "SendRetry takes a message to a retry topic")
	}
	return b.sendCounted(ctx, []*message.Ext{m}, maxReconsumeTimes)
}

func (b *Broker) sendCounted(ctx context.Context, msgs []*message.Ext, maxReconsumeTimes int32) ([]store.PutResult, error) {
	start := time.Now()
	res, e, err := b.send(ctx, msgs, maxReconsumeTimes)
	b.countSend(ctx, start, e, len(msgs), func(i int) int { return len(msgs[i].Body) }, err)
	return res, err
}

// countSend counts a send begun at start that ended with err, of n
// messages whose bodies are bodyLen(i) bytes, to the topic of entry e.
func (b *Broker) countSend(ctx context.Context, start time.Time, e *topicEntry, n int, bodyLen func(i int) int, err error) {
	m := b.metrics.init()
	m.sendLatency(frontendOf(ctx), err).Observe(sinceMS(start))
	if err == nil {
		body := 0
		for i := range n {
			size := bodyLen(i)
			body += size
			m.msgSize.Observe(float64(size))
		}
		in := m.topicIn(e) // the topic sent to (send may rewrite msgs' topic: delay, transactions)
		in.msgs.Add(float64(n))
		in.bytes.Add(float64(body))
		b.traffic.put(n, body)
	}
}

// Pull reads a queue, holding the request up to SuspendTimeout (capped by
// LongPollMax) while there is nothing new. It is counted in the metrics
// under the context's front end (WithFrontend).
func (b *Broker) Pull(ctx context.Context, req PullRequest) (PullResult, error) {
	start := time.Now()
	res, err := b.pull(ctx, req)
	b.countPull(ctx, req, start, res, err)
	return res, err
}

// countPull counts a pull begun at start that ended with res or err.
func (b *Broker) countPull(ctx context.Context, req PullRequest, start time.Time, res PullResult, err error) {
	protocol := frontendOf(ctx)
	m := b.metrics.init()
	m.rpcLatency.WithLabelValues(protocol, "pull", responseCode(err), strconv.FormatBool(req.SuspendTimeout > 0)).Observe(sinceMS(start))
	if err == nil && len(res.Records) > 0 {
		n := 0
		for _, r := range res.Records {
			n += len(r)
		}
		m.msgsOut.WithLabelValues(req.Topic, req.Group).Add(float64(len(res.Records)))
		m.bytesOut.WithLabelValues(req.Topic, req.Group).Add(float64(n))
		b.traffic.got(len(res.Records), n)
	}
}

// Collector is the broker's Prometheus collector: the send and pull
// counters and histograms, and the storage, consumer, replication, delay
// and transaction figures read at scrape time.
func (b *Broker) Collector() prometheus.Collector { return &collector{b: b} }

type collector struct{ b *Broker }

// Descriptions of the figures read at scrape time.
var (
	descStorageSize = prometheus.NewDesc("rocketmq_storage_size",
		"Bytes of CommitLog data the broker holds (min to max offset).", nil, nil)
	descDiskRatio = prometheus.NewDesc("bolide_storage_disk_used_ratio",
		"Used fraction of the file system holding the CommitLog; sends are refused past the disk-full ratio.", nil, nil)
	descMaxOffset = prometheus.NewDesc("bolide_commitlog_max_offset_bytes",
		"CommitLog max (write) offset.", nil, nil)
	descDispatchBehind = prometheus.NewDesc("rocketmq_storage_dispatch_behind_bytes",
		"CommitLog bytes not yet dispatched to ConsumeQueue and IndexFile (dispatch lag).", nil, nil)
	descFlushBehind = prometheus.NewDesc("rocketmq_storage_flush_behind_bytes",
		"CommitLog bytes written but not yet flushed to disk.", nil, nil)
	descDispatchErrors = prometheus.NewDesc("bolide_dispatch_errors_total",
		"Records dispatch could not index.", nil, nil)
	descTopics = prometheus.NewDesc("rocketmq_topic_number",
		"Topics in the broker's topic table.", nil, nil)
	descGroups = prometheus.NewDesc("rocketmq_consumer_group_number",
		"Consumer groups with committed offsets on the broker.", nil, nil)
	descLag = prometheus.NewDesc("rocketmq_consumer_lag_messages",
		"Messages stored but not yet committed by a consumer group, by topic and group.", []string{"topic", "consumer_group"}, nil)
	descReady = prometheus.NewDesc("bolide_broker_ready",
		"1 when the broker is ready to serve (as /readyz answers), else 0.", nil, nil)
	descRegisterRefused = prometheus.NewDesc("bolide_broker_register_refused_total",
		"Registrations a NameServer refused (INVALID_PARAMETER: the broker name and id are held by another live broker, or the configuration conflicts), since the broker started.", nil, nil)
	descRole = prometheus.NewDesc("bolide_broker_role",
		"1 for the broker's current role (master, slave or fenced).", []string{"role"}, nil)
	descReplLag = prometheus.NewDesc("bolide_replication_lag_bytes",
		"CommitLog bytes a slave is behind its master: on a master one series per slave, on a slave its own.", []string{"slave_id"}, nil)
	descReplInSync = prometheus.NewDesc("bolide_replication_in_sync_slaves",
		"Slaves a master counts as in sync.", nil, nil)
	descRoleChanges = prometheus.NewDesc("bolide_replication_role_changes_total",
		"Role changes the controller made this broker take since it started (controller mode).", nil, nil)
	descLeaseRemaining = prometheus.NewDesc("bolide_replication_lease_remaining_seconds",
		"Write lease left on a master in controller mode (0: expired; writes are refused).", nil, nil)
	descDelayPending = prometheus.NewDesc("bolide_delay_level_pending_messages",
		"Messages waiting in a delay level.", []string{"level"}, nil)
	descTimerPending = prometheus.NewDesc("bolide_timer_pending_messages",
		"Timer (arbitrary delay) messages neither delivered nor cancelled (approximate).", nil, nil)
	descTimerDelivered = prometheus.NewDesc("bolide_timer_delivered_total",
		"Timer messages delivered since the engine started.", nil, nil)
	descHalf = prometheus.NewDesc("rocketmq_half_messages",
		"Transactional half messages waiting for their outcome.", nil, nil)
	descTxnChecks = prometheus.NewDesc("bolide_transaction_checks_total",
		"Transaction check-backs made, by result (sent to a producer, or no producer connected).", []string{"result"}, nil)
	descTxnEnds = prometheus.NewDesc("bolide_transaction_ends_total",
		"Transactions ended, by outcome.", []string{"outcome"}, nil)
	descPopInFlight = prometheus.NewDesc("bolide_pop_inflight_messages",
		"POP messages handed out and neither acknowledged nor dead-lettered, by topic and group.", []string{"topic", "consumer_group"}, nil)
	descPopAcks = prometheus.NewDesc("bolide_pop_acks_total",
		"POP acknowledgements since the broker started, by topic and group.", []string{"topic", "consumer_group"}, nil)
	descPopRedeliveries = prometheus.NewDesc("bolide_pop_redeliveries_total",
		"POP messages handed out again (attempt > 1) since the broker started, by topic and group.", []string{"topic", "consumer_group"}, nil)
	descPullsParked = prometheus.NewDesc("bolide_pulls_parked",
		"Long-polled pulls held now without a goroutine of their own (parked), waiting for messages.", nil, nil)
	descPopDLQ = prometheus.NewDesc("bolide_pop_dead_letters_total",
		"POP messages moved to the dead-letter queue since the broker started, by topic and group.", []string{"topic", "consumer_group"}, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, col := range c.b.metrics.collectors() {
		col.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{descStorageSize, descDiskRatio, descMaxOffset, descDispatchBehind,
		descFlushBehind, descDispatchErrors, descTopics, descGroups, descLag, descReady, descRegisterRefused, descRole, descReplLag,
		descReplInSync, descRoleChanges, descLeaseRemaining, descDelayPending, descTimerPending, descTimerDelivered, descHalf, descTxnChecks, descTxnEnds,
		descPopInFlight, descPopAcks, descPopRedeliveries, descPopDLQ, descPullsParked} {
		ch <- d
	}
	for _, d := range dedupDescs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	for _, col := range b.metrics.collectors() {
		col.Collect(ch)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}

	clog := b.store.CommitLog()
	gauge(descStorageSize, float64(clog.MaxOffset()-clog.MinOffset()))
	gauge(descDiskRatio, clog.DiskUsage())
	gauge(descMaxOffset, float64(clog.MaxOffset()))
	gauge(descDispatchBehind, float64(max(0, b.store.DispatchBehind())))
	gauge(descFlushBehind, float64(max(0, clog.MaxOffset()-clog.FlushedOffset())))
	counter(descDispatchErrors, float64(b.store.DispatchErrors()))

	gauge(descTopics, float64(len(b.topics.all())))
	gauge(descPullsParked, float64(b.ParkedPulls()))
	groups := b.offsets.Groups()
	gauge(descGroups, float64(len(groups)))
	for _, g := range groups {
		for _, t := range b.offsets.TopicsOf(g) {
			var lag int64
			for q, off := range b.offsets.Queues(g, t) {
				_, maxOff := b.store.QueueOffsets(t, q)
				lag += max(0, maxOff-max(off, 0))
			}
			gauge(descLag, float64(lag), t, g)
		}
	}

	ready := 0.0
	if b.Ready() == nil {
		ready = 1
	}
	gauge(descReady, ready)
	counter(descRegisterRefused, float64(b.reg.refusals.Load()))
	role := b.Role()
	for _, r := range []Role{RoleMaster, RoleSlave, RoleFenced} {
		v := 0.0
		if r == role {
			v = 1
		}
		gauge(descRole, v, r.String())
	}
	c.collectReplication(gauge, counter)
	c.collectDelay(gauge, counter)
	c.collectDedup(gauge, counter)

	if b.txn != nil {
		st := b.txn.Stats()
		gauge(descHalf, float64(st.Pending))
		counter(descTxnChecks, float64(st.ChecksSent), "sent")
		counter(descTxnChecks, float64(st.ChecksNoProd), "no_producer")
		counter(descTxnEnds, float64(st.Commits), "commit")
		counter(descTxnEnds, float64(st.Rollbacks), "rollback")
		counter(descTxnEnds, float64(st.Discards), "discard")
	}
	for _, t := range b.pop.Totals() {
		gauge(descPopInFlight, float64(t.InFlight), t.Topic, t.Group)
		counter(descPopAcks, float64(t.Acks), t.Topic, t.Group)
		counter(descPopRedeliveries, float64(t.Redeliveries), t.Topic, t.Group)
		counter(descPopDLQ, float64(t.DLQ), t.Topic, t.Group)
	}
}

func (c *collector) collectReplication(gauge, counter func(*prometheus.Desc, float64, ...string)) {
	info := c.b.repl.Info()
	if ct := info.Controller; ct != nil {
		counter(descRoleChanges, float64(ct.RoleChanges))
		gauge(descLeaseRemaining, ct.LeaseRemaining.Seconds())
	}
	if c.b.Role() == RoleSlave {
		gauge(descReplLag, float64(max(0, info.LagBytes)), strconv.FormatInt(c.b.brokerID(), 10))
		return
	}
	for _, s := range info.Slaves {
		gauge(descReplLag, float64(max(0, s.LagBytes)), strconv.FormatInt(s.BrokerID, 10))
	}
	gauge(descReplInSync, float64(info.InSyncSlaves))
}

// collectDelay reads the delay levels' offsets (not their next due time,
// which would read the store) and the timing wheel's status.
func (c *collector) collectDelay(gauge, counter func(*prometheus.Desc, float64, ...string)) {
	d := c.b.delay.Load()
	if d == nil {
		return
	}
	for _, l := range d.Levels() {
		gauge(descDelayPending, float64(l.Pending), strconv.Itoa(l.Level))
	}
	if e := d.Engine(); e != nil {
		st := e.Status()
		gauge(descTimerPending, float64(st.Pending))
		counter(descTimerDelivered, float64(st.Delivered))
	}
}
