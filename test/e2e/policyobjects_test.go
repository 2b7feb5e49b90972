//go:build e2e

package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/wire"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// poPKI writes a CA and a serving certificate for 127.0.0.1 that both
// replicas use, so the API server's webhook kubeconfig can be written before
// any replica starts.
func poPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, leafKey := key(), key()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kcedar-e2e-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kcedar"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caTmpl, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKeyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for f, b := range map[string]*pem.Block{caFile: {Type: "CERTIFICATE", Bytes: caDER}, certFile: {Type: "CERTIFICATE", Bytes: leafDER}, keyFile: {Type: "EC PRIVATE KEY", Bytes: leafKeyDER}} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return caFile, certFile, keyFile
}

// roundRobin is a TCP front for the replicas, as a Service would be: each
// connection goes to the next replica; one that does not answer is skipped.
type roundRobin struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint64
}

func startRoundRobin(t *testing.T, backends ...string) *roundRobin {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rr := &roundRobin{ln: ln, backends: backends}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go rr.serve(c)
		}
	}()
	return rr
}

func (rr *roundRobin) serve(c net.Conn) {
	defer c.Close()
	var up net.Conn
	for i := 0; i < len(rr.backends) && up == nil; i++ {
		b := rr.backends[rr.next.Add(1)%uint64(len(rr.backends))]
		up, _ = net.DialTimeout("tcp", b, time.Second)
	}
	if up == nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}

type poReplica struct {
	addr string
	args []string
	env  []string // NAME=value for kcedar's environment
	proc *framework.Process
}

func (r *poReplica) start(t *testing.T) {
	args := append(append(append([]string{}, r.env...), framework.KcedarBinary(t)), r.args...)
	r.proc = framework.StartProcess(t, "env", args...)
}

// poEnv is a cluster whose API server authorizes through two kcedar
// replicas serving policy objects (and nothing else).
type poEnv struct {
	c        *framework.Cluster
	hc       *http.Client // trusts the replicas' serving certificate
	replicas []*poReplica
	dyn      dynamic.Interface
	cluster  dynamic.ResourceInterface // CedarPolicy objects
	alice    kubernetes.Interface
	bob      kubernetes.Interface // in group team-a-admins
}

// poOptions: how startPolicyObjects sets things up.
type poOptions struct {
	// live: the replicas read the schema from the cluster (--kubeconfig)
	// instead of the embedded default.
	live bool
	// direct: the API server calls replica 0 only, at its address, as a
	// control-plane node's API server calls its own kcedar at 127.0.0.1
	// (the DaemonSet of deploy/); otherwise a round-robin front, as a
	// Service would be (the Deployment overlay).
	direct bool
	// apiserverFlags and apiserverFiles go to the API server
	// (framework.Options.ExtraFlags, Files); kcedarEnv (NAME=value) to
	// every replica's environment.
	apiserverFlags []string
	apiserverFiles map[string]string
	kcedarEnv      []string
}

// startPolicyObjects starts the cluster and the replicas and waits for both
// to be ready.
func startPolicyObjects(t *testing.T, o poOptions) *poEnv {
	dir := t.TempDir()
	caFile, certFile, keyFile := poPKI(t, dir)
	ca, _ := os.ReadFile(caFile)
	secret := make([]byte, 32)
	rand.Read(secret)
	keysFile := filepath.Join(dir, "condition-keys")
	if err := os.WriteFile(keysFile, []byte("k1 "+base64.StdEncoding.EncodeToString(secret)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	replicas := []*poReplica{{addr: "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))}, {addr: "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))}}
	url := "https://" + replicas[0].addr
	if !o.direct {
		url = "https://" + startRoundRobin(t, replicas[0].addr, replicas[1].addr).ln.Addr().String()
	}

	// The API server's configuration, from kcedar manifests as a user runs it
	// (matchConditions excluding kcedar's identity and the control plane),
	// with the decision caches off so changes show at once.
	manifests := filepath.Join(dir, "manifests")
	out, err := exec.Command(framework.KcedarBinary(t), "manifests", "--url", url, "--ca-file", caFile, "--policy-objects",
		"--webhook-kubeconfig-path", framework.DirPlaceholder+"/kcedar-webhook.kubeconfig", "-o", manifests).CombinedOutput()
	if err != nil {
		t.Fatalf("kcedar manifests: %v\n%s", err, out)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(manifests, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	authz := strings.NewReplacer("authorizedTTL: 30s", "authorizedTTL: 1s\n    cacheAuthorizedRequests: false", "unauthorizedTTL: 30s", "unauthorizedTTL: 1s\n    cacheUnauthorizedRequests: false").Replace(read("authorization-config.yaml"))
	// Without the caches every request reaches kcedar: the restart test
	// must see the outage, not answers cached before it.
	if !strings.Contains(authz, "cacheAuthorizedRequests: false") || !strings.Contains(authz, "cacheUnauthorizedRequests: false") || !strings.Contains(authz, "failurePolicy: Deny") {
		t.Fatalf("the AuthorizationConfiguration does not have the caches off and failurePolicy Deny:\n%s", authz)
	}
	files := map[string]string{"kcedar-webhook.kubeconfig": read("kcedar-webhook.kubeconfig")}
	maps.Copy(files, o.apiserverFiles)
	c := framework.Start(t, framework.Options{
		AuthorizationConfig: authz,
		ExtraFlags:          o.apiserverFlags,
		Files:               files,
		Tokens: []framework.Token{
			{Token: "alice-token", User: "alice"},
			{Token: "bob-token", User: "bob", Groups: []string{"team-a-admins"}},
		},
	})
	ctx := t.Context()
	admin := c.Client(t)
	for _, ns := range []string{"a", "b", "kcedar-system"} {
		c.EnsureNamespace(t, ns)
	}
	installPolicyCRDs(t, c)
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict([]byte(read("policy-webhook.yaml")), &vwc); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	started := time.Now()
	for _, r := range replicas {
		// A short shutdown delay: no load balancer has to take the
		// replica out before its listener closes.
		r.args = []string{"serve", "--listen", r.addr, "--policy-objects",
			"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--conditions-key-file", keysFile,
			"--status-lease-namespace", "kcedar-system", "--log-level", "debug", "--shutdown-delay", "1s"}
		// One connection to the cluster: --kubeconfig (which also makes
		// the schema live), or KUBECONFIG (the embedded schema).
		if o.live {
			r.args = append(r.args, "--kubeconfig", c.Kubeconfig)
		} else {
			r.env = []string{"KUBECONFIG=" + c.Kubeconfig}
		}
		r.env = append(r.env, o.kcedarEnv...)
		r.start(t)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: poolOf(t, ca)}}}
	for i, r := range replicas {
		waitReady(t, hc, r, 120*time.Second)
		t.Logf("replica %d ready %v after the replicas' start (live schema: %v)", i, time.Since(started).Round(time.Millisecond), o.live)
	}
	dyn, err := dynamic.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	return &poEnv{c: c, hc: hc, replicas: replicas, dyn: dyn, cluster: dyn.Resource(policyobjects.ClusterResource),
		alice: c.ClientFor(t, "alice-token"), bob: c.ClientFor(t, "bob-token")}
}

// TestPolicyObjects: the API server calls replica 0 directly; both replicas
// serve the embedded schema.
func TestPolicyObjects(t *testing.T) {
	env := startPolicyObjects(t, poOptions{direct: true})
	hc, replicas, dyn, cluster, alice, bob := env.hc, env.replicas, env.dyn, env.cluster, env.alice, env.bob
	ctx := t.Context()
	listPods := func(cs kubernetes.Interface, ns string) error {
		_, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	}
	if err := listPods(alice, "b"); !isForbidden(err) {
		t.Fatalf("before any policy, alice listing pods: %v", err)
	}

	t.Run("create takes effect on both replicas within 5s, delete revokes", func(t *testing.T) {
		start := time.Now()
		createPolicy(t, cluster, policyobjects.KindCluster, "", "alice-pods", `@id("alice-pods") permit(principal == k8s::User::"alice", action == k8s::Action::"list", resource is core::pods);`)
		within(t, 5*time.Second, "alice allowed by both replicas and the API server", func() bool {
			return sarAllowed(t, hc, replicas[0], "alice", "list", "b") && sarAllowed(t, hc, replicas[1], "alice", "list", "b") && listPods(alice, "b") == nil
		})
		t.Logf("effective on both after %v", time.Since(start).Round(time.Millisecond))
		within(t, 20*time.Second, "status Accepted=True with the policy ids", func() bool {
			u, err := cluster.Get(ctx, "alice-pods", metav1.GetOptions{})
			if err != nil {
				return false
			}
			ids, _, _ := unstructured.NestedStringSlice(u.Object, "status", "policies")
			og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			return accepted(u) == "True" && len(ids) == 1 && ids[0] == "alice-pods" && og == u.GetGeneration()
		})
		start = time.Now()
		if err := cluster.Delete(ctx, "alice-pods", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		within(t, 5*time.Second, "alice revoked on both replicas and through the API server", func() bool {
			return !sarAllowed(t, hc, replicas[0], "alice", "list", "b") && !sarAllowed(t, hc, replicas[1], "alice", "list", "b") && isForbidden(listPods(alice, "b"))
		})
		t.Logf("revoked on both after %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("invalid policy rejected at admission with line:column", func(t *testing.T) {
		u := poObject(policyobjects.KindCluster, "", "bad", "permit(principal, action, resource is core::pods)\nwhen { resource.nmespace == \"a\" };")
		_, err := cluster.Create(ctx, u, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "CedarPolicy/bad:2:") {
			t.Fatalf("want an admission error at CedarPolicy/bad:2:..., got %v", err)
		}
		t.Logf("kubectl would print: %v", err)
		u = poObject(policyobjects.KindNamespaced, "a", "forbid", "forbid(principal, action, resource);")
		if _, err := dyn.Resource(policyobjects.NamespacedResource).Namespace("a").Create(ctx, u, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "may only permit") {
			t.Fatalf("namespaced forbid: %v", err)
		}
	})

	t.Run("a NamespacedCedarPolicy permitting everything allows nothing outside its namespace", func(t *testing.T) {
		createPolicy(t, dyn.Resource(policyobjects.NamespacedResource).Namespace("a"), policyobjects.KindNamespaced, "a", "everything", `permit(principal, action, resource);`)
		within(t, 5*time.Second, "bob allowed in a", func() bool { return listPods(bob, "a") == nil })
		if err := listPods(bob, "b"); !isForbidden(err) {
			t.Errorf("bob listing pods in b: %v", err)
		}
		if err := listPods(bob, ""); !isForbidden(err) {
			t.Errorf("bob listing pods in every namespace: %v", err)
		}
		if _, err := bob.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !isForbidden(err) {
			t.Errorf("bob listing namespaces: %v", err)
		}
		if _, err := bob.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bobs"}}, metav1.CreateOptions{}); !isForbidden(err) {
			t.Errorf("bob creating a namespace: %v", err)
		}
		if err := bob.CoreV1().Namespaces().Delete(ctx, "a", metav1.DeleteOptions{}); !isForbidden(err) {
			t.Errorf("bob deleting namespace a (cluster-scoped): %v", err)
		}
		if _, err := bob.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx); !isForbidden(err) {
			t.Errorf("bob reading /metrics (non-resource): %v", err)
		}
		for _, r := range replicas {
			if sarAllowed(t, hc, r, "bob", "get", "kube-system") || sarAllowed(t, hc, r, "bob", "list", "") {
				t.Errorf("replica %s allowed bob outside a", r.addr)
			}
		}
	})

	t.Run("a condition issued by replica 1 is evaluated by replica 2", func(t *testing.T) {
		createPolicy(t, cluster, policyobjects.KindCluster, "", "node-n1", `@id("alice-pods-on-n1") permit(principal == k8s::User::"alice", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };`)
		var decision *wire.ConditionsAwareDecision
		within(t, 5*time.Second, "a conditional answer from replica 1", func() bool {
			decision = conditionalSAR(t, hc, replicas[0])
			return decision != nil
		})
		for node, want := range map[string]wire.DecisionType{"n1": wire.DecisionTypeAllow, "n2": wire.DecisionTypeNoOpinion} {
			got := evaluateConditions(t, hc, replicas[1], decision, node, "alice")
			if got != want {
				t.Errorf("replica 2 on the pod on %s: %s, want %s", node, got, want)
			}
		}
		// The conditions were issued for alice: presented for bob's request
		// they do not verify, and the allow condition does not allow.
		if got := evaluateConditions(t, hc, replicas[1], decision, "n1", "bob"); got == wire.DecisionTypeAllow {
			t.Errorf("alice's conditions presented for bob: %s, want them refused", got)
		}
	})

	t.Run("restarting the replica the API server calls, under load: the policies' answers or the failurePolicy's, ready within 10s", func(t *testing.T) {
		createPolicy(t, cluster, policyobjects.KindCluster, "", "alice-b", `@id("alice-b") permit(principal == k8s::User::"alice", action == k8s::Action::"list", resource is core::pods) when { resource.namespace == "b" };`)
		within(t, 5*time.Second, "alice allowed in b on both replicas and through the API server", func() bool {
			return sarAllowed(t, hc, replicas[0], "alice", "list", "b") && sarAllowed(t, hc, replicas[1], "alice", "list", "b") && listPods(alice, "b") == nil
		})

		// Each answer with when it was asked and answered. The policies
		// allow alice to list pods in b and nothing in kcedar-system (kcedar
		// answers NoOpinion, RBAC forbids). The failurePolicy (Deny) refuses
		// both: kube-apiserver answers a webhook failure with failurePolicy
		// Deny as 500 Internal Server Error naming the webhook's error. So
		// any 500 must fall in the outage; a Forbidden in b, an Allow in
		// kcedar-system or any other error is wrong at any time.
		type answer struct {
			from, to time.Time
			inB      bool
			err      error
		}
		var mu sync.Mutex
		var answers []answer
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					for _, ns := range []string{"b", "kcedar-system"} {
						from := time.Now()
						err := listPods(alice, ns)
						mu.Lock()
						answers = append(answers, answer{from: from, to: time.Now(), inB: ns == "b", err: err})
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(time.Second)
		r := replicas[0]
		stopped := time.Now()
		r.proc.Stop() // SIGTERM: serves for --shutdown-delay, then the listener closes
		exited := time.Now()
		time.Sleep(3 * time.Second) // the outage
		restarted := time.Now()
		r.start(t)
		waitReady(t, hc, r, 10*time.Second)
		ready := time.Now()
		t.Logf("replica 0: SIGTERM to exit %v, down %v, ready %v after its start", exited.Sub(stopped).Round(time.Millisecond), restarted.Sub(exited).Round(time.Millisecond), ready.Sub(restarted).Round(time.Millisecond))
		time.Sleep(2 * time.Second)
		close(stop)
		wg.Wait()

		// The outage: from SIGTERM until the replica is ready again (and
		// a second for requests in flight at that moment).
		outageFrom, outageTo := stopped, ready.Add(time.Second)
		var allowed, allowedAfter, failurePolicy, policyDeny int
		var wrong, failures []string
		at := func(a answer) string { return a.from.Format("15:04:05.000") }
		for _, a := range answers {
			during := a.to.After(outageFrom) && a.from.Before(outageTo)
			switch {
			case a.err == nil && a.inB:
				allowed++
				if a.from.After(ready) {
					allowedAfter++
				}
			case a.err == nil:
				wrong = append(wrong, "alice listed pods in kcedar-system at "+at(a))
			case isForbidden(a.err) && a.inB:
				wrong = append(wrong, fmt.Sprintf("alice forbidden in b at %s: %v", at(a), a.err))
			case isForbidden(a.err):
				policyDeny++
			case apierrors.IsInternalError(a.err) && during:
				failurePolicy++
				if len(failures) < 3 {
					failures = append(failures, a.err.Error())
				}
			default:
				wrong = append(wrong, fmt.Sprintf("%v at %s", a.err, at(a)))
			}
		}
		t.Logf("under load: %d answers: %d allowed in b (the policies; %d after the restart), %d forbidden in kcedar-system (the policies), %d refused by the failurePolicy during the outage, %d wrong; failurePolicy answers look like: %s",
			len(answers), allowed, allowedAfter, policyDeny, failurePolicy, len(wrong), strings.Join(failures, " | "))
		if len(wrong) > 0 {
			t.Fatalf("%d answers were neither the policies' nor the failurePolicy's, e.g. %s", len(wrong), strings.Join(wrong[:min(len(wrong), 5)], "; "))
		}
		if failurePolicy == 0 {
			t.Fatal("no answer came from the failurePolicy: the outage went unseen (cached or routed around)")
		}
		if allowedAfter == 0 {
			t.Fatal("nothing was allowed after the restart: the replica does not serve again")
		}
	})
}

func poolOf(t *testing.T, ca []byte) *x509.CertPool {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(ca) {
		t.Fatal("no CA certificate")
	}
	return p
}

func waitReady(t *testing.T, hc *http.Client, r *poReplica, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := hc.Get("https://" + r.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not ready within %v (last: %v)\n%s", r.addr, timeout, err, r.proc.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func within(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func installPolicyCRDs(t *testing.T, c *framework.Cluster) {
	t.Helper()
	crds, err := policyobjects.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := apiextensionsclient.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	within(t, 30*time.Second, "CRDs established", func() bool {
		for _, crd := range crds {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), crd.Name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			ok := false
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					ok = true
				}
			}
			if !ok {
				return false
			}
		}
		return true
	})
}

func poObject(kind, ns, name, content string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": policyobjects.GroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"content": content}}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u
}

func createPolicy(t *testing.T, ri dynamic.ResourceInterface, kind, ns, name, content string) {
	t.Helper()
	// The webhook may not be reachable the instant the CRDs are; retry briefly.
	var err error
	for i := 0; i < 50; i++ {
		if _, err = ri.Create(t.Context(), poObject(kind, ns, name, content), metav1.CreateOptions{}); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("creating %s %s: %v", kind, name, err)
}

func accepted(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == policyobjects.ConditionAccepted {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

func post(t *testing.T, hc *http.Client, url string, in, out any) int {
	t.Helper()
	body, _ := json.Marshal(in)
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("decoding %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

// sarAllowed asks one replica directly.
func sarAllowed(t *testing.T, hc *http.Client, r *poReplica, user, verb, ns string) bool {
	sar := authorizationv1.SubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Version: "v1", Resource: "pods", Namespace: ns}}}
	var out authorizationv1.SubjectAccessReview
	return post(t, hc, "https://"+r.addr+"/v1/authorize", sar, &out) == http.StatusOK && out.Status.Allowed
}

// conditionalSAR asks replica r about alice creating a pod in b, taking
// conditions; nil unless the answer is a ConditionsMap.
func conditionalSAR(t *testing.T, hc *http.Client, r *poReplica) *wire.ConditionsAwareDecision {
	sar := wire.SubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}}
	sar.Spec.User = "alice"
	sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Verb: "create", Version: "v1", Resource: "pods", Namespace: "b", Name: "p"}
	sar.Spec.AuthorizationOptions = &wire.AuthorizationOptions{HandledDecisionTypes: []wire.DecisionType{wire.DecisionTypeAllow, wire.DecisionTypeDeny, wire.DecisionTypeNoOpinion, wire.DecisionTypeConditionsMap, wire.DecisionTypeUnion}}
	var out wire.SubjectAccessReview
	if post(t, hc, "https://"+r.addr+"/v1/authorize", sar, &out) != http.StatusOK {
		return nil
	}
	d := out.Status.ConditionalDecision
	if d == nil || d.Type != wire.DecisionTypeConditionsMap {
		return nil
	}
	return d
}

// evaluateConditions sends decision back to replica r, as the API server's
// callback would, for user's pod on node.
func evaluateConditions(t *testing.T, hc *http.Client, r *poReplica, decision *wire.ConditionsAwareDecision, node, user string) wire.DecisionType {
	t.Helper()
	pod := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "b"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	raw, _ := json.Marshal(pod)
	review := wire.AuthorizationConditionsReview{TypeMeta: metav1.TypeMeta{APIVersion: wire.ConditionsReviewVersion, Kind: wire.ConditionsReviewKind},
		Request: &wire.AuthorizationConditionsRequest{Decision: decision, AdmissionRequest: &admissionv1.AdmissionRequest{
			UID: "u", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "b", Name: "p", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
			// The user the request is made by: conditions are bound to the
			// user they were issued for.
			UserInfo: authenticationv1.UserInfo{Username: user}}}}
	var out wire.AuthorizationConditionsReview
	if code := post(t, hc, "https://"+r.addr+"/v1/conditions", review, &out); code != http.StatusOK {
		t.Fatalf("replica %s /v1/conditions: HTTP %d", r.addr, code)
	}
	if out.Response == nil || out.Response.Decision.Type == "" {
		t.Fatalf("no decision: %+v", out.Response)
	}
	return out.Response.Decision.Type
}
