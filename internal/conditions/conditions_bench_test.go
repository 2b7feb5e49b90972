package conditions

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/wire"
)

const conditionalPolicies = `
@id("alice-pods-on-n1") @reason("alice may only place pods on n1")
permit(principal == k8s::User::"alice", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
@id("no-privileged-label")
forbid(principal, action in [k8s::Action::"create", k8s::Action::"update"], resource is core::pods)
when { resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("privileged") };
`

// A realistic Pod as the API server sends it in admission.
var benchPod = []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d4b9c6f5-x2v9k","generateName":"web-7d4b9c6f5-","namespace":"team-a","uid":"0b3c4d5e-1111-2222-3333-444455556666","labels":{"app":"web","pod-template-hash":"7d4b9c6f5","team":"a"},"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-11-20T10:00:00Z","prometheus.io/scrape":"true"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d4b9c6f5","uid":"aaaa","controller":true,"blockOwnerDeletion":true}],"creationTimestamp":"2026-11-21T10:00:00Z"},"spec":{"nodeName":"n1","serviceAccountName":"web","restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{"runAsNonRoot":true,"runAsUser":1000,"fsGroup":2000},"containers":[{"name":"web","image":"registry.example.com/web:1.2.3","ports":[{"containerPort":8080,"protocol":"TCP","name":"http"}],"env":[{"name":"MODE","value":"prod"},{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],"resources":{"limits":{"cpu":"500m","memory":"256Mi"},"requests":{"cpu":"100m","memory":"128Mi"}},"readinessProbe":{"httpGet":{"path":"/healthz","port":8080},"periodSeconds":10},"volumeMounts":[{"name":"config","mountPath":"/etc/web","readOnly":true},{"name":"kube-api-access-abcde","mountPath":"/var/run/secrets/kubernetes.io/serviceaccount","readOnly":true}],"securityContext":{"allowPrivilegeEscalation":false,"readOnlyRootFilesystem":true,"capabilities":{"drop":["ALL"]}}},{"name":"sidecar","image":"registry.example.com/proxy:4.5","args":["--port=15001","--admin=15000"],"resources":{"limits":{"cpu":"200m","memory":"64Mi"}}}],"volumes":[{"name":"config","configMap":{"name":"web-config","defaultMode":420}},{"name":"kube-api-access-abcde","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}}]}}],"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priority":0,"enableServiceLinks":true},"status":{"phase":"Pending","qosClass":"Burstable"}}`)

// benchAuthorizer is an engine over 1,000 RBAC-like policies and the
// conditional ones, with caches of cacheSize (0: none).
func benchAuthorizer(b *testing.B, cacheSize int) *Engine {
	s := embeddedschema.Schema(b)
	ps := policytest.Set(b, testgen.RBACLike(1000)+conditionalPolicies)
	return newEngine(s, ps, engine.EngineOptions{CacheSize: cacheSize})
}

// Conditional vs unconditional SubjectAccessReview decisions at 1,000
// policies: create pods for alice needs conditions (signed and encoded);
// the unconditional one is an RBAC-like hit.
func BenchmarkSARUnconditional1000(b *testing.B) {
	az := benchAuthorizer(b, 0)
	req := policytest.ResourceRequest("someone", []string{"team-7", "system:authenticated"}, "get", "", "pods", "", "ns-7", "web-1")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		az.Encode(az.Authorize(context.Background(), req), RequestBinding(req))
	}
}

func BenchmarkSARConditional1000(b *testing.B) {
	az := benchAuthorizer(b, 0)
	req := policytest.ResourceRequest("alice", []string{"team-7", "system:authenticated"}, "create", "", "pods", "", "team-a", "")
	out := az.Authorize(context.Background(), req)
	if !out.IsConditional() {
		b.Fatalf("not conditional: %+v", out)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		az.Encode(az.Authorize(context.Background(), req), RequestBinding(req))
	}
}

// The callback for a Pod object: decode and verify the conditions (cached
// after the first call), convert the Pod, evaluate. Reports the median.
func BenchmarkCallbackPod(b *testing.B) {
	az := benchAuthorizer(b, 0)
	req := policytest.ResourceRequest("alice", nil, "create", "", "pods", "", "team-a", "")
	dec := az.Encode(az.Authorize(context.Background(), req), RequestBinding(req))
	raw, _ := json.Marshal(dec)
	var back wire.ConditionsAwareDecision
	json.Unmarshal(raw, &back)
	ev := az.Evaluator()
	user := entities.UserInfo{Name: "alice"}
	data := &AdmissionData{Operation: "CREATE", Resource: "pods", APIVersion: "v1", Namespace: "team-a", Name: "web-7d4b9c6f5-x2v9k", User: &user, Object: benchPod}
	if v := ev.EvaluateDecision(&back, data); v.Type() != engine.DecisionAllow {
		b.Fatalf("callback: %+v", v)
	}
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		ev.EvaluateDecision(&back, data)
		durations = append(durations, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
	b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "median-ns")
}

// The same conditional request again, as a controller creating pods in one
// namespace sends it: the outcome cache skips partial evaluation.
func BenchmarkSARConditional1000Cached(b *testing.B) {
	az := benchAuthorizer(b, 1024)
	req := policytest.ResourceRequest("alice", []string{"team-7", "system:authenticated"}, "create", "", "pods", "", "team-a", "")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		az.Encode(az.Authorize(context.Background(), req), RequestBinding(req))
	}
}

// Conditional SARs from many different users and namespaces (no two alike,
// so the outcome cache never hits), with the residual memo shared.
func BenchmarkSARConditional1000Distinct(b *testing.B) {
	az := benchAuthorizer(b, 1<<16)
	reqs := make([]*entities.Request, 4096)
	for i := range reqs {
		reqs[i] = policytest.ResourceRequest("alice", []string{fmt.Sprintf("team-%d", i%200), "system:authenticated"}, "create", "", "pods", "", fmt.Sprintf("ns-%d", i), "")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := *reqs[i%len(reqs)]
		r.User.UID = fmt.Sprint(i) // defeat the outcome cache
		az.Encode(az.Authorize(context.Background(), &r), RequestBinding(&r))
	}
}

// The unconditional counterpart of BenchmarkSARConditional1000Distinct:
// the same users, groups and namespaces, reading instead of creating.
func BenchmarkSARUnconditional1000Distinct(b *testing.B) {
	az := benchAuthorizer(b, 1<<16)
	reqs := make([]*entities.Request, 4096)
	for i := range reqs {
		reqs[i] = policytest.ResourceRequest("alice", []string{fmt.Sprintf("team-%d", i%200), "system:authenticated"}, "get", "", "pods", "", fmt.Sprintf("ns-%d", i), "web-1")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := *reqs[i%len(reqs)]
		r.User.UID = fmt.Sprint(i)
		az.Encode(az.Authorize(context.Background(), &r), RequestBinding(&r))
	}
}
