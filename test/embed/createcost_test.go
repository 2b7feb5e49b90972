package embed

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	authzconfig "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/apis/apiserver/load"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"
	authorizationmetrics "k8s.io/apiserver/pkg/authorization/metrics"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	webhookmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/schemagen"
	"github.com/kcedar/kcedar/server"
)

// The cost of a conditional create on Kubernetes 1.37 (kcedar issue 43),
// against test/kube138's BenchmarkConditionalCreate138 on 1.38: kcedar's
// server (kcedar serve --admission-enforcement, its admission webhook
// verified in place, no aggregated API) in this process, over TLS and
// HTTP/2, called by kube-apiserver 1.37's own code (k8s.io/apiserver
// v0.37.1): the webhook authorizer built from the AuthorizationConfiguration
// below as kube-apiserver builds it, whose plain SubjectAccessReview kcedar
// answers Allow (the conditional allow is enforced in admission), then the
// ValidatingAdmissionWebhook admission plugin, with kcedar's
// ValidatingWebhookConfiguration as `kcedar manifests
// --admission-enforcement` writes it (from an informer on a fake clientset),
// dispatching the pod's creation: its client (webhookutil.ClientManager's
// REST client) POSTs the AdmissionReview to /v1/admit, which recomputes the
// decision with the object and allows. Both files carry the same policies,
// request and pod. Reported: the time per create, the process's CPU per
// create (client and server both: cpu-µs/op) and the JSON bodies sent and
// received (wire-B/op).
//
//	cd test/embed && go test -run '^$' -bench AdmissionEnforcedCreate137 -benchtime 3000x -count 3
func BenchmarkAdmissionEnforcedCreate137(b *testing.B) {
	base, ca := serveCreateCost(b)
	wire := &bodyRecorder{}
	admit := createCostAdmission(b, base, ca, wire)
	for _, cached := range []bool{false, true} {
		wh := createCostWebhook(b, base, ca, cached, wire)
		checkCreateCost(b, wh, admit)
		name := "conditional create, SAR and admission webhook"
		if cached {
			name = "conditional create, SAR cached (30s TTL), admission webhook"
		}
		b.Run(name, func(b *testing.B) {
			measureCreates(b, wire, func(ctx context.Context, i int) {
				if d, reason, err := wh.Authorize(ctx, bobCreatesPod); d != authorizer.DecisionAllow {
					b.Fatalf("bob creates a pod: %s, %q, %v; want Allow", d, reason, err)
				}
				if err := admit.Validate(ctx, podCreation(createdPod(i, "n1")), objectInterfaces); err != nil {
					b.Fatalf("pod on n1: %v", err)
				}
			})
		})
		if cached {
			continue
		}
		b.Run("unconditional create, SAR and admission webhook", func(b *testing.B) {
			measureCreates(b, wire, func(ctx context.Context, i int) { createConfigMap(ctx, b, wh, admit, i) })
		})
		b.Run("floor: unconditional create, SAR only", func(b *testing.B) {
			measureCreates(b, wire, func(ctx context.Context, _ int) {
				if d, reason, err := wh.Authorize(ctx, bobCreatesConfigMap); d != authorizer.DecisionAllow {
					b.Fatalf("bob creates a configmap: %s, %q, %v; want Allow", d, reason, err)
				}
			})
		})
	}
}

// createCostPolicies: bob creates pods on node n1 only (a condition on the
// object, decided in admission) and configmaps in team (unconditionally).
// test/kube138's createcost_test.go has the same text.
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
	objectInterfaces    = admission.NewObjectInterfacesFromScheme(scheme.Scheme)
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

// podCreation is the admission attributes of bob's creation of pod, in its
// external version (kube-apiserver's admission would hold the internal
// object and convert it for the webhook; that conversion is left out here
// as on the 1.38 side).
func podCreation(pod *corev1.Pod) admission.Attributes {
	return admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), pod.Namespace, pod.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, bob)
}

// createConfigMap is bob's creation of the i-th configmap in team: the
// SubjectAccessReview, then admission, both allowing.
func createConfigMap(ctx context.Context, b *testing.B, wh authorizer.Authorizer, admit admission.ValidationInterface, i int) {
	if d, reason, err := wh.Authorize(ctx, bobCreatesConfigMap); d != authorizer.DecisionAllow {
		b.Fatalf("bob creates a configmap: %s, %q, %v; want Allow", d, reason, err)
	}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("settings-%d", i), Namespace: "team"}, Data: map[string]string{"mode": "fast"}}
	attrs := admission.NewAttributesRecord(cm, nil, corev1.SchemeGroupVersion.WithKind("ConfigMap"), cm.Namespace, cm.Name,
		corev1.SchemeGroupVersion.WithResource("configmaps"), "", admission.Create, &metav1.CreateOptions{}, false, bob)
	if err := admit.Validate(ctx, attrs, objectInterfaces); err != nil {
		b.Fatalf("configmap: %v", err)
	}
}

// checkCreateCost fails b unless the authorizer and admission decide as the
// policies say before anything is measured: bob's pod creation is allowed
// by the authorizer, admitted on n1 and refused on n2.
func checkCreateCost(b *testing.B, wh authorizer.Authorizer, admit admission.ValidationInterface) {
	ctx := b.Context()
	if d, reason, err := wh.Authorize(ctx, bobCreatesPod); d != authorizer.DecisionAllow {
		b.Fatalf("bob creates a pod: %s, %q, %v; want Allow", d, reason, err)
	}
	if err := admit.Validate(ctx, podCreation(createdPod(0, "n1")), objectInterfaces); err != nil {
		b.Fatalf("pod on n1: %v; want admitted", err)
	}
	if err := admit.Validate(ctx, podCreation(createdPod(0, "n2")), objectInterfaces); err == nil {
		b.Fatal("pod on n2: admitted; want refused")
	}
	createConfigMap(ctx, b, wh, admit, 0)
}

// serveCreateCost serves createCostPolicies with package server over the
// in-process authorizer, as kcedar serve --admission-enforcement does with
// its admission webhook verified and no aggregated API, over TLS and HTTP/2
// only (anything else fails b), and returns its URL and CA certificate
// (PEM).
func serveCreateCost(b *testing.B) (string, []byte) {
	schema, err := schemagen.Default()
	if err != nil {
		b.Fatal(err)
	}
	kc, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "createcost.cedar", Text: []byte(createCostPolicies)}), schema, cedar.Options{})
	if err != nil {
		b.Fatal(err)
	}
	handler, err := server.New(kc, server.Options{Logger: slog.New(slog.DiscardHandler), AdmissionEnforcer: kc, Admitter: kc,
		AdmissionWebhookSees: func(string, []string) bool { return true }, AggregatedAPI: func(string, string) bool { return false }})
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

// createCostKubeconfig is the webhook kubeconfig `kcedar manifests` writes;
// base and the CA are filled in.
const createCostKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: kcedar-authorize
  cluster: {server: "%[1]s/v1/authorize", certificate-authority-data: %[2]s}
users:
- name: kube-apiserver
  user: {}
contexts:
- name: authorize
  context: {cluster: kcedar-authorize, user: kube-apiserver}
current-context: authorize
`

// createCostAuthorization is kcedar's webhook as `kcedar manifests`
// configures it (timeout, TTLs), without the match conditions (the 1.38
// side has none either), the cache on or off.
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
`

// createCostWebhook is the webhook authorizer kube-apiserver 1.37 builds
// for kcedar at base (CA ca) from createCostAuthorization (reload.go: the
// kubeconfig's client, the timeout, the failure policy, the cache TTLs, the
// default retry backoff, instrumented), its SubjectAccessReviews cached or
// not, its traffic recorded in wire.
func createCostWebhook(b *testing.B, base string, ca []byte, cached bool, wire *bodyRecorder) authorizer.Authorizer {
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kcedar-webhook.kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, createCostKubeconfig, base, base64.StdEncoding.EncodeToString(ca)), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg, err := load.LoadFromData(fmt.Appendf(nil, createCostAuthorization, kubeconfig, cached))
	if err != nil {
		b.Fatal(err)
	}
	a := cfg.Authorizers[0]
	w := a.Webhook
	clientConfig, err := webhookutil.LoadKubeconfig(*w.ConnectionInfo.KubeConfigFile, nil)
	if err != nil {
		b.Fatal(err)
	}
	clientConfig.Timeout = w.Timeout.Duration
	clientConfig.Wrap(wire.wrap)
	decisionOnError := authorizer.DecisionDeny
	if w.FailurePolicy == authzconfig.FailurePolicyNoOpinion {
		decisionOnError = authorizer.DecisionNoOpinion
	}
	authorizedTTL, unauthorizedTTL := w.AuthorizedTTL.Duration, w.UnauthorizedTTL.Duration
	if !w.CacheAuthorizedRequests {
		authorizedTTL = 0
	}
	if !w.CacheUnauthorizedRequests {
		unauthorizedTTL = 0
	}
	wh, err := webhook.New(clientConfig, w.SubjectAccessReviewVersion, authorizedTTL, unauthorizedTTL, *webhook.DefaultRetryBackoff(),
		decisionOnError, w.MatchConditions, a.Name, webhookmetrics.NoopAuthorizerMetrics{}, authorizationcel.NewDefaultCompiler())
	if err != nil {
		b.Fatal(err)
	}
	return authorizationmetrics.InstrumentedAuthorizer(string(a.Type), a.Name, wh)
}

// createCostAdmission is kube-apiserver 1.37's ValidatingAdmissionWebhook
// plugin, initialized as its admission initializers do, with kcedar's
// webhook configuration at base (CA ca); the traffic of its clients is
// recorded in wire.
func createCostAdmission(b *testing.B, base string, ca []byte, wire *bodyRecorder) admission.ValidationInterface {
	plugin, err := validating.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		b.Fatal(err)
	}
	client := fake.NewClientset(admissionWebhookConfiguration(base+"/v1/admit", ca))
	factory := informers.NewSharedInformerFactory(client, 0)
	plugin.SetExternalKubeClientSet(client)
	plugin.SetExternalKubeInformerFactory(factory)
	plugin.InspectFeatureGates(utilfeature.DefaultFeatureGate)
	plugin.SetAuthenticationInfoResolverWrapper(func(r webhookutil.AuthenticationInfoResolver) webhookutil.AuthenticationInfoResolver {
		return recordedResolver{AuthenticationInfoResolver: r, wire: wire}
	})
	if err := plugin.ValidateInitialization(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(func() { cancel(); factory.Shutdown() })
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return plugin
}

// admissionWebhookConfiguration is kcedar's validating webhook as `kcedar
// manifests --admission-enforcement` writes it, without its match
// conditions: every write and connect, failing closed; the empty namespace
// and object selectors are the API server's defaults.
func admissionWebhookConfiguration(url string, ca []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	fail, none, equivalent := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Equivalent
	all, timeout := admissionregistrationv1.AllScopes, int32(5)
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kcedar-conditions"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "conditions.kcedar.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete, admissionregistrationv1.Connect},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}, Scope: &all},
			}},
			NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
			FailurePolicy: &fail, MatchPolicy: &equivalent, SideEffects: &none, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

// recordedResolver gives the admission webhook clients the resolver's
// configuration with their traffic recorded, as kube-apiserver's own
// wrapper of the resolver adds its transport wrappers.
type recordedResolver struct {
	webhookutil.AuthenticationInfoResolver
	wire *bodyRecorder
}

func (r recordedResolver) ClientConfigFor(hostPort string) (*rest.Config, error) {
	cfg, err := r.AuthenticationInfoResolver.ClientConfigFor(hostPort)
	if err == nil {
		cfg.Wrap(r.wire.wrap)
	}
	return cfg, err
}

// bodyRecorder counts the bodies a client sends and receives, reading them
// whole as test/kube138's recording transport does (so both sides pay the
// same for it).
type bodyRecorder struct{ bytes atomic.Int64 }

func (w *bodyRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return recordingTransport{next: rt, wire: w}
}

type recordingTransport struct {
	next http.RoundTripper
	wire *bodyRecorder
}

func (r recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		sent, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(sent))
		r.wire.bytes.Add(int64(len(sent)))
	}
	resp, err := r.next.RoundTrip(req)
	if resp != nil {
		data, readErr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if readErr != nil {
			return nil, readErr
		}
		resp.Body = io.NopCloser(bytes.NewReader(data))
		r.wire.bytes.Add(int64(len(data)))
	}
	return resp, err
}

// measureCreates runs create b.N times, one after the other, after one run
// that opens the connections, and reports the process's CPU per create and
// the bodies wire recorded per create.
func measureCreates(b *testing.B, wire *bodyRecorder, create func(ctx context.Context, i int)) {
	ctx := b.Context()
	create(ctx, -1)
	var n int
	cpu0, bodies0 := processCPU(), wire.bytes.Load()
	for b.Loop() {
		create(ctx, n)
		n++
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(n), "cpu-µs/op")
	b.ReportMetric(float64(wire.bytes.Load()-bodies0)/float64(n), "wire-B/op")
}
