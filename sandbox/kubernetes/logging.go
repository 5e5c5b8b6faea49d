package kubernetes

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
)

// client-go logs through the logger of the context it is given (klog falls
// back to stderr without one). Every context the provider hands to client-go
// carries a logger that forwards to Options.Logger, so the library never
// prints.

// clientLogger forwards client-go's plain and error records to log at debug
// level (a cut stream is reported there as an error, but for the provider it
// is routine: Close and Release cut streams) and drops its verbose records.
func clientLogger(log *slog.Logger) logr.Logger {
	return logr.FromSlogHandler(debugHandler{log.Handler()})
}

type debugHandler struct{ h slog.Handler }

func (d debugHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo && d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return debugHandler{d.h.WithAttrs(as)}
}

func (d debugHandler) WithGroup(name string) slog.Handler {
	return debugHandler{d.h.WithGroup(name)}
}

// withLogger returns ctx carrying the provider's client-go logger.
func (p *Provider) withLogger(ctx context.Context) context.Context {
	return logr.NewContext(ctx, p.klog)
}

// warningLogger receives the API server's warning headers (deprecations,
// policy warnings) instead of client-go's default, which prints them.
type warningLogger struct{ log *slog.Logger }

func (w warningLogger) HandleWarningHeader(code int, agent, text string) {
	w.log.Warn("kubernetes API warning", "code", code, "agent", agent, "text", text)
}
