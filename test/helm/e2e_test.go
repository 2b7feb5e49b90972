//go:build e2e

package helm

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

// e2eValues: the chart's defaults (it generates the serving certificate,
// the client CA with the API server's client certificate, and the condition
// key), the serving certificate also for 127.0.0.1 (where this test's
// kcedar listens, as a Service's cluster IP would be given), and a policy
// file from the values next to the policy objects.
const e2eValues = `
tls: {extraIPs: ["127.0.0.1"]}
policies:
  files:
    contractors.cedar: |
      @id("no-secrets-for-contractors")
      forbid (principal in k8s::Group::"contractors", action, resource is core::secrets);
`

// devPolicy is the CedarPolicy the test applies through the API server.
const devPolicy = `@id("dev-team-reads-own-namespace")
permit (principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::pods)
when { resource.namespace == "dev" };`

// TestChartInstallsAndDecides installs the chart's rendered objects, with
// its monitoring on, into a real kube-apiserver that has the Prometheus
// operator's CRDs (server-side apply: the API server accepts and stores
// every one; deploy/'s monitoring component in a dry run), configures that API server with `kcedar manifests` and the
// certificates the chart generated, runs kcedar as the chart's Deployment's
// pod (its arguments, environment, Secrets and ConfigMap, its probes, a
// token of its ServiceAccount, so with exactly the chart's RBAC), and gets
// decisions from it through the API server and directly. It then scrapes
// kcedar's /metrics and checks that every metric the chart's alerts and
// dashboard read is exported.
func TestChartInstallsAndDecides(t *testing.T) {
	bin := kcedarBinary(t)
	port := framework.FreePort(t)
	r := mustRenderChart(t, "kcedar", "kcedar-system", values(t, e2eValues+monitoringValues))
	work := t.TempDir()
	pki := writeChartPKI(t, r.objects, work)

	apiserverDir := filepath.Join(work, "apiserver")
	run(t, bin, "manifests", "--url", "https://127.0.0.1:"+strconv.Itoa(port), "--ca-file", pki.servingCA,
		"--client-certificate", pki.clientCert, "--client-key", pki.clientKey, "--policy-objects",
		"--service-account", "kcedar-system/kcedar",
		"--webhook-kubeconfig-path", "/etc/kubernetes/kcedar/webhook.kubeconfig",
		"--admission-kubeconfig-path", "/etc/kubernetes/kcedar/admission.kubeconfig", "--output-dir", apiserverDir)
	read := func(name string) string {
		return strings.ReplaceAll(string(readFile(t, filepath.Join(apiserverDir, name))), "/etc/kubernetes/kcedar/", framework.DirPlaceholder+"/kcedar/")
	}
	c := framework.Start(t, framework.Options{
		AuthorizationConfig: read("authorization-config.yaml"),
		Files: map[string]string{
			"kcedar/webhook.kubeconfig":    read("kcedar-webhook.kubeconfig"),
			"kcedar/admission.kubeconfig":  read("kcedar-admission.kubeconfig"),
			"kcedar/admission-config.yaml": read("admission-config.yaml"),
		},
		ExtraFlags: []string{"--admission-control-config-file=" + framework.DirPlaceholder + "/kcedar/admission-config.yaml"},
		Tokens: []framework.Token{
			{Token: "alice-token", User: "alice", Groups: []string{"dev"}},
			{Token: "carol-token", User: "carol", Groups: []string{"contractors"}},
		},
	})
	inst := installChart(t, c, r.objects, monitoringCRDs(t))
	// deploy/components/monitoring's objects: the API server accepts every
	// one (a server-side dry run; the rest of deploy/ is TestDeploy's, and
	// its Deployment's selector differs from the release's, which is
	// immutable).
	for _, o := range kustomizeBuild(t, monitoringOverlay(t)) {
		if mapAt(o, "metadata", "labels")["app.kubernetes.io/component"] != "metrics" {
			continue
		}
		if err := inst.tryApply(t, o, metav1.DryRunAll); err != nil {
			t.Errorf("deploy/ with components/monitoring: the API server refuses %s: %v", key(o), err)
		}
	}

	pod := inst.podOf(t, "Deployment", "kcedar")
	kcedar := startPod(t, c, inst, pod, bin, filepath.Join(work, "pod"), port)
	kcedar.waitProbes(t, 120*time.Second)

	inst.apply(t, decodeAll(t, readFile(t, filepath.Join(apiserverDir, "policy-webhook.yaml"))))
	inst.apply(t, []obj{{"apiVersion": "kcedar.dev/v1alpha1", "kind": "CedarPolicy",
		"metadata": map[string]any{"name": "dev"}, "spec": map[string]any{"content": devPolicy}}})
	checkDecisions(t, c, kcedar, pki)
	// An invalid policy object, refused through the policy webhook with the
	// API server's client certificate of the admission configuration.
	bad := obj{"apiVersion": "kcedar.dev/v1alpha1", "kind": "CedarPolicy", "metadata": map[string]any{"name": "bad"},
		"spec": map[string]any{"content": "permit(principal, action, resource is core::pods)\nwhen { resource.nmespace == \"a\" };"}}
	if err := inst.tryApply(t, bad); err == nil || !strings.Contains(err.Error(), "CedarPolicy/bad:2:") {
		t.Errorf("an invalid CedarPolicy: %v, want refused at CedarPolicy/bad:2:...", err)
	}
	checkMetrics(t, kcedar, pki)
}

// kcedarBinary is $KCEDAR_BIN, else kcedar built from the repository root
// (with -race when the test runs with it), for framework.KcedarBinary,
// which builds from the module of the working directory, test/helm.
func kcedarBinary(t *testing.T) string {
	t.Helper()
	kcedarBuild.Do(func() {
		if os.Getenv("KCEDAR_BIN") != "" {
			return
		}
		out := filepath.Join(os.TempDir(), fmt.Sprintf("kcedar-helm-e2e-%d", os.Getpid()))
		flags := []string{"build", "-o", out}
		if framework.RaceEnabled() {
			flags = append(flags, "-race")
		}
		build := exec.Command("go", append(flags, "./cmd/kcedar")...)
		build.Dir = repoRoot
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building kcedar: %v\n%s", err, b)
		}
		t.Cleanup(func() { os.Remove(out) })
		os.Setenv("KCEDAR_BIN", out)
	})
	return framework.KcedarBinary(t)
}

var kcedarBuild sync.Once

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// chartPKI are the files of the chart's generated certificates that the
// API server's side needs.
type chartPKI struct {
	servingCA, clientCert, clientKey string
	servingPool                      *x509.CertPool
	client                           tls.Certificate
}

func writeChartPKI(t *testing.T, objs []obj, dir string) chartPKI {
	t.Helper()
	data := func(secret, field string) []byte {
		b, err := base64.StdEncoding.DecodeString(str(find(t, objs, "Secret", secret), "data", field))
		if err != nil || len(b) == 0 {
			t.Fatalf("Secret %s: no %s (%v)", secret, field, err)
		}
		return b
	}
	p := chartPKI{servingCA: filepath.Join(dir, "serving-ca.crt"), clientCert: filepath.Join(dir, "apiserver-client.crt"), clientKey: filepath.Join(dir, "apiserver-client.key")}
	for path, b := range map[string][]byte{p.servingCA: data("kcedar-serving-cert", "ca.crt"),
		p.clientCert: data("kcedar-apiserver-client", "tls.crt"), p.clientKey: data("kcedar-apiserver-client", "tls.key")} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p.servingPool = x509.NewCertPool()
	p.servingPool.AppendCertsFromPEM(data("kcedar-serving-cert", "ca.crt"))
	var err error
	if p.client, err = tls.X509KeyPair(data("kcedar-apiserver-client", "tls.crt"), data("kcedar-apiserver-client", "tls.key")); err != nil {
		t.Fatal(err)
	}
	return p
}

// installation is the chart installed into a cluster.
type installation struct {
	c      *framework.Cluster
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// prometheusOperator is the module whose CRDs the monitoring objects need
// (monitoring.coreos.com), read from the Go module proxy.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// monitoringCRDs are the Prometheus operator's ServiceMonitor and
// PrometheusRule CRDs, as the operator's release ships them.
func monitoringCRDs(t *testing.T) []obj {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", prometheusOperator)
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", prometheusOperator, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v\n%s", prometheusOperator, err, out)
	}
	var crds []obj
	for _, name := range []string{"servicemonitors", "prometheusrules"} {
		crds = append(crds, decodeAll(t, readFile(t, filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+name+".yaml")))...)
	}
	return crds
}

// installChart creates the release's namespace (helm install
// --create-namespace), applies the prerequisite CRDs and the chart's CRDs,
// waits until they serve, applies every other object, and reads each back.
func installChart(t *testing.T, c *framework.Cluster, objs, prerequisites []obj) *installation {
	t.Helper()
	c.EnsureNamespace(t, "kcedar-system")
	dyn, err := dynamic.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	inst := &installation{c: c, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
	isCRD := func(o obj) bool { return o["kind"] == "CustomResourceDefinition" }
	crds := slices.DeleteFunc(slices.Clone(objs), func(o obj) bool { return !isCRD(o) })
	rest := slices.DeleteFunc(slices.Clone(objs), isCRD)
	if len(crds) != 2 || len(rest) < 15 {
		t.Fatalf("the chart renders %d CRDs and %d other objects: %v", len(crds), len(rest), keys(objs))
	}
	inst.apply(t, append(prerequisites, crds...))
	eventually(t, 30*time.Second, "the CRDs served", func() bool {
		inst.mapper.Reset()
		_, err1 := inst.mapper.RESTMapping(schemaGK("kcedar.dev", "CedarPolicy"), "v1alpha1")
		_, err2 := inst.mapper.RESTMapping(schemaGK("monitoring.coreos.com", "ServiceMonitor"), "v1")
		_, err3 := inst.mapper.RESTMapping(schemaGK("monitoring.coreos.com", "PrometheusRule"), "v1")
		return err1 == nil && err2 == nil && err3 == nil
	})
	inst.apply(t, rest)
	for _, o := range objs {
		if _, err := inst.resource(t, o).Get(t.Context(), str(o, "metadata", "name"), metav1.GetOptions{}); err != nil {
			t.Errorf("%s is not in the API server after the install: %v", key(o), err)
		}
	}
	t.Logf("installed %d objects: %s", len(objs), strings.Join(keys(objs), ", "))
	return inst
}

// apply server-side applies objs as the admin.
func (inst *installation) apply(t *testing.T, objs []obj) {
	t.Helper()
	for _, o := range objs {
		if err := inst.tryApply(t, o); err != nil {
			t.Fatalf("the API server refuses %s: %v", key(o), err)
		}
	}
}

func (inst *installation) tryApply(t *testing.T, o obj, dryRun ...string) error {
	t.Helper()
	body, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	force := true
	_, err = inst.resource(t, o).Patch(t.Context(), str(o, "metadata", "name"), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: "helm-e2e", Force: &force, DryRun: dryRun})
	return err
}

func (inst *installation) resource(t *testing.T, o obj) dynamic.ResourceInterface {
	t.Helper()
	u := unstructured.Unstructured{Object: o}
	gvk := u.GroupVersionKind()
	m, err := inst.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s: %v", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return inst.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	return inst.dyn.Resource(m.Resource)
}

// podOf returns the pod template of the stored workload, as a Pod.
func (inst *installation) podOf(t *testing.T, kind, name string) *corev1.Pod {
	t.Helper()
	o := obj{"apiVersion": "apps/v1", "kind": kind, "metadata": map[string]any{"name": name, "namespace": "kcedar-system"}}
	u, err := inst.resource(t, o).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
	b, _ := json.Marshal(tmpl)
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(b, pod); err != nil {
		t.Fatalf("%s %s: the pod template is not a strict Pod: %v", kind, name, err)
	}
	pod.Namespace, pod.Name = "kcedar-system", name+"-pod"
	return pod
}
