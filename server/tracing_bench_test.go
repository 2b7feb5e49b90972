package server

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discardExporter drops what the batch processor hands it: the benchmark
// measures recording spans, not a collector's network.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkHandlerTracing is BenchmarkHandler1000 with tracing off (no
// provider: the default), on and sampling every review, and on sampling 1%
// (parentbased_traceidratio 0.01, as OTEL_TRACES_SAMPLER would set it).
func BenchmarkHandlerTracing(b *testing.B) {
	provider := func(s sdktrace.Sampler) *sdktrace.TracerProvider {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(s))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return tp
	}
	b.Run("off", func(b *testing.B) { benchHandlerTraced(b, 1000, nil) })
	b.Run("on-100%", func(b *testing.B) {
		benchHandlerTraced(b, 1000, provider(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	})
	b.Run("on-1%", func(b *testing.B) {
		benchHandlerTraced(b, 1000, provider(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))))
	})
}
