//go:build e2e

package helm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	promql "github.com/prometheus/prometheus/promql/parser"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

// podProcess is kcedar run as a pod of the chart would run it.
type podProcess struct {
	proc      *framework.Process
	container corev1.Container
	port      int
}

// startPod runs the pod's one container as a process, as kubelet would:
// its Secret and ConfigMap volumes written from the objects the API server
// stores at their mount paths (under dir), its environment from its
// fieldRef and resourceFieldRef sources, its arguments with those paths,
// the listener moved to 127.0.0.1:port, and its ServiceAccount's in-cluster
// credentials as a kubeconfig with a token of that ServiceAccount.
func startPod(t *testing.T, c *framework.Cluster, inst *installation, pod *corev1.Pod, bin, dir string, port int) *podProcess {
	t.Helper()
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	ctr := pod.Spec.Containers[0]
	admin := c.Client(t)
	for _, m := range ctr.VolumeMounts {
		writeVolume(t, admin, pod, m, filepath.Join(dir, m.MountPath))
	}
	containerPort := int(ctr.Ports[0].ContainerPort)
	var args []string
	for _, a := range ctr.Args {
		a = strings.ReplaceAll(a, "/etc/kcedar/", filepath.Join(dir, "etc", "kcedar")+"/")
		if strings.HasPrefix(a, "--listen=") {
			if a != fmt.Sprintf("--listen=:%d", containerPort) {
				t.Fatalf("%s: the Deployment should listen on every address of the container port %d", a, containerPort)
			}
			a = "--listen=127.0.0.1:" + strconv.Itoa(port)
		}
		args = append(args, a)
	}
	env := []string{"KUBECONFIG=" + serviceAccountKubeconfig(t, c, pod.Namespace, pod.Spec.ServiceAccountName, filepath.Join(dir, "kubeconfig"))}
	for _, ev := range ctr.Env {
		switch {
		case ev.ValueFrom != nil && ev.ValueFrom.FieldRef != nil && ev.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, ev.Name+"="+pod.Namespace)
		case ev.ValueFrom != nil && ev.ValueFrom.ResourceFieldRef != nil && ev.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
			limit := ctr.Resources.Limits[corev1.ResourceMemory]
			env = append(env, ev.Name+"="+strconv.FormatInt(limit.Value(), 10))
		default:
			t.Fatalf("env %s: a source the emulation does not know", ev.Name)
		}
	}
	if args[0] != "serve" {
		t.Fatalf("args %v: want kcedar serve", ctr.Args)
	}
	t.Logf("kcedar %s (env %s)", strings.Join(args, " "), strings.Join(env[1:], " "))
	p := &podProcess{container: ctr, port: port}
	p.proc = framework.StartProcess(t, "env", append(append(env, bin), args...)...)
	return p
}

// writeVolume writes the files of the volume mounted by m.
func writeVolume(t *testing.T, admin kubernetes.Interface, pod *corev1.Pod, m corev1.VolumeMount, dir string) {
	t.Helper()
	i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
	if i < 0 {
		t.Fatalf("volume mount %s: no such volume", m.Name)
	}
	files := map[string][]byte{}
	switch v := pod.Spec.Volumes[i]; {
	case v.Secret != nil:
		s, err := admin.CoreV1().Secrets(pod.Namespace).Get(t.Context(), v.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("volume %s: %v", v.Name, err)
		}
		files = s.Data
	case v.ConfigMap != nil:
		cm, err := admin.CoreV1().ConfigMaps(pod.Namespace).Get(t.Context(), v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("volume %s: %v", v.Name, err)
		}
		for k, s := range cm.Data {
			files[k] = []byte(s)
		}
	default:
		t.Fatalf("volume %s: a kind the emulation does not know", v.Name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig with a token of the
// ServiceAccount (TokenRequest: the e2e cluster has no token controller)
// and returns its path.
func serviceAccountKubeconfig(t *testing.T, c *framework.Cluster, ns, name, path string) string {
	t.Helper()
	exp := int64(3600)
	tr, err := c.Client(t).CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for %s/%s: %v", ns, name, err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster: {server: %s, certificate-authority: %s}\n"+
		"users:\n- name: sa\n  user: {token: %s}\ncontexts:\n- name: e2e\n  context: {cluster: e2e, user: sa}\ncurrent-context: e2e\n",
		q(c.Server), q(c.CAFile), q(tr.Status.Token))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitProbes waits until the startup, liveness and readiness probes succeed
// as kubelet runs them (HTTPS without verifying the certificate).
func (p *podProcess) waitProbes(t *testing.T, timeout time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	for _, pr := range []*corev1.Probe{p.container.StartupProbe, p.container.LivenessProbe, p.container.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Scheme != corev1.URISchemeHTTPS || pr.HTTPGet.Port.IntValue() != int(p.container.Ports[0].ContainerPort) {
			t.Fatalf("a probe is missing, not HTTPS or not on the container's port: %+v", pr)
		}
		url, last := fmt.Sprintf("https://127.0.0.1:%d%s", p.port, pr.HTTPGet.Path), ""
		eventually(t, timeout, "probe "+url, func() bool {
			resp, err := hc.Get(url)
			if err != nil {
				last = err.Error()
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(b)
			return resp.StatusCode == http.StatusOK
		}, func() string { return last + "\n" + p.proc.Logs() })
	}
}

// client is an HTTPS client of kcedar that verifies its serving certificate
// against the chart's CA, with the chart's API server client certificate
// (or none).
func (pki chartPKI) httpClient(withCert bool) *http.Client {
	cfg := &tls.Config{RootCAs: pki.servingPool}
	if withCert {
		cfg.Certificates = []tls.Certificate{pki.client}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// checkDecisions asks through the API server (whose authorizer chain
// `kcedar manifests` wrote) and directly.
func checkDecisions(t *testing.T, c *framework.Cluster, p *podProcess, pki chartPKI) {
	t.Helper()
	alice, carol := c.ClientFor(t, "alice-token"), c.ClientFor(t, "carol-token")
	c.EnsureNamespace(t, "dev")
	// The API server caches a NoOpinion from before the object loaded for
	// unauthorizedTTL (30s as kcedar manifests writes it).
	eventually(t, 60*time.Second, "alice (group dev) lists pods in dev through the API server: the CedarPolicy object serves", func() bool {
		_, err := alice.CoreV1().Pods("dev").List(t.Context(), metav1.ListOptions{})
		return err == nil
	}, p.proc.Logs)
	if _, err := alice.CoreV1().Pods("prod").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice listing pods in prod: %v, want forbidden (no policy, no RBAC)", err)
	}
	_, err := carol.CoreV1().Secrets("dev").Get(t.Context(), "x", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no-secrets-for-contractors") {
		t.Errorf("carol getting a secret: %v, want forbidden by the chart's policy file no-secrets-for-contractors", err)
	}
	sar := authorizationv1.SubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", Groups: []string{"dev"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "pods", Namespace: "dev"}}}
	body, _ := json.Marshal(sar)
	url := fmt.Sprintf("https://127.0.0.1:%d/v1/authorize", p.port)
	for _, withCert := range []bool{true, false} {
		resp, err := pki.httpClient(withCert).Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("a SubjectAccessReview to kcedar, verifying the chart's serving certificate (client certificate %v): %v", withCert, err)
		}
		var out authorizationv1.SubjectAccessReview
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		switch {
		case withCert && (resp.StatusCode != http.StatusOK || !out.Status.Allowed):
			t.Errorf("with the chart's API server client certificate: %s, allowed %v; want 200 and allowed", resp.Status, out.Status.Allowed)
		case !withCert && resp.StatusCode != http.StatusUnauthorized:
			t.Errorf("without a client certificate: %s, want 401", resp.Status)
		}
	}
	// A malformed review, so that kcedar_bad_requests_total has a series.
	resp, err := pki.httpClient(true).Post(url, "application/json", strings.NewReader(`{"kind":"Pod"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a malformed review: %s, want 400", resp.Status)
	}
}

// monitoringExempt are the metrics the chart's monitoring reads that this
// kcedar does not export, each with the reason.
var monitoringExempt = map[string]string{
	"up": "Prometheus writes it for every target it scrapes",
}

// checkMetrics scrapes /metrics (verifying the serving certificate, without
// a client certificate, as the ServiceMonitor does) and checks that every
// metric the alerts and the dashboard read has a series.
func checkMetrics(t *testing.T, p *podProcess, pki chartPKI) {
	t.Helper()
	scraped := scrape(t, pki, p.port)
	objs := mustRenderChart(t, "kcedar", "kcedar-system", values(t, monitoringValues)).objects
	names := map[string]bool{}
	for _, e := range monitoringExpressions(t, objs) {
		for _, n := range metricNames(t, e.expr) {
			names[n] = true
		}
	}
	for n := range names {
		if !scraped[n] && monitoringExempt[n] == "" {
			t.Errorf("the monitoring reads %s, which the running kcedar does not export", n)
		}
	}
	t.Logf("%d metric names read by the monitoring, %d series names scraped", len(names), len(scraped))
}

func scrape(t *testing.T, pki chartPKI, port int) map[string]bool {
	t.Helper()
	resp, err := pki.httpClient(false).Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", port))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping /metrics without a client certificate: %v %v", err, resp)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	return names
}

func decodeAll(t *testing.T, b []byte) []obj {
	t.Helper()
	var out []obj
	for _, doc := range strings.Split(string(b), "\n---\n") {
		o := obj{}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
	return out
}

func schemaGK(group, kind string) schema.GroupKind { return schema.GroupKind{Group: group, Kind: kind} }

// eventually polls ok until it holds or d has passed.
func eventually(t *testing.T, d time.Duration, what string, ok func() bool, detail ...func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			more := ""
			for _, f := range detail {
				more += "\n" + f()
			}
			t.Fatalf("not within %v: %s%s", d, what, more)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// metricNames are the metrics expr reads.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	node, err := promql.NewParser(promql.Options{}).ParseExpr(expr)
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	var out []string
	promql.Inspect(node, func(n promql.Node, _ []promql.Node) error {
		if vs, ok := n.(*promql.VectorSelector); ok {
			out = append(out, vs.Name)
		}
		return nil
	})
	return out
}
