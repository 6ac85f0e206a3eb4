package logging

import (
	"fmt"
	"io"
	"strings"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// ParseLevel maps LOG_LEVEL's values to zap levels. Empty means INFO.
func ParseLevel(s string) (zapcore.Level, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "DEBUG":
		return zapcore.DebugLevel, nil
	case "", "INFO":
		return zapcore.InfoLevel, nil
	case "WARN", "WARNING":
		return zapcore.WarnLevel, nil
	case "ERROR":
		return zapcore.ErrorLevel, nil
	}
	return zapcore.InfoLevel, fmt.Errorf("unknown log level %q: use DEBUG, INFO, WARN or ERROR", s)
}

// New returns a JSON logger at level writing to w. At DEBUG, errors carry stack traces; otherwise
// only a summary, which keeps production logs readable.
func New(level string, w io.Writer) (logr.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return logr.Discard(), err
	}
	stack := zapcore.PanicLevel
	if lvl == zapcore.DebugLevel {
		stack = zapcore.ErrorLevel
	}
	return crzap.New(
		crzap.WriteTo(w),
		crzap.Level(lvl),
		crzap.StacktraceLevel(stack),
		crzap.UseDevMode(false),
		crzap.JSONEncoder(func(c *zapcore.EncoderConfig) {
			c.TimeKey = "ts"
			c.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		}),
	), nil
}
