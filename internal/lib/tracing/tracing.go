package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of kcedar's spans unless OTEL_SERVICE_NAME
// or OTEL_RESOURCE_ATTRIBUTES name another.
const ServiceName = "kcedar"

// The protocols OTEL_EXPORTER_OTLP_PROTOCOL may name.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// Config is what the OTEL_* variables ask of kcedar's tracing; the
// exporters and the SDK read the rest (endpoint, headers, TLS, timeouts,
// sampler, batching) themselves.
type Config struct {
	// Enabled: an exporter is configured; otherwise kcedar traces nothing.
	Enabled bool
	// Protocol is the OTLP protocol: ProtocolGRPC or ProtocolHTTPProtobuf.
	Protocol string
	// Endpoint is the endpoint variable's value, for the startup log ("":
	// the exporter's default, localhost).
	Endpoint string
}

// ConfigFromEnv reads the OTEL_* variables through getenv (os.Getenv but
// in tests: the exporters and the SDK read the process's environment). Tracing is on
// when OTEL_TRACES_EXPORTER is "otlp", or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off. Any
// other exporter or protocol is an error: kcedar exports OTLP only, over
// gRPC or HTTP/protobuf (the default, as the specification says).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	c.Endpoint = firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "":
		c.Enabled = c.Endpoint != ""
	case "otlp":
		c.Enabled = true
	case "none":
		return c, nil
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: kcedar exports traces over OTLP only (otlp or none)", exp)
	}
	c.Protocol = firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolHTTPProtobuf
	case ProtocolGRPC, ProtocolHTTPProtobuf:
	default:
		return c, fmt.Errorf("OTLP protocol %q is not supported: use %s or %s", c.Protocol, ProtocolGRPC, ProtocolHTTPProtobuf)
	}
	return c, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// Provider is kcedar's tracer provider while tracing is on. A nil *Provider
// is tracing off: its TracerProvider is nil and Shutdown does nothing.
type Provider struct {
	sdk    *sdktrace.TracerProvider
	Config Config
}

// FromEnv builds the provider the OTEL_* variables ask for (ConfigFromEnv):
// an OTLP exporter behind a batching span processor, the sampler of
// OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (parentbased_always_on by
// default), and a resource of service.name kcedar and service.version
// version, overridden by OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
// It returns nil when tracing is off. The exporter connects lazily: an
// unreachable collector loses spans, never fails a request.
func FromEnv(ctx context.Context, getenv func(string) string, version string) (*Provider, error) {
	cfg, err := ConfigFromEnv(getenv)
	if err != nil || !cfg.Enabled {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if cfg.Protocol == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (%s): %w", cfg.Protocol, err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, errors.Join(fmt.Errorf("trace resource: %w", err), exp.Shutdown(ctx))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{sdk: tp, Config: cfg}, nil
}

// TracerProvider is the provider to trace with; nil when tracing is off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.sdk
}

// Shutdown exports the spans still buffered and stops the exporter: the
// drain of a graceful shutdown. ctx bounds how long it may take.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// propagator reads W3C trace context (traceparent, tracestate), which
// kube-apiserver sends with its admission webhook calls.
var propagator = propagation.TraceContext{}

// Extract returns ctx with the remote span context of h's traceparent, if
// it carries a valid one; otherwise ctx.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}
