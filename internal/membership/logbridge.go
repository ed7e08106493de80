package membership

import (
	"bytes"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logBridge routes memberlist's log.Logger output into zap. memberlist
// writes lines such as "[WARN] memberlist: Was able to connect to ..."; the
// bracketed level becomes the zap level and the rest the message. After
// the node is closed the bridge drops lines, so that a memberlist goroutine
// still winding down cannot write to a logger its owner has let go of.
//
// memberlist logs one ERROR line for every packet or stream it refuses
// (bad type, undecodable, wrong label or key, bad checksum), so anyone who
// can reach the gossip port could fill the log. Those lines (badLines) are
// counted by kind (BadPackets, and bolide_gossip_bad_packets_total) and
// written as warnings, at most one per kind every badLogEvery, the next
// one saying how many were suppressed in between.
type logBridge struct {
	lg     *zap.Logger
	closed atomic.Bool
	now    func() time.Time // tests move the clock

	bad [numBadKinds]atomic.Int64 // this node's bad packets by kind

	// mu protects last and suppressed.
	mu         sync.Mutex
	last       [numBadKinds]time.Time // when a line of the kind was last written
	suppressed [numBadKinds]int64     // lines of the kind dropped since
}

// badLogEvery is how often a line about bad packets of one kind is
// written at most.
const badLogEvery = 10 * time.Second

func newLogBridge(lg *zap.Logger) *logBridge { return &logBridge{lg: lg, now: time.Now} }

func (b *logBridge) stdLogger() *log.Logger { return log.New(b, "", 0) }

// closedConn ends the error of a write on a socket memberlist closed.
var closedConn = []byte("use of closed network connection")

var levelTags = []struct {
	tag   []byte
	level zapcore.Level
}{
	{[]byte("[DEBUG]"), zapcore.DebugLevel},
	{[]byte("[INFO]"), zapcore.InfoLevel},
	{[]byte("[WARN]"), zapcore.WarnLevel},
	{[]byte("[ERR]"), zapcore.ErrorLevel},
	{[]byte("[ERROR]"), zapcore.ErrorLevel},
}

// Write implements io.Writer; log.Logger calls it once per line.
func (b *logBridge) Write(p []byte) (int, error) {
	if b.closed.Load() {
		return len(p), nil
	}
	line := bytes.TrimSpace(p)
	level := zapcore.InfoLevel
	for _, t := range levelTags {
		if bytes.HasPrefix(line, t.tag) {
			level = t.level
			line = bytes.TrimSpace(line[len(t.tag):])
			break
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	if bytes.Contains(line, closedConn) {
		// A send racing the node's own shutdown: nothing is wrong.
		level = zapcore.DebugLevel
	}
	if k, ok := badKindOf(line); ok {
		b.badLine(k, line)
		return len(p), nil
	}
	if ce := b.lg.Check(level, string(line)); ce != nil {
		ce.Write()
	}
	return len(p), nil
}

// badLine counts a bad packet of kind k and writes its line unless one of
// the kind was written less than badLogEvery ago.
func (b *logBridge) badLine(k badKind, line []byte) {
	b.bad[k].Add(1)
	badPackets[k].Add(1)
	now := b.now()
	b.mu.Lock()
	if last := b.last[k]; !last.IsZero() && now.Sub(last) < badLogEvery {
		b.suppressed[k]++
		b.mu.Unlock()
		return
	}
	suppressed := b.suppressed[k]
	b.last[k], b.suppressed[k] = now, 0
	b.mu.Unlock()
	if ce := b.lg.Check(zapcore.WarnLevel, string(line)); ce != nil {
		ce.Write(zap.String("badPacket", badKinds[k].name), zap.Int64("suppressed", suppressed),
			zap.Duration("logEvery", badLogEvery))
	}
}

// BadPackets returns how many packets and streams of each kind this node
// refused (kinds as in bolide_gossip_bad_packets_total; kinds with none
// are left out).
func (n *Node) BadPackets() map[string]int64 {
	out := make(map[string]int64)
	for k := range n.bridge.bad {
		if v := n.bridge.bad[k].Load(); v > 0 {
			out[badKinds[k].name] = v
		}
	}
	return out
}
