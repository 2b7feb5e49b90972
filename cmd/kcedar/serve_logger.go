package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/kcedar/kcedar/internal/lib/safetext"
)

// newServeLogger returns kcedar serve's logger, JSON lines on w from level
// up, and routes klog into it: client-go (informers, leader election,
// reflectors) logs through klog, and its lines then come out in the same
// format, at the same level threshold, as kcedar's own. klog's own -v stays
// 0; contextual loggers' V(n) lines are slog level -n, so --log-level=debug
// shows V(1) to V(4).
func newServeLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	// slog's JSON escapes the C0 controls of a request's names; the
	// JSONWriter escapes the rest a terminal acts on (C1, U+202E...).
	logger := slog.New(slog.NewJSONHandler(safetext.NewJSONWriter(w), &slog.HandlerOptions{Level: l}))
	h := logger.Handler()
	klogTarget.Store(&h)
	routeKlog()
	return logger, nil
}

// klogTarget is the handler of the latest serve logger, which klog's lines
// go to.
var klogTarget atomic.Pointer[slog.Handler]

// routeKlog points klog at klogHandler, once: klog.SetSlogLogger is not
// safe while client-go logs, so a later serve logger (a second serve in one
// process, as in tests) swaps klogTarget instead.
var routeKlog = sync.OnceFunc(func() { klog.SetSlogLogger(slog.New(klogHandler{})) })

// klogHandler forwards to klogTarget's handler, with the attributes and
// groups klog's loggers added on the way (applied in order).
type klogHandler struct {
	with []func(slog.Handler) slog.Handler
}

func (h klogHandler) target() slog.Handler {
	t := *klogTarget.Load()
	for _, f := range h.with {
		t = f(t)
	}
	return t
}

func (h klogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.target().Enabled(ctx, l)
}

func (h klogHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h klogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return klogHandler{with: append(slices.Clip(h.with), func(t slog.Handler) slog.Handler { return t.WithAttrs(attrs) })}
}

func (h klogHandler) WithGroup(name string) slog.Handler {
	return klogHandler{with: append(slices.Clip(h.with), func(t slog.Handler) slog.Handler { return t.WithGroup(name) })}
}
