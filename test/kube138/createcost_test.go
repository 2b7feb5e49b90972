package kube138

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/schemagen"
	"github.com/kcedar/kcedar/server"
)

// The cost of a conditional create on Kubernetes 1.38 (kcedar issue 43):
// kcedar's server in this process, over TLS and HTTP/2, called by
// k8s.io/apiserver v0.38.0-beta.0's webhook authorizer built as
// kube-apiserver builds it (webhookFromConfiguration) from the
// AuthorizationConfiguration and kubeconfig below. Per create: the
// SubjectAccessReview (ConditionsAwareAuthorize, answered with signed
// conditions), then the AuthorizationConditionsReview callback
// (EvaluateConditions on the versioned admission attributes, as the
// AuthorizationConditionsEnforcer hands them over), answered Allow.
// test/embed's BenchmarkAdmissionEnforcedCreate137 measures the same create
// on 1.37's path (plain SubjectAccessReview, then kcedar's validating
// admission webhook); both files carry the same policies, request and pod.
// Reported: the time per create, the process's CPU per create (client and
// server both: cpu-µs/op) and the JSON bodies sent and received
// (wire-B/op).
//
//	cd test/kube138 && GOTOOLCHAIN=go1.27.3 go test -run '^$' -bench ConditionalCreate138 -benchtime 3000x -count 3
func BenchmarkConditionalCreate138(b *testing.B) {
	featuregatetesting.SetFeatureGateDuringTest(b, utilfeature.DefaultFeatureGate, genericfeatures.ConditionalAuthorization, true)
	base, ca := serveCreateCost(b)
	for _, cached := range []bool{false, true} {
		wire := &wireLog{}
		wh := createCostWebhook(b, base, ca, cached, wire)
		checkCreateCost(b, wh)
		name := "conditional create, SAR and callback"
		if cached {
			name = "conditional create, SAR cached (30s TTL), callback"
		}
		b.Run(name, func(b *testing.B) {
			measureCreates(b, wire, func(ctx context.Context, i int) {
				cad := wh.ConditionsAwareAuthorize(ctx, bobCreatesPod)
				if d, reason, err := evaluatePodCreate(ctx, wh, cad, createdPod(i, "n1")); d != authorizer.DecisionAllow {
					b.Fatalf("pod on n1: %s (%s), %q, %v; want Allow", d, cad, reason, err)
				}
			})
		})
		if cached {
			continue
		}
		b.Run("floor: unconditional create, SAR only", func(b *testing.B) {
			measureCreates(b, wire, func(ctx context.Context, _ int) {
				if cad := wh.ConditionsAwareAuthorize(ctx, bobCreatesConfigMap); !cad.IsAllow() {
					b.Fatalf("configmap: %s; want Allow", cad)
				}
			})
		})
	}
}

// createCostPolicies: bob creates pods on node n1 only (a condition on the
// object, decided in admission) and configmaps in team (unconditionally).
// test/embed's createcost_test.go has the same text.
const createCostPolicies = `
@id("n1-only") @reason("bob runs pods on node n1 only")
permit (principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };

@id("team-configmaps") @reason("bob writes configmaps in team")
permit (principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::configmaps)
when { resource.namespace == "team" };
`

var (
	bob                 = &user.DefaultInfo{Name: "bob", UID: "b0b", Groups: []string{user.AllAuthenticated}}
	bobCreatesPod       = authorizer.AttributesRecord{User: bob, Verb: "create", Namespace: "team", APIVersion: "v1", Resource: "pods", ResourceRequest: true}
	bobCreatesConfigMap = authorizer.AttributesRecord{User: bob, Verb: "create", Namespace: "team", APIVersion: "v1", Resource: "configmaps", ResourceRequest: true}
)

// createdPod is the i-th pod bob creates in team, on node.
func createdPod(i int, node string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "team", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
	}
}

// evaluatePodCreate is EvaluateConditions of cad on the creation of pod, as
// the AuthorizationConditionsEnforcer calls it: the admission attributes
// versioned to the pod's kind.
func evaluatePodCreate(ctx context.Context, wh authorizer.Authorizer, cad authorizer.ConditionsAwareDecision, pod *corev1.Pod) (authorizer.Decision, string, error) {
	kind := corev1.SchemeGroupVersion.WithKind("Pod")
	attrs := admission.NewAttributesRecord(pod, nil, kind, pod.Namespace, pod.Name, corev1.SchemeGroupVersion.WithResource("pods"), "",
		admission.Create, &metav1.CreateOptions{}, false, bob)
	versioned, err := admission.NewVersionedAttributes(attrs, kind, objectInterfaces)
	if err != nil {
		return authorizer.DecisionDeny, "", err
	}
	return wh.EvaluateConditions(ctx, cad, versioned)
}

// checkCreateCost fails b unless wh decides as the policies say before
// anything is measured: a pod on n1 is allowed, one on n2 is not, a
// configmap is allowed without conditions.
func checkCreateCost(b *testing.B, wh authorizer.Authorizer) {
	ctx := b.Context()
	cad := wh.ConditionsAwareAuthorize(ctx, bobCreatesPod)
	if !cad.IsConditionsMap() {
		b.Fatalf("bob creates a pod: %s; want a ConditionsMap", cad)
	}
	for node, want := range map[string]authorizer.Decision{"n1": authorizer.DecisionAllow, "n2": authorizer.DecisionNoOpinion} {
		if d, reason, err := evaluatePodCreate(ctx, wh, cad, createdPod(0, node)); d != want || err != nil {
			b.Fatalf("pod on %s: %s, %q, %v; want %s", node, d, reason, err, want)
		}
	}
	if cad := wh.ConditionsAwareAuthorize(ctx, bobCreatesConfigMap); !cad.IsAllow() {
		b.Fatalf("bob creates a configmap: %s; want Allow", cad)
	}
}

// serveCreateCost serves createCostPolicies with package server over the
// in-process authorizer, over TLS and HTTP/2 only (anything else fails b),
// and returns its URL and CA certificate (PEM).
func serveCreateCost(b *testing.B) (string, []byte) {
	schema, err := schemagen.Default()
	if err != nil {
		b.Fatal(err)
	}
	kc, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "createcost.cedar", Text: []byte(createCostPolicies)}), schema, cedar.Options{})
	if err != nil {
		b.Fatal(err)
	}
	handler, err := server.New(kc, server.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	var notHTTP2 atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			notHTTP2.Add(1)
		}
		handler.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	b.Cleanup(func() {
		srv.Close()
		if n := notHTTP2.Load(); n > 0 {
			b.Errorf("%d requests came over HTTP/1", n)
		}
	})
	return srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// createCostKubeconfig is the webhook kubeconfig `kcedar manifests
// --conditions-review` writes (one context per endpoint); base and the CA
// are filled in.
const createCostKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: kcedar-authorize
  cluster: {server: "%[1]s/v1/authorize", certificate-authority-data: %[2]s}
- name: kcedar-conditions
  cluster: {server: "%[1]s/v1/conditions", certificate-authority-data: %[2]s}
users:
- name: kube-apiserver
  user: {}
contexts:
- name: authorize
  context: {cluster: kcedar-authorize, user: kube-apiserver}
- name: conditions
  context: {cluster: kcedar-conditions, user: kube-apiserver}
current-context: authorize
`

// createCostAuthorization is kcedar's webhook as `kcedar manifests
// --conditions-review` configures it (timeout, TTLs, conditionsReview),
// without the match conditions (test/embed's 1.37 side has none either),
// the cache on or off.
const createCostAuthorization = `apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: kcedar
  webhook:
    timeout: 3s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    authorizedTTL: 30s
    unauthorizedTTL: 30s
    cacheAuthorizedRequests: %[2]t
    cacheUnauthorizedRequests: %[2]t
    connectionInfo: {type: KubeConfigFile, kubeConfigFile: %[1]q}
    conditionsReview: {version: v1alpha1, kubeConfigContextName: conditions}
`

// createCostWebhook is the webhook authorizer kube-apiserver 1.38 builds
// for kcedar at base (CA ca), its SubjectAccessReviews cached or not, its
// traffic recorded in wire.
func createCostWebhook(b *testing.B, base string, ca []byte, cached bool, wire *wireLog) authorizer.Authorizer {
	dir := b.TempDir()
	kubeconfig, config := filepath.Join(dir, "kcedar-webhook.kubeconfig"), filepath.Join(dir, "authorization-config.yaml")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, createCostKubeconfig, base, base64.StdEncoding.EncodeToString(ca)), 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(config, fmt.Appendf(nil, createCostAuthorization, kubeconfig, cached), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg, problems := loadAuthorizationConfiguration(b, config)
	if len(problems) > 0 {
		b.Fatalf("kube-apiserver 1.38 refuses the AuthorizationConfiguration: %v", problems)
	}
	wh, _ := webhookFromConfiguration(b, cfg.Authorizers[0], wire)
	return wh
}

// measureCreates runs create b.N times, one after the other, after one run
// that opens the connections, and reports the process's CPU per create and
// the JSON bodies wire recorded per create.
func measureCreates(b *testing.B, wire *wireLog, create func(ctx context.Context, i int)) {
	ctx := b.Context()
	create(ctx, -1)
	wire.take()
	var n, bodies int
	cpu0 := processCPU()
	for b.Loop() {
		create(ctx, n)
		for _, ex := range wire.take() {
			bodies += len(ex.request) + len(ex.response)
		}
		n++
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(n), "cpu-µs/op")
	b.ReportMetric(float64(bodies)/float64(n), "wire-B/op")
}

// processCPU is the CPU (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
