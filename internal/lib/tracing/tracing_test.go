package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// What turns tracing on and off, and what is refused, as docs/deploy.md
// says.
func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		enabled  bool
		protocol string
		err      string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, enabled: true, protocol: ProtocolHTTPProtobuf},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true, protocol: ProtocolGRPC},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, enabled: true, protocol: ProtocolHTTPProtobuf},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, enabled: true, protocol: ProtocolGRPC},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTLP only"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "not supported"},
	} {
		c, err := ConfigFromEnv(envOf(tc.env))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one saying %q", tc.env, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case c.Enabled != tc.enabled || (tc.enabled && c.Protocol != tc.protocol):
			t.Errorf("%v: enabled %v protocol %q, want %v %q", tc.env, c.Enabled, c.Protocol, tc.enabled, tc.protocol)
		}
	}
}

// Off, FromEnv builds nothing and the nil provider is safe to use.
func TestFromEnvOff(t *testing.T) {
	p, err := FromEnv(context.Background(), envOf(nil), "v0")
	if err != nil || p != nil {
		t.Fatalf("FromEnv with no variable: %v, %v; want nil, nil", p, err)
	}
	if p.TracerProvider() != nil || p.Shutdown(context.Background()) != nil {
		t.Error("a nil provider traces or fails to shut down")
	}
}

// On (OTLP over HTTP/protobuf, the default protocol), a span ended while
// serving reaches the collector by Shutdown at the latest: the drain.
func TestFromEnvOnFlushesOnShutdown(t *testing.T) {
	var mu sync.Mutex
	var posts []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(body))
		mu.Unlock()
	}))
	defer collector.Close()
	// The exporter and the SDK read the process's environment themselves.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "kcedar-test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	p, err := FromEnv(context.Background(), os.Getenv, "v0")
	if err != nil || p == nil {
		t.Fatalf("FromEnv: %v, %v", p, err)
	}
	_, span := p.TracerProvider().Tracer("t").Start(context.Background(), "kcedar.authorize")
	if !span.IsRecording() {
		t.Fatal("the default sampler does not record a root span")
	}
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 1 || !strings.HasPrefix(posts[0], "/v1/traces application/x-protobuf") ||
		!strings.Contains(posts[0], "kcedar.authorize") || !strings.Contains(posts[0], "kcedar-test") {
		t.Errorf("the collector got %q, want one OTLP/HTTP export of the span, service kcedar-test", posts)
	}
}

// Extract takes a valid traceparent and ignores a malformed one.
func TestExtract(t *testing.T) {
	h := http.Header{}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if sc := spanContextOf(Extract(context.Background(), h)); !sc.IsValid() || !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("valid traceparent: %v", sc)
	}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01")
	if sc := spanContextOf(Extract(context.Background(), h)); sc.IsValid() {
		t.Errorf("a zero parent span id was taken: %v", sc)
	}
}

func TestSpanNames(t *testing.T) {
	for endpoint, want := range map[string]string{"authorize": SpanAuthorize, "conditions": SpanConditions, "admit": SpanAdmit,
		"validate-policy": SpanValidatePolicy, "resource-access-review": "kcedar.resource_access_review"} {
		if got := SpanName(endpoint); got != want {
			t.Errorf("%s: %q, want %q", endpoint, got, want)
		}
	}
}

func spanContextOf(ctx context.Context) trace.SpanContext { return trace.SpanContextFromContext(ctx) }
