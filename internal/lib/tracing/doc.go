// Package tracing sets kcedar's OpenTelemetry tracing up from the standard
// OTEL_* environment variables and reads W3C trace context from incoming
// requests. Tracing is off unless OTEL_TRACES_EXPORTER=otlp or an OTLP
// endpoint variable turns it on; off, FromEnv returns a nil *Provider and
// callers record nothing (not even through a no-op tracer). The spans
// themselves, and their attributes (attributes.go), are recorded by the
// server; the engine only reports its stats.
package tracing
