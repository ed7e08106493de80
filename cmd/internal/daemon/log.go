package daemon

import (
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger builds a daemon's logger writing to stderr: level is debug,
// info, warn or error; format is "json" (one object a line, for log
// shippers) or "console" (tab-separated, for people).
func NewLogger(level, format string) (*zap.Logger, error) {
	return newLogger(os.Stderr, level, format)
}

func newLogger(w io.Writer, level, format string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: must be debug, info, warn or error", level)
	}
	var enc zapcore.Encoder
	switch format {
	case "json":
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("log format %q: must be json or console", format)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.DPanicLevel)), nil
}
