package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/kcedar/kcedar/internal/lib/tracing"
	"github.com/kcedar/kcedar/internal/lib/version"
)

// startTracing builds the tracer provider the OTEL_* environment variables
// ask for (docs/deploy.md, "Tracing"); nil when they ask for none, the
// default. A variable kcedar cannot honour (another exporter, another
// protocol) is an error at startup, not a silent loss of traces.
func startTracing(ctx context.Context, logger *slog.Logger) (*tracing.Provider, error) {
	tp, err := tracing.FromEnv(ctx, os.Getenv, version.Get().Version)
	if err != nil {
		return nil, &exitError{2, err}
	}
	if tp != nil {
		endpoint := tp.Config.Endpoint
		if endpoint == "" {
			endpoint = "the exporter's default (localhost)"
		}
		logger.Info("tracing: exporting spans over OTLP", "protocol", tp.Config.Protocol, "endpoint", endpoint,
			"sampler", os.Getenv("OTEL_TRACES_SAMPLER"), "sampler_arg", os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
	}
	return tp, nil
}

// flushTraces exports the spans still buffered, within timeout, once the
// server has drained: the last requests' spans are not lost on shutdown.
func flushTraces(tp *tracing.Provider, logger *slog.Logger, timeout time.Duration) {
	if tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		logger.Warn("tracing: flushing the last spans failed", "err", err)
	}
}
