//go:build e2e

package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
)

// otlpReceiver is an OTLP/gRPC trace receiver run in the test process: what
// kube-apiserver and kcedar export lands here.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	addr  string
	mu    sync.Mutex
	spans []receivedSpan
}

// receivedSpan is one exported span, flattened.
type receivedSpan struct {
	service, name           string
	traceID, spanID, parent string
	attrs                   map[string]string
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: ln.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return r
}

// Export implements the OTLP trace service.
func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		service := otlpAttrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, receivedSpan{service: service, name: s.Name, traceID: hex.EncodeToString(s.TraceId),
					spanID: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId), attrs: otlpAttrs(s.Attributes)})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func otlpAttrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_ArrayValue:
			var items []string
			for _, e := range v.ArrayValue.Values {
				items = append(items, e.GetStringValue())
			}
			m[kv.Key] = strings.Join(items, ",")
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		}
	}
	return m
}

func (r *otlpReceiver) received() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// TestTracing: kube-apiserver traces with its own TracingConfiguration and
// kcedar with OTEL_* variables, both to one OTLP receiver. A policy
// object's write is one trace: kcedar's kcedar.validate_policy span is the
// child of a kube-apiserver span (kube-apiserver sends traceparent to
// admission webhooks). The authorization webhook gets no trace context
// from kube-apiserver v1.37, so kcedar.authorize spans are roots of their
// own, found by their attributes: the user, the verb, the decision and
// the deciding policy.
func TestTracing(t *testing.T) {
	recv := startOTLPReceiver(t)
	tracingConfig := fmt.Sprintf("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: %s\nsamplingRatePerMillion: 1000000\n", recv.addr)
	env := startPolicyObjects(t, poOptions{
		direct:         true,
		apiserverFiles: map[string]string{"tracing.yaml": tracingConfig},
		apiserverFlags: []string{"--tracing-config-file=" + "{{.Dir}}/tracing.yaml"},
		kcedarEnv: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + recv.addr, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
			"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=kcedar-e2e"},
	})
	ctx := t.Context()
	createPolicy(t, env.cluster, policyobjects.KindCluster, "", "alice-pods",
		`@id("alice-lists-pods") permit(principal == k8s::User::"alice", action == k8s::Action::"list", resource is core::pods);`)
	within(t, 10*time.Second, "alice may list pods", func() bool {
		_, err := env.alice.CoreV1().Pods("a").List(ctx, metav1.ListOptions{})
		return err == nil
	})

	var validate, authorize *receivedSpan
	var apiserverSpan string
	within(t, 30*time.Second, "kcedar's spans exported", func() bool {
		spans := recv.received()
		byID := map[string]receivedSpan{}
		for _, s := range spans {
			byID[s.spanID] = s
		}
		validate, authorize, apiserverSpan = nil, nil, ""
		for i, s := range spans {
			switch {
			case s.service != "kcedar-e2e":
			case s.name == "kcedar.validate_policy" && s.attrs["kcedar.policy_object"] != "" && strings.Contains(s.attrs["kcedar.policy_ids"], "alice-lists-pods"):
				if p, ok := byID[s.parent]; ok && p.service != "kcedar-e2e" && p.traceID == s.traceID {
					validate, apiserverSpan = &spans[i], p.service+" "+p.name
				}
			case s.name == "kcedar.authorize" && s.attrs["user.name"] == "alice" && s.attrs["kcedar.decision"] == "Allow":
				authorize = &spans[i]
			}
		}
		return validate != nil && authorize != nil
	})
	t.Logf("kcedar.validate_policy in trace %s, child of kube-apiserver's %q: %v", validate.traceID, apiserverSpan, validate.attrs)
	if validate.attrs["kcedar.decision"] != "Allow" || validate.attrs["kcedar.operation"] != "CREATE" || validate.attrs["user.name"] != "admin" {
		t.Errorf("kcedar.validate_policy attributes: %v", validate.attrs)
	}
	t.Logf("kcedar.authorize (trace %s, parent %q): %v", authorize.traceID, authorize.parent, authorize.attrs)
	want := map[string]string{"kcedar.policy_ids": "alice-lists-pods", "kcedar.verb": "list", "kcedar.resource": "pods", "k8s.namespace.name": "a"}
	for k, v := range want {
		if authorize.attrs[k] != v {
			t.Errorf("kcedar.authorize %s = %q, want %q", k, authorize.attrs[k], v)
		}
	}
	if authorize.attrs["kcedar.cache"] == "" || authorize.attrs["kcedar.candidates"] == "" {
		t.Errorf("kcedar.authorize without the engine's stats: %v", authorize.attrs)
	}
	if authorize.parent != "" {
		t.Errorf("kcedar.authorize has a parent span %s: kube-apiserver v1.37 sends no trace context to the authorization webhook; update docs/deploy.md", authorize.parent)
	}
}
