package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/residual"
)

// tracedServer is newTestServer's server over policies with a tracer
// provider that records every span (sampler: nil is always on).
func tracedServer(t testing.TB, policies string, sampler sdktrace.Sampler) (*served, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(rec)}
	if sampler != nil {
		opts = append(opts, sdktrace.WithSampler(sampler))
	}
	s, _ := serveText(t, policies, serveConfig{server: Options{TracerProvider: sdktrace.NewTracerProvider(opts...)}})
	return s, rec
}

// attrs is a span's attributes by key; a list joined by commas.
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		switch kv.Value.Type() {
		case attribute.STRINGSLICE:
			m[string(kv.Key)] = strings.Join(kv.Value.AsStringSlice(), ",")
		case attribute.STRING:
			m[string(kv.Key)] = kv.Value.AsString()
		case attribute.INT64:
			m[string(kv.Key)] = strconv.FormatInt(kv.Value.AsInt64(), 10)
		default:
			m[string(kv.Key)] = fmt.Sprint(kv.Value.AsInterface())
		}
	}
	return m
}

// onlySpan is the one span ended since the recorder's previous call.
func onlySpan(t *testing.T, rec *tracetest.SpanRecorder, seen *int) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := rec.Ended()[*seen:]
	*seen += len(spans)
	if len(spans) != 1 {
		t.Fatalf("%d spans ended, want 1", len(spans))
	}
	return spans[0]
}

// Each SubjectAccessReview is one kcedar.authorize span carrying what lets
// an operator find it and what decided it.
func TestTraceAuthorize(t *testing.T) {
	s, rec := tracedServer(t, basePolicies, nil)
	seen := 0
	for _, tc := range []struct {
		body string
		want map[string]string
	}{
		{sarJSON("alice", []string{"dev", "system:authenticated"}, "list", "", "pods", "team-a", ""), map[string]string{
			"kcedar.decision": "Allow", "kcedar.policy_ids": "alice-pods", "user.name": "alice", "kcedar.user.groups_count": "2",
			"kcedar.verb": "list", "kcedar.resource": "pods", "k8s.namespace.name": "team-a", "kcedar.candidates": "1", "kcedar.conditions": "0",
			"http.response.status_code": "200"}},
		{sarJSON("alice", nil, "get", "", "secrets", "team-a", "s1"), map[string]string{
			"kcedar.decision": "Deny", "kcedar.policy_ids": "no-secrets", "kcedar.name": "s1", "kcedar.resource": "secrets"}},
		{sarJSON("bob", nil, "get", "", "pods", "team-a", "p"), map[string]string{
			"kcedar.decision": "NoOpinion", "kcedar.policy_ids": "", "kcedar.candidates": "0"}},
		{`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"alice","nonResourceAttributes":{"verb":"get","path":"/healthz"}}}`,
			map[string]string{"url.path": "/healthz", "kcedar.verb": "get", "kcedar.decision": "NoOpinion"}},
	} {
		post(t, s, "/v1/authorize", tc.body)
		span := onlySpan(t, rec, &seen)
		if span.Name() != "kcedar.authorize" || span.SpanKind().String() != "server" {
			t.Errorf("span %q kind %v, want kcedar.authorize, server", span.Name(), span.SpanKind())
		}
		got := attrs(span)
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q (all: %v)", tc.body, k, got[k], v, got)
			}
		}
		if got["kcedar.cache"] == "" {
			t.Errorf("%s: no kcedar.cache attribute: %v", tc.body, got)
		}
	}
}

// A conditional allow is cached: the second identical review is a hit that
// evaluates no candidate.
func TestTraceAuthorizeCache(t *testing.T) {
	s, rec := kepTracedServer(t, nil)
	c := kepCases(t)["create-pod-n1"]
	sar := kepSAR(&c.Request, kepVerbs(&c.Request)[0], kepAllTypes)
	seen := 0
	var got []map[string]string
	for range 2 {
		kepAuthorize(t, s, sar)
		got = append(got, attrs(onlySpan(t, rec, &seen)))
	}
	if got[0]["kcedar.cache"] != "miss" || got[0]["kcedar.candidates"] == "0" || got[0]["kcedar.decision"] != "Conditional" || got[0]["kcedar.conditions"] == "0" {
		t.Errorf("first review: %v, want a miss deciding Conditional from candidates, with conditions", got[0])
	}
	if got[1]["kcedar.cache"] != "hit" || got[1]["kcedar.candidates"] != "0" || got[1]["kcedar.decision"] != "Conditional" {
		t.Errorf("second review: %v, want a hit evaluating no candidate", got[1])
	}
}

// kepTracedServer is kepServer with a tracer provider that records every span.
func kepTracedServer(t testing.TB, keys *residual.Keyring) (*served, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	return serve(t, serveConfig{schema: embeddedschema.Schema(t), paths: []string{filepath.Join(kepTestdata, "policies.cedar")}, keys: keys,
		server: Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}}), rec
}

// The conditions callback is a kcedar.conditions span with the conditions
// it evaluated and the decision they gave.
func TestTraceConditions(t *testing.T) {
	s, rec := kepTracedServer(t, nil)
	for _, name := range []string{"create-pod-n1", "create-pod-n2"} {
		c := kepCases(t)[name]
		_, raw := kepConditional(t, s, c)
		seen := len(rec.Ended())
		typ, _ := kepUpstreamReview(t, s, raw, c)
		span := onlySpan(t, rec, &seen)
		got := attrs(span)
		if span.Name() != "kcedar.conditions" || got["kcedar.decision"] != string(typ) || got["kcedar.conditions"] == "0" || got["kcedar.conditions"] == "" {
			t.Errorf("%s: span %q %v, want kcedar.conditions deciding %s over its conditions", name, span.Name(), got, typ)
		}
		if got["kcedar.operation"] != "CREATE" || got["kcedar.resource"] != "pods" || got["user.name"] != c.User {
			t.Errorf("%s: the admission request's attributes are missing: %v", name, got)
		}
	}
}

// A call carrying W3C trace context is a child of the caller's span (as
// kube-apiserver's admission webhook calls are); a malformed traceparent is
// ignored: the span starts its own trace and the answer is the same.
func TestTraceJoinsCallerTrace(t *testing.T) {
	s, rec := tracedServer(t, basePolicies, nil)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	seen := 0
	for _, tc := range []struct {
		traceparent string
		joins       bool
	}{
		{"00-" + traceID + "-" + parentID + "-01", true},
		{"00-" + traceID + "-" + parentID + "-zz", false},
		{strings.Repeat("f", 4096), false},
		{"00-00000000000000000000000000000000-" + parentID + "-01", false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/authorize", strings.NewReader(sarJSON("alice", nil, "list", "", "pods", "team-a", "")))
		r.Header.Set("traceparent", tc.traceparent)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"allowed":true`) {
			t.Fatalf("traceparent %.40q: answer %d %s", tc.traceparent, w.Code, w.Body)
		}
		span := onlySpan(t, rec, &seen)
		joined := span.Parent().IsRemote() && span.SpanContext().TraceID().String() == traceID && span.Parent().SpanID().String() == parentID
		if joined != tc.joins {
			t.Errorf("traceparent %.40q: joined the caller's trace: %v, want %v (trace %s, parent %s)", tc.traceparent, joined, tc.joins,
				span.SpanContext().TraceID(), span.Parent().SpanID())
		}
	}
}

// Sampled out, a review records nothing and answers the same.
func TestTraceSampledOut(t *testing.T) {
	s, rec := tracedServer(t, basePolicies, sdktrace.NeverSample())
	_, st := post(t, s, "/v1/authorize", sarJSON("alice", nil, "list", "", "pods", "team-a", ""))
	if !st.Allowed {
		t.Fatalf("not allowed: %+v", st)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded with a sampler that keeps none", n)
	}
}

// Every webhook endpoint has its span name; unknown ones follow the rule.
func TestSpanNamesOfEndpoints(t *testing.T) {
	s, rec := kepTracedServer(t, nil)
	c := kepCases(t)["create-pod-n1"]
	body := kepMarshal(t, map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": c.Raw})
	if w := kepPost(s, "/v1/admit", body); w.Code != http.StatusOK {
		t.Fatalf("/v1/admit: %d %s", w.Code, w.Body)
	}
	ended := rec.Ended()
	names := make([]string, len(ended))
	for i, sp := range ended {
		names[i] = sp.Name()
	}
	if !slices.Contains(names, "kcedar.admit") {
		t.Fatalf("spans %v, want kcedar.admit", names)
	}
	got := attrs(ended[len(ended)-1])
	if got["kcedar.decision"] == "" || got["kcedar.operation"] != "CREATE" {
		t.Errorf("kcedar.admit attributes %v", got)
	}
}
