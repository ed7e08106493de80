package membership

import (
	"bytes"
	"log"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logBridge routes memberlist's log.Logger output into zap. memberlist
// writes lines such as "[WARN] memberlist: Was able to connect to ..."; the
// bracketed level becomes the zap level and the rest the message. After
// the node is closed the bridge drops lines, so that a memberlist goroutine
// still winding down cannot write to a logger its owner has let go of.
type logBridge struct {
	lg     *zap.Logger
	closed atomic.Bool
}

func newLogBridge(lg *zap.Logger) *logBridge { return &logBridge{lg: lg} }

func (b *logBridge) stdLogger() *log.Logger { return log.New(b, "", 0) }

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
	if ce := b.lg.Check(level, string(line)); ce != nil {
		ce.Write()
	}
	return len(p), nil
}
