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

// CheckLogLevel accepts the levels NewLogger takes.
func CheckLogLevel(level string) error {
	if _, err := zapcore.ParseLevel(level); err != nil {
		return fmt.Errorf("log level %q: must be debug, info, warn or error", level)
	}
	return nil
}

// CheckLogFormat accepts the formats NewLogger takes.
func CheckLogFormat(format string) error {
	if format == "json" || format == "console" {
		return nil
	}
	return fmt.Errorf("log format %q: must be json or console", format)
}

func newLogger(w io.Writer, level, format string) (*zap.Logger, error) {
	if err := CheckLogLevel(level); err != nil {
		return nil, err
	}
	if err := CheckLogFormat(format); err != nil {
		return nil, err
	}
	lvl, _ := zapcore.ParseLevel(level)
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
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.DPanicLevel)), nil
}
