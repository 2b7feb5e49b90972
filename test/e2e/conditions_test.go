//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

// condNamespace is where everything of TestConditionalAdmissionEnforcement
// happens (the shared policies name it).
const condNamespace = "cond"

// condWebhookName is the webhook `kcedar manifests` prints.
const condWebhookName = "conditions.kcedar.dev"

// moduleRoot is the kcedar module's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// condCapture is one AdmissionReview the recording proxy forwarded to kcedar.
type condCapture struct {
	raw      json.RawMessage // the "request" member, as the API server sent it
	request  admissionv1.AdmissionRequest
	allowed  bool   // kcedar's answer
	message  string // kcedar's message when it refused
	received time.Time
}

// condRecorder is the recording HTTPS proxy the ValidatingWebhookConfiguration
// points at: it keeps every AdmissionReview and forwards it to kcedar.
type condRecorder struct {
	mu       sync.Mutex
	captures []condCapture
}

func (r *condRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.captures)
}

// since returns the captures from index i on for which keep is true.
func (r *condRecorder) since(i int, keep func(*condCapture) bool) []condCapture {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []condCapture
	for _, c := range r.captures[i:] {
		if keep(&c) {
			out = append(out, c)
		}
	}
	return out
}

// startCondProxy starts the recording proxy in front of kcedarURL (whose
// serving CA is kcedarCA) and returns it with the PEM CA that verifies it.
func startCondProxy(t *testing.T, kcedarURL string, kcedarCA []byte) (*httptest.Server, *condRecorder, []byte) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(kcedarCA) {
		t.Fatal("kcedar's CA file holds no certificate")
	}
	upstream := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(upstream.CloseIdleConnections)
	rec := &condRecorder{}
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, kcedarURL+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		resp, err := upstream.Do(req)
		if err != nil {
			http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
			return
		}
		c := condCapture{received: time.Now()}
		var in struct {
			Request json.RawMessage `json:"request"`
		}
		var out admissionv1.AdmissionReview
		if json.Unmarshal(body, &in) == nil && len(in.Request) > 0 && json.Unmarshal(in.Request, &c.request) == nil {
			c.raw = in.Request
			if resp.StatusCode == http.StatusOK && json.Unmarshal(answer, &out) == nil && out.Response != nil {
				c.allowed = out.Response.Allowed
				if out.Response.Result != nil {
					c.message = out.Response.Result.Message
				}
			}
			rec.mu.Lock()
			rec.captures = append(rec.captures, c)
			rec.mu.Unlock()
		}
		if ct := resp.Header.Get("Content-Type"); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
	}))
	proxy.StartTLS()
	t.Cleanup(proxy.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw})
	return proxy, rec, ca
}

// condCase is one request of the test, what must become of it, and what the
// KEP-native flow must decide for it (server/conformance_test.go replays it).
type condCase struct {
	file      string // testdata file name, without .json
	desc      string
	user      string // token user
	verb      string // the verb the API server authorized
	operation admissionv1.Operation
	name      string // object name in condNamespace
	sub       string // subresource
	accepted  bool
	decision  string   // Allow, Deny or NoOpinion: what kcedar decides with everything known
	mention   []string // a rejection's message must contain these
	do        func(ctx context.Context, cs kubernetes.Interface) error
}

// condRecord is a testdata file: one captured AdmissionRequest and its outcome.
type condRecord struct {
	Description string          `json:"description"`
	User        string          `json:"user"`
	Verb        string          `json:"verb"`
	Outcome     string          `json:"outcome"` // accepted or rejected
	Decision    string          `json:"decision"`
	Message     string          `json:"message,omitempty"`
	Request     json.RawMessage `json:"request"`
}

func condPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "cond"}},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

func condConfigMap(name, owner string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Data:       map[string]string{"owner": owner, "setting": "a"},
	}
}

// condUpdate reads name as admin and writes it back changed as cs (PUT).
func condUpdate(admin kubernetes.Interface, name string, change func(*corev1.ConfigMap)) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		cm, err := admin.CoreV1().ConfigMaps(condNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin get: %w", err)
		}
		change(cm)
		_, err = cs.CoreV1().ConfigMaps(condNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}
}

func condPatch(name, patch string) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.CoreV1().ConfigMaps(condNamespace).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
}

func condDelete(name string) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		return cs.CoreV1().ConfigMaps(condNamespace).Delete(ctx, name, metav1.DeleteOptions{})
	}
}

func condCreatePod(name, node string) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.CoreV1().Pods(condNamespace).Create(ctx, condPod(name, node), metav1.CreateOptions{})
		return err
	}
}

// condExec POSTs pods/exec without upgrading the connection: admission
// (CONNECT, with the PodExecOptions) runs before the API server looks for the
// node, which does not exist, so an admitted exec still fails, but not in
// admission.
func condExec(pod string, command ...string) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		req := cs.CoreV1().RESTClient().Post().Namespace(condNamespace).Resource("pods").Name(pod).SubResource("exec").
			Param("container", "c").Param("stdout", "true")
		for _, c := range command {
			req = req.Param("command", c)
		}
		return req.Do(ctx).Error()
	}
}

// condRejected reports whether err is kcedar's validating webhook refusing.
func condRejected(err error) bool {
	return err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), `admission webhook "`+condWebhookName+`" denied the request`)
}

// TestConditionalAdmissionEnforcement runs kcedar as the real kube-apiserver's
// authorization webhook with --admission-enforcement, configured exactly as
// `kcedar manifests --admission-enforcement` prints it (the validating webhook
// pointed at a recording proxy in front of kcedar), and checks that the
// conditions of conditional permits and forbids are enforced on create,
// update, patch, delete and connect, and that an unconditional user is
// unaffected. With KCEDAR_UPDATE_TESTDATA=1 it writes the AdmissionRequests
// it saw into server/testdata/admission, which server/conformance_test.go
// replays through the KEP-native flow.
func TestConditionalAdmissionEnforcement(t *testing.T) {
	root := moduleRoot(t)
	testdata := filepath.Join(root, "server", "testdata", "admission")
	policies := filepath.Join(testdata, "policies.cedar")
	bin := framework.KcedarBinary(t)

	// kcedar serve --admission-enforcement.
	dir := t.TempDir()
	caFile := filepath.Join(dir, "kcedar-ca.crt")
	addr := "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))
	kcedarURL := "https://" + addr
	// kcedar verifies the ValidatingWebhookConfiguration through its
	// cluster connection, here KUBECONFIG (--kubeconfig would make the
	// schema live), a file that exists once the cluster runs: kcedar
	// retries until it does.
	adminKubeconfig := filepath.Join(dir, "admin.kubeconfig")
	kcedar := framework.StartProcess(t, "env", "KUBECONFIG="+adminKubeconfig, bin, "serve", "--listen", addr, "--policies", policies, "--write-ca", caFile,
		"--admission-enforcement", "--reload-interval", "200ms")
	kcedarCA := kcedar.WaitForTLS(t, addr, caFile, 60*time.Second)

	// kcedar manifests, as a user would run it.
	manifests := filepath.Join(dir, "manifests")
	cmd := exec.Command(bin, "manifests", "--url", kcedarURL, "--ca-file", caFile, "--admission-enforcement",
		"--webhook-kubeconfig-path", framework.DirPlaceholder+"/kcedar-webhook.kubeconfig", "--output-dir", manifests)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcedar manifests: %v\n%s", err, out)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(manifests, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	authzConfig := condTestAuthorizationConfig(t, read("authorization-config.yaml"))
	webhookKubeconfig := read("kcedar-webhook.kubeconfig")
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(read("validating-webhook.yaml"), &vwc); err != nil {
		t.Fatalf("validating-webhook.yaml: %v", err)
	}
	condCheckPrintedWebhook(t, &vwc, kcedarURL, kcedarCA)

	// The webhook goes to the recording proxy; everything else stays as printed.
	proxy, rec, proxyCA := startCondProxy(t, kcedarURL, kcedarCA)
	proxyURL := proxy.URL + "/v1/admit"
	vwc.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &proxyURL, CABundle: proxyCA}

	c := framework.Start(t, framework.Options{
		AuthorizationConfig: authzConfig,
		Files:               map[string]string{"kcedar-webhook.kubeconfig": string(webhookKubeconfig)},
		Tokens: []framework.Token{
			{Token: "alice-token", User: "alice", UID: "alice-uid"},
			{Token: "bob-token", User: "bob", UID: "bob-uid", Groups: []string{"trusted"}},
		},
	})
	ctx := t.Context()
	admin := c.Client(t)
	clients := map[string]kubernetes.Interface{"alice": c.ClientFor(t, "alice-token"), "bob": c.ClientFor(t, "bob-token")}
	c.EnsureNamespace(t, condNamespace)

	kubeconfig, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(adminKubeconfig, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	// Until kcedar has verified the webhook in place, nothing would enforce
	// a condition, so it folds alice's conditional create (NoOpinion) and
	// RBAC, which grants alice nothing, refuses it: the webhook cannot be
	// left out by accident.
	time.Sleep(time.Second) // kcedar connects, and its informer finds no webhook
	if _, err := clients["alice"].CoreV1().Pods(condNamespace).Create(ctx, condPod("before-webhook", "n1"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("before the webhook is installed, alice's conditional create: want 403, got %v", err)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &vwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the ValidatingWebhookConfiguration: %v", err)
	}
	condWaitForWebhook(t, ctx, admin, clients["alice"])

	// Objects the cases work on, made by the admin (admitted: no policy
	// makes the admin conditional).
	for _, cm := range []*corev1.ConfigMap{
		condConfigMap("cm-update", "alice", nil),
		condConfigMap("cm-patch", "alice", nil),
		condConfigMap("cm-bob", "alice", nil),
		condConfigMap("cm-unprotected", "alice", map[string]string{"protected": "false"}),
		condConfigMap("cm-protected", "alice", map[string]string{"protected": "true"}),
		condConfigMap("cm-bob-protected", "alice", map[string]string{"protected": "true"}),
	} {
		if _, err := admin.CoreV1().ConfigMaps(condNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("admin creates configmap %s: %v", cm.Name, err)
		}
	}

	cases := []condCase{
		{file: "create-pod-n1", desc: "alice creates a pod on node n1", user: "alice", verb: "create", operation: admissionv1.Create,
			name: "pod-n1", accepted: true, decision: "Allow", do: condCreatePod("pod-n1", "n1")},
		{file: "create-pod-n2", desc: "alice creates a pod on node n2", user: "alice", verb: "create", operation: admissionv1.Create,
			name: "pod-n2", decision: "NoOpinion", mention: []string{"alice-pods-on-n1", "alice may run pods only on node n1"}, do: condCreatePod("pod-n2", "n2")},
		{file: "create-pod-control", desc: "alice creates a pod on the control-plane node (a forbid holds)", user: "alice", verb: "create", operation: admissionv1.Create,
			name: "pod-control", decision: "Deny", mention: []string{"alice-not-on-control", "alice never runs pods on the control-plane node"}, do: condCreatePod("pod-control", "control")},
		{file: "create-pod-bob-n2", desc: "bob (unconditional) creates a pod on node n2", user: "bob", verb: "create", operation: admissionv1.Create,
			name: "pod-bob-n2", accepted: true, decision: "Allow", do: condCreatePod("pod-bob-n2", "n2")},
		{file: "update-cm-owner-kept", desc: "alice updates a configmap, keeping its owner", user: "alice", verb: "update", operation: admissionv1.Update,
			name: "cm-update", accepted: true, decision: "Allow", do: condUpdate(admin, "cm-update", func(cm *corev1.ConfigMap) { cm.Data["setting"] = "b" })},
		{file: "update-cm-owner-changed", desc: "alice updates a configmap, changing its owner", user: "alice", verb: "update", operation: admissionv1.Update,
			name: "cm-update", decision: "NoOpinion", mention: []string{"alice-configmaps-keep-owner", "not change their owner"},
			do: condUpdate(admin, "cm-update", func(cm *corev1.ConfigMap) { cm.Data["owner"] = "mallory" })},
		{file: "update-cm-owner-removed", desc: "alice updates a configmap, removing its owner", user: "alice", verb: "update", operation: admissionv1.Update,
			name: "cm-update", decision: "NoOpinion", mention: []string{"alice-configmaps-keep-owner"},
			do: condUpdate(admin, "cm-update", func(cm *corev1.ConfigMap) { delete(cm.Data, "owner") })},
		{file: "patch-cm-owner-kept", desc: "alice patches a configmap, keeping its owner", user: "alice", verb: "patch", operation: admissionv1.Update,
			name: "cm-patch", accepted: true, decision: "Allow", do: condPatch("cm-patch", `{"data":{"setting":"c"}}`)},
		{file: "patch-cm-owner-changed", desc: "alice patches a configmap, changing its owner", user: "alice", verb: "patch", operation: admissionv1.Update,
			name: "cm-patch", decision: "NoOpinion", mention: []string{"alice-configmaps-keep-owner"}, do: condPatch("cm-patch", `{"data":{"owner":"mallory"}}`)},
		{file: "update-cm-bob-owner-changed", desc: "bob (unconditional) updates a configmap, changing its owner", user: "bob", verb: "update", operation: admissionv1.Update,
			name: "cm-bob", accepted: true, decision: "Allow", do: condUpdate(admin, "cm-bob", func(cm *corev1.ConfigMap) { cm.Data["owner"] = "bob" })},
		{file: "delete-cm-unprotected", desc: "alice deletes an unprotected configmap", user: "alice", verb: "delete", operation: admissionv1.Delete,
			name: "cm-unprotected", accepted: true, decision: "Allow", do: condDelete("cm-unprotected")},
		{file: "delete-cm-protected", desc: "alice deletes a configmap labeled protected=true", user: "alice", verb: "delete", operation: admissionv1.Delete,
			name: "cm-protected", decision: "NoOpinion", mention: []string{"alice-deletes-unprotected", "unless they are labeled protected=true"}, do: condDelete("cm-protected")},
		{file: "delete-cm-bob-protected", desc: "bob (unconditional) deletes a configmap labeled protected=true", user: "bob", verb: "delete", operation: admissionv1.Delete,
			name: "cm-bob-protected", accepted: true, decision: "Allow", do: condDelete("cm-bob-protected")},
		{file: "connect-exec-ls", desc: "alice execs ls in a pod", user: "alice", verb: "create", operation: admissionv1.Connect,
			name: "pod-n1", sub: "exec", accepted: true, decision: "Allow", do: condExec("pod-n1", "ls")},
		{file: "connect-exec-sh", desc: "alice execs sh in a pod", user: "alice", verb: "create", operation: admissionv1.Connect,
			name: "pod-n1", sub: "exec", decision: "NoOpinion", mention: []string{"alice-exec-ls", "alice may only run ls in pods"}, do: condExec("pod-n1", "sh", "-c", "id")},
	}
	records := map[string]condRecord{}
	for _, cc := range cases {
		t.Run(cc.file, func(t *testing.T) {
			mark := rec.count()
			err := cc.do(ctx, clients[cc.user])
			if err != nil {
				t.Logf("%s: %v", cc.desc, err)
			}
			switch {
			case cc.accepted && condRejected(err):
				t.Fatalf("%s: refused in admission, want admitted: %v", cc.desc, err)
			case cc.accepted && err != nil && cc.operation != admissionv1.Connect:
				t.Fatalf("%s: %v", cc.desc, err)
			case !cc.accepted && !condRejected(err):
				t.Fatalf("%s: want refused by %s, got %v", cc.desc, condWebhookName, err)
			}
			for _, m := range cc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%s: the error does not name %q: %v", cc.desc, m, err)
				}
			}
			// The AdmissionReview kcedar saw for it.
			got := rec.since(mark, func(c *condCapture) bool {
				r := &c.request
				return r.UserInfo.Username == cc.user && r.Operation == cc.operation && r.Namespace == condNamespace &&
					r.Name == cc.name && r.SubResource == cc.sub
			})
			if len(got) != 1 {
				t.Fatalf("%s: %d matching AdmissionReviews reached kcedar, want 1", cc.desc, len(got))
			}
			if got[0].allowed != cc.accepted {
				t.Fatalf("%s: kcedar answered allowed=%v (%s)", cc.desc, got[0].allowed, got[0].message)
			}
			r := condRecord{Description: cc.desc, User: cc.user, Verb: cc.verb, Outcome: "rejected", Decision: cc.decision, Message: got[0].message, Request: got[0].raw}
			if cc.accepted {
				r.Outcome = "accepted"
			}
			records[cc.file] = r
		})
	}

	t.Run("objects kept as the conditions decided", func(t *testing.T) {
		pods, err := admin.CoreV1().Pods(condNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=cond"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		if want := []string{"pod-bob-n2", "pod-n1"}; !slices.Equal(names, want) {
			t.Errorf("pods %v, want %v", names, want)
		}
		for name, owner := range map[string]string{"cm-update": "alice", "cm-patch": "alice", "cm-bob": "bob", "cm-protected": "alice"} {
			cm, err := admin.CoreV1().ConfigMaps(condNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("configmap %s: %v", name, err)
				continue
			}
			if cm.Data["owner"] != owner {
				t.Errorf("configmap %s: owner %q, want %q", name, cm.Data["owner"], owner)
			}
		}
		for _, name := range []string{"cm-unprotected", "cm-bob-protected"} {
			if _, err := admin.CoreV1().ConfigMaps(condNamespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("configmap %s: want deleted, got %v", name, err)
			}
		}
	})

	if t.Failed() || len(records) != len(cases) {
		return
	}
	if os.Getenv("KCEDAR_UPDATE_TESTDATA") == "1" {
		condWriteTestdata(t, testdata, records)
	}
}

// condTestAuthorizationConfig takes the printed AuthorizationConfiguration
// and only turns the webhook's decision cache off (the test changes what
// the same request gets within seconds).
func condTestAuthorizationConfig(t *testing.T, printed []byte) string {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(printed, &cfg); err != nil {
		t.Fatalf("authorization-config.yaml: %v", err)
	}
	authorizers, _ := cfg["authorizers"].([]any)
	var kinds []string
	found := false
	for _, a := range authorizers {
		m, _ := a.(map[string]any)
		typ, _ := m["type"].(string)
		kinds = append(kinds, typ)
		if typ != "Webhook" {
			continue
		}
		wh, _ := m["webhook"].(map[string]any)
		ci, _ := wh["connectionInfo"].(map[string]any)
		if got := ci["kubeConfigFile"]; got != framework.DirPlaceholder+"/kcedar-webhook.kubeconfig" {
			t.Fatalf("printed kubeConfigFile %v, want the --webhook-kubeconfig-path given", got)
		}
		if wh["failurePolicy"] != "Deny" {
			t.Errorf("printed authorizer failurePolicy %v, want Deny", wh["failurePolicy"])
		}
		wh["cacheAuthorizedRequests"] = false
		wh["cacheUnauthorizedRequests"] = false
		found = true
	}
	if !found || !slices.Equal(kinds, []string{"Node", "Webhook", "RBAC"}) {
		t.Fatalf("printed authorizers %v, want Node, Webhook (kcedar), RBAC", kinds)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// condCheckPrintedWebhook checks the printed ValidatingWebhookConfiguration
// before its clientConfig is redirected to the proxy.
func condCheckPrintedWebhook(t *testing.T, vwc *admissionregistrationv1.ValidatingWebhookConfiguration, kcedarURL string, ca []byte) {
	t.Helper()
	if vwc.Kind != "ValidatingWebhookConfiguration" || vwc.APIVersion != "admissionregistration.k8s.io/v1" || len(vwc.Webhooks) != 1 {
		t.Fatalf("printed webhook configuration: %s %s with %d webhooks", vwc.APIVersion, vwc.Kind, len(vwc.Webhooks))
	}
	wh := vwc.Webhooks[0]
	if wh.Name != condWebhookName {
		t.Errorf("webhook name %q", wh.Name)
	}
	if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", wh.FailurePolicy)
	}
	if wh.ClientConfig.URL == nil || *wh.ClientConfig.URL != kcedarURL+"/v1/admit" || !bytes.Equal(wh.ClientConfig.CABundle, ca) {
		t.Errorf("clientConfig %+v, want %s/v1/admit with kcedar's CA", wh.ClientConfig, kcedarURL)
	}
	if len(wh.Rules) != 1 {
		t.Fatalf("%d rules, want 1", len(wh.Rules))
	}
	ops := wh.Rules[0].Operations
	want := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete, admissionregistrationv1.Connect}
	if !slices.Equal(ops, want) {
		t.Errorf("operations %v, want %v", ops, want)
	}
	r := wh.Rules[0].Rule
	if !slices.Equal(r.APIGroups, []string{"*"}) || !slices.Equal(r.APIVersions, []string{"*"}) || !slices.Equal(r.Resources, []string{"*/*"}) {
		t.Errorf("rule %+v does not cover every resource and subresource", r)
	}
	if wh.SideEffects == nil || *wh.SideEffects != admissionregistrationv1.SideEffectClassNone {
		t.Errorf("sideEffects %v, want None", wh.SideEffects)
	}
	if !slices.Equal(wh.AdmissionReviewVersions, []string{"v1"}) {
		t.Errorf("admissionReviewVersions %v", wh.AdmissionReviewVersions)
	}
}

// condWaitForWebhook waits until the webhook configuration is in effect: a
// create alice may not make (a pod on node n2) is refused in admission. Such
// creates admitted before that are removed.
func condWaitForWebhook(t *testing.T, ctx context.Context, admin, alice kubernetes.Interface) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		name := fmt.Sprintf("probe-%d", i)
		_, err := alice.CoreV1().Pods(condNamespace).Create(ctx, condPod(name, "n2"), metav1.CreateOptions{})
		if condRejected(err) {
			t.Logf("webhook in effect after %d probes", i+1)
			return
		}
		if err == nil {
			if err := admin.CoreV1().Pods(condNamespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatalf("deleting probe pod %s: %v", name, err)
			}
		} else {
			t.Logf("probe %s: %v", name, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the validating webhook was not in effect after 60s (last probe: %v)", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// condWriteTestdata replaces the *.json files of dir with records.
func condWriteTestdata(t *testing.T, dir string, records map[string]condRecord) {
	t.Helper()
	old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	for name, r := range records {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d captured AdmissionRequests into %s", len(records), dir)
}
