package broker

import (
	"bytes"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bolide-mq/bolide/internal/errcode"
	"golang.org/x/sys/unix"
)

// Traffic counters and rates (RocketMQ's brokerStatus putTps, getTps and
// totals). Every protocol's sends and pulls (and POP receives) pass through
// the core's Send, SendRetry, Pull and Pop, which add to four atomic
// counters; the housekeeping loop samples them every trafficSampleEvery,
// and a rate is the difference from the oldest sample within the last
// minute (or from the start, when the broker is younger).

const (
	trafficSampleEvery = 10 * time.Second
	trafficWindow      = time.Minute
	// trafficSamples covers the window plus the sample being replaced.
	trafficSamples = int(trafficWindow/trafficSampleEvery) + 1
)

type trafficSample struct {
	at                           time.Time
	putMsgs, getMsgs, putB, getB int64
}

// traffic holds the counters and a ring of samples.
type traffic struct {
	putMsgs, getMsgs   atomic.Int64
	putBytes, getBytes atomic.Int64

	mu   sync.Mutex
	ring [trafficSamples]trafficSample
	n    int // samples taken (the ring holds the last min(n, len) of them)
}

func (t *traffic) init(start time.Time) {
	t.mu.Lock()
	t.ring[0] = trafficSample{at: start}
	t.n = 1
	t.mu.Unlock()
}

func (t *traffic) put(msgs, bytes int) {
	t.putMsgs.Add(int64(msgs))
	t.putBytes.Add(int64(bytes))
}

func (t *traffic) got(msgs, bytes int) {
	t.getMsgs.Add(int64(msgs))
	t.getBytes.Add(int64(bytes))
}

func (t *traffic) now(at time.Time) trafficSample {
	return trafficSample{at: at, putMsgs: t.putMsgs.Load(), getMsgs: t.getMsgs.Load(),
		putB: t.putBytes.Load(), getB: t.getBytes.Load()}
}

// sample records the counters (the housekeeping loop calls it).
func (t *traffic) sample(at time.Time) {
	s := t.now(at)
	t.mu.Lock()
	t.ring[t.n%trafficSamples] = s
	t.n++
	t.mu.Unlock()
}

// rates returns the counters now and the messages per second stored and
// delivered since the oldest sample no older than the window.
func (t *traffic) rates(at time.Time) (cur trafficSample, putTPS, getTPS float64) {
	cur = t.now(at)
	t.mu.Lock()
	base := cur
	for i := 0; i < min(t.n, trafficSamples); i++ {
		s := t.ring[i]
		if at.Sub(s.at) <= trafficWindow && s.at.Before(base.at) {
			base = s
		}
	}
	t.mu.Unlock()
	secs := cur.at.Sub(base.at).Seconds()
	if secs <= 0 {
		return cur, 0, 0
	}
	return cur, float64(cur.putMsgs-base.putMsgs) / secs, float64(cur.getMsgs-base.getMsgs) / secs
}

// Runtime is a broker's running figures.
type Runtime struct {
	Info BrokerInfo
	// Permission is brokerPermission (6 read and write, 4 read only).
	Permission int32
	// Messages and bytes stored (body bytes) and delivered to consumers
	// (stored-record bytes) since the start, and messages per second over
	// the last minute.
	PutMessages, GetMessages, PutBytes, GetBytes int64
	PutTPS, GetTPS                               float64
	// DiskTotal and DiskFree are the bytes of the file system holding the
	// store (free: available to unprivileged users, as df).
	DiskTotal, DiskFree int64
	// Counts.
	Topics, Queues, Groups                   int
	ConsumerConnections, ProducerConnections int
	// The process: Go heap objects' bytes, resident set size (0 where
	// /proc is not there), goroutines.
	HeapBytes, RSSBytes int64
	Goroutines          int
	// Extra holds further figures by name.
	Extra map[string]string
}

// Runtime reports the broker's running figures (cheap: counters, one
// statfs, the topic and client tables, runtime/metrics and
// /proc/self/statm).
func (b *Broker) Runtime() Runtime {
	now := time.Now()
	cur, putTPS, getTPS := b.traffic.rates(now)
	rt := Runtime{
		Info: b.Info(), Permission: b.brokerPerm.Load(),
		PutMessages: cur.putMsgs, GetMessages: cur.getMsgs, PutBytes: cur.putB, GetBytes: cur.getB,
		PutTPS: putTPS, GetTPS: getTPS, Goroutines: runtime.NumGoroutine(),
	}
	var st unix.Statfs_t
	if err := unix.Statfs(b.store.CommitLog().Options().Dir, &st); err == nil {
		rt.DiskTotal = int64(st.Blocks) * int64(st.Bsize)
		rt.DiskFree = int64(st.Bavail) * int64(st.Bsize)
	}
	for _, tc := range b.topics.all() {
		rt.Topics++
		rt.Queues += int(max(tc.ReadQueueNums, tc.WriteQueueNums))
	}
	groups := make(map[string]bool)
	for _, g := range b.offsets.Groups() {
		groups[g] = true
	}
	for _, g := range b.clients.groupList() {
		groups[g.Group] = true
	}
	declared, _ := b.SubscriptionGroups()
	for _, g := range declared {
		groups[g.GroupName] = true
	}
	rt.Groups = len(groups)
	rt.ConsumerConnections, rt.ProducerConnections = b.clients.connectionCounts()
	rt.HeapBytes = heapBytes()
	rt.RSSBytes = rssBytes()

	clog := b.store.CommitLog()
	info := rt.Info.Replication
	rt.Extra = map[string]string{
		"flushMode":            clog.Options().FlushMode.String(),
		"flushBehindBytes":     strconv.FormatInt(max(0, clog.MaxOffset()-clog.FlushedOffset()), 10),
		"replicationMode":      info.Mode,
		"epoch":                strconv.FormatInt(b.Epoch(), 10),
		"dispatchErrors":       strconv.FormatInt(b.store.DispatchErrors(), 10),
		"registerRefusedTotal": strconv.FormatInt(b.reg.refusals.Load(), 10),
		"bootTimestamp":        strconv.FormatInt(b.started.UnixMilli(), 10),
	}
	if b.Role() != RoleSlave {
		rt.Extra["inSyncSlaves"] = strconv.Itoa(int(info.InSyncSlaves))
		rt.Extra["slaves"] = strconv.Itoa(len(info.Slaves))
	} else {
		rt.Extra["slaveLagBytes"] = strconv.FormatInt(max(0, info.LagBytes), 10)
	}
	if err := b.Ready(); err != nil {
		rt.Extra["notReady"] = err.Error()
	}
	return rt
}

// heapBytes is the bytes of live and not yet swept heap objects.
func heapBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// rssBytes reads the resident set size from /proc/self/statm (0 where
// there is none).
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := bytes.Fields(data)
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(string(fields[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// connectionCounts counts the connected clients that are consumers (in a
// group) and producers.
func (r *clientRegistry) connectionCounts() (consumers, producers int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.clients {
		if len(c.groups) > 0 {
			consumers++
		}
		if len(c.producer) > 0 {
			producers++
		}
	}
	return consumers, producers
}

// Permission returns brokerPermission in effect.
func (b *Broker) Permission() int32 { return b.brokerPerm.Load() }

// MaxMessageSize returns the largest message body accepted now
// (maxMessageSize, which UpdateConfig may change while the broker runs):
// front ends read it per request, never once at start.
func (b *Broker) MaxMessageSize() int { return int(b.maxMessageSize.Load()) }

// checkBrokerWritable refuses a send while the broker's write permission
// is taken away.
func (b *Broker) checkBrokerWritable() error {
	if p := b.brokerPerm.Load(); p&PermWrite == 0 {
		return errcode.Errorf(errcode.NoPermission,
			"broker %s is not writable: its write permission was taken away (brokerPermission %d, draining); send to another broker of the topic, or give it back with 'bolide broker write-perm %s on'",
			b.opts.BrokerName, p, b.opts.BrokerName)
	}
	return nil
}

// maskTopics gives the topics registered with the NameServers the
// broker's permission: while its write permission is taken away, no topic
// is writable on it (RocketMQ: topic perm & broker perm), so producers
// route elsewhere.
func (b *Broker) maskTopics(topics []TopicConfig) []TopicConfig {
	p := b.brokerPerm.Load()
	if p&PermWrite != 0 {
		return topics
	}
	for i := range topics {
		topics[i].Perm &= p | PermInherit | PermPriority
	}
	return topics
}
