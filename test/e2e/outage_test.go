//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

// outagePolicies: lead may create pods in team only on node safe-node (a
// conditional permit, enforced in admission), and a username shaped like a
// kube-system ServiceAccount that Kubernetes does not take for one gets
// nothing.
const outagePolicies = `
@id("lead-pods-on-safe-node")
@reason("lead may run pods in team only on node safe-node")
permit(principal == k8s::User::"lead", action == k8s::Action::"create", resource is core::pods)
when { resource.namespace == "team" && resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe-node" };

@id("not-a-service-account")
@reason("system:serviceaccount:kube-system:a:b is no ServiceAccount")
forbid(principal == k8s::User::"system:serviceaccount:kube-system:a:b", action, resource);
`

// outageIdentities are the cluster's users: the control plane's (a node, the
// controller manager, a kube-system ServiceAccount), kcedar's own
// ServiceAccount, lead (conditional), and a username shaped like a
// kube-system ServiceAccount that is not one.
var outageIdentities = []framework.Token{
	{Token: "node-token", User: "system:node:n1", Groups: []string{"system:nodes"}},
	{Token: "kcm-token", User: "system:kube-controller-manager"},
	{Token: "rs-token", User: "system:serviceaccount:kube-system:replicaset-controller", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}},
	{Token: "kcedar-token", User: "system:serviceaccount:kcedar-system:kcedar", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kcedar-system"}},
	{Token: "lead-token", User: "lead"},
	{Token: "fake-token", User: "system:serviceaccount:kube-system:a:b", Groups: []string{"system:serviceaccounts"}},
}

// TestAdmissionEnforcementOutage runs kcedar serve --admission-enforcement
// with both halves exactly as `kcedar manifests --admission-enforcement`
// prints them (the API server's decision caches on, as printed), kcedar as
// its own ServiceAccount with deploy/'s RBAC, the conditions webhook
// installed before kcedar starts. kcedar takes its status Lease at start
// (its writes skip the webhook); then, with kcedar stopped, the control
// plane keeps writing: a node's Lease in kube-node-lease, the controller
// manager's in kube-system, a kube-system ServiceAccount's ConfigMap,
// system:masters, and the API server's own identity Lease, whose renewals
// never fail. No conditionally allowed request goes through meanwhile:
// lead's create, allowed on conditions a moment before (and cached as
// allowed by the API server), is refused. A username that only looks like
// a kube-system ServiceAccount reaches kcedar, which forbids it, and is
// refused while kcedar is down. kcedar, started again, enforces the
// conditions again.
func TestAdmissionEnforcementOutage(t *testing.T) {
	env := startOutage(t)
	ctx := t.Context()
	lead, fake := env.c.ClientFor(t, "lead-token"), env.c.ClientFor(t, "fake-token")

	// kcedar up: the conditions hold or not; the look-alike is forbidden
	// by kcedar, the real ServiceAccount goes to RBAC.
	if _, err := lead.CoreV1().Pods("team").Create(ctx, outagePod("off-node", "other-node"), metav1.CreateOptions{}); !condRejected(err) {
		t.Fatalf("lead's pod on another node with kcedar up: %v, want refused by %s", err, condWebhookName)
	}
	if _, err := fake.CoreV1().ConfigMaps("kube-system").Create(ctx, outageConfigMap("fake-up"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "not-a-service-account") {
		t.Fatalf("the look-alike of a kube-system ServiceAccount with kcedar up: %v, want forbidden by kcedar's not-a-service-account", err)
	}
	rs := env.c.ClientFor(t, "rs-token")
	if _, err := rs.CoreV1().ConfigMaps("kube-system").Create(ctx, outageConfigMap("rs-up"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a kube-system ServiceAccount with kcedar up: %v", err)
	}
	// lead's conditional create succeeds, and the API server caches the
	// authorization (authorizedTTL 30s as printed).
	if _, err := lead.CoreV1().Pods("team").Create(ctx, outagePod("cached", "safe-node"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("lead's pod on safe-node with kcedar up: %v", err)
	}

	env.r.proc.Stop()
	stopped := time.Now()
	t.Log("kcedar stopped")
	env.checkControlPlaneWrites(t, "down")
	if _, err := lead.CoreV1().Pods("team").Create(ctx, outagePod("while-down", "safe-node"), metav1.CreateOptions{}); err == nil {
		t.Fatal("lead's conditional create went through while kcedar was down: nothing enforced its conditions")
	} else {
		t.Logf("lead's conditional create while kcedar is down: %v", err)
	}
	if _, err := env.admin.CoreV1().Pods("team").Get(ctx, "while-down", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lead's pod created while kcedar was down: %v", err)
	}
	if _, err := fake.CoreV1().ConfigMaps("kube-system").Create(ctx, outageConfigMap("fake-down"), metav1.CreateOptions{}); err == nil {
		t.Fatal("the look-alike of a kube-system ServiceAccount wrote while kcedar was down: it went around kcedar")
	}
	env.checkIdentityLeaseRenewed(t, stopped)

	// kcedar again: its Lease, and the conditions enforced again.
	env.r.start(t)
	waitReady(t, env.hc, env.r, 120*time.Second)
	outageWaitForWebhook(t, lead)
	if _, err := lead.CoreV1().Pods("team").Create(ctx, outagePod("off-node-2", "other-node"), metav1.CreateOptions{}); !condRejected(err) {
		t.Fatalf("lead's pod on another node after the restart: %v, want refused by %s", err, condWebhookName)
	}
	env.checkControlPlaneWrites(t, "up again")
	env.checkKcedarOwnWrites(t)
	if n := strings.Count(readFile(t, filepath.Join(env.c.Dir, "apiserver.log")), "Failed to update lease"); n > 0 {
		t.Errorf("the API server failed to renew its Leases %d times (its log)", n)
	}
}

// outageEnv is the cluster and kcedar of TestAdmissionEnforcementOutage.
type outageEnv struct {
	c     *framework.Cluster
	admin kubernetes.Interface
	r     *poReplica
	hc    *http.Client
	round int // distinguishes the objects of each round of checks
}

// startOutage starts the cluster with kcedar manifests' configuration, the
// conditions webhook, deploy/'s RBAC, and kcedar as its ServiceAccount,
// and waits until kcedar enforces conditions.
func startOutage(t *testing.T) *outageEnv {
	dir := t.TempDir()
	caFile, certFile, keyFile := poPKI(t, dir)
	secret := make([]byte, 32)
	rand.Read(secret)
	keysFile, policies := filepath.Join(dir, "condition-keys"), filepath.Join(dir, "policies.cedar")
	for name, data := range map[string]string{keysFile: "k1 " + base64.StdEncoding.EncodeToString(secret) + "\n", policies: outagePolicies} {
		if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := &poReplica{addr: "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))}
	manifests := filepath.Join(dir, "manifests")
	out, err := exec.Command(framework.KcedarBinary(t), "manifests", "--url", "https://"+r.addr, "--ca-file", caFile, "--admission-enforcement",
		"--webhook-kubeconfig-path", framework.DirPlaceholder+"/kcedar-webhook.kubeconfig", "-o", manifests).CombinedOutput()
	if err != nil {
		t.Fatalf("kcedar manifests: %v\n%s", err, out)
	}
	read := func(name string) string { return readFile(t, filepath.Join(manifests, name)) }
	c := framework.Start(t, framework.Options{
		AuthorizationConfig: read("authorization-config.yaml"),
		Files:               map[string]string{"kcedar-webhook.kubeconfig": read("kcedar-webhook.kubeconfig")},
		Tokens:              outageIdentities,
	})
	env := &outageEnv{c: c, admin: c.Client(t), r: r}
	for _, ns := range []string{"team", "kcedar-system", "kube-node-lease"} {
		c.EnsureNamespace(t, ns)
	}
	installPolicyCRDs(t, c)
	env.applyRBAC(t)
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict([]byte(read("validating-webhook.yaml")), &vwc); err != nil {
		t.Fatal(err)
	}
	if _, err := env.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), &vwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the API server refuses kcedar manifests' conditions webhook: %v", err)
	}
	kubeconfig := filepath.Join(dir, "kcedar.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(strings.Replace(readFile(t, c.Kubeconfig), c.AdminToken, "kcedar-token", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r.env = []string{"KUBECONFIG=" + kubeconfig}
	r.args = []string{"serve", "--listen", r.addr, "--policies", policies, "--policy-objects", "--admission-enforcement",
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--conditions-key-file", keysFile,
		"--status-lease-namespace", "kcedar-system", "--shutdown-delay", "1s"}
	r.start(t)
	ca, _ := os.ReadFile(caFile)
	env.hc = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: poolOf(t, ca)}}}
	waitReady(t, env.hc, r, 120*time.Second)
	outageWaitForWebhook(t, c.ClientFor(t, "lead-token"))
	env.checkKcedarOwnWrites(t)
	return env
}

// applyRBAC applies deploy/'s RBAC of kcedar's ServiceAccount, and grants
// the control-plane identities the writes the checks make (the bootstrap
// roles of a cluster would).
func (e *outageEnv) applyRBAC(t *testing.T) {
	ctx := t.Context()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "deploy", "components", "crds-rbac", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := docs.Read()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			continue // a document of comments only
		}
		if err := e.create(t, obj); err != nil {
			t.Fatalf("deploy/components/crds-rbac/rbac.yaml: %v", err)
		}
	}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "get"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "update", "get"}}}
	subjects := []rbacv1.Subject{{Kind: "User", Name: "system:kube-controller-manager"},
		{Kind: "ServiceAccount", Namespace: "kube-system", Name: "replicaset-controller"},
		{Kind: "User", Name: "system:serviceaccount:kube-system:a:b"}}
	if _, err := e.admin.RbacV1().Roles("kube-system").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "outage"}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "outage"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "outage"}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// create creates one object of deploy/'s RBAC.
func (e *outageEnv) create(t *testing.T, obj runtime.Object) error {
	ctx, opts := t.Context(), metav1.CreateOptions{}
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		_, err = e.admin.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case *rbacv1.ClusterRole:
		_, err = e.admin.RbacV1().ClusterRoles().Create(ctx, o, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = e.admin.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
	case *rbacv1.Role:
		_, err = e.admin.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.RoleBinding:
		_, err = e.admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
	default:
		err = fmt.Errorf("unexpected %T", obj)
	}
	return err
}

// checkControlPlaneWrites: a node renews its Lease in kube-node-lease, the
// controller manager its leader-election Lease in kube-system, a
// kube-system ServiceAccount writes a ConfigMap, and system:masters writes
// in an ordinary namespace.
func (e *outageEnv) checkControlPlaneWrites(t *testing.T, when string) {
	t.Helper()
	ctx := t.Context()
	e.round++
	suffix := strconv.Itoa(e.round)
	node, kcm, rs := e.c.ClientFor(t, "node-token"), e.c.ClientFor(t, "kcm-token"), e.c.ClientFor(t, "rs-token")
	renew := func(who string, cs kubernetes.Interface, ns, name string) {
		leases := cs.CoordinationV1().Leases(ns)
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			holder := who
			_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now}}, metav1.CreateOptions{})
		} else if err == nil {
			l.Spec.RenewTime = &now
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("kcedar %s: %s cannot renew its Lease %s/%s: %v", when, who, ns, name, err)
		}
	}
	renew("node n1", node, "kube-node-lease", "n1")
	renew("the controller manager", kcm, "kube-system", "kube-controller-manager")
	if _, err := rs.CoreV1().ConfigMaps("kube-system").Create(ctx, outageConfigMap("rs-"+suffix), metav1.CreateOptions{}); err != nil {
		t.Errorf("kcedar %s: a kube-system ServiceAccount cannot write: %v", when, err)
	}
	if _, err := e.admin.CoreV1().ConfigMaps("team").Create(ctx, outageConfigMap("admin-"+suffix), metav1.CreateOptions{}); err != nil {
		t.Errorf("kcedar %s: system:masters cannot write: %v", when, err)
	}
}

// checkIdentityLeaseRenewed waits for the API server to renew its identity
// Lease in kube-system after since (every 10s).
func (e *outageEnv) checkIdentityLeaseRenewed(t *testing.T, since time.Time) {
	t.Helper()
	within(t, 30*time.Second, "the API server renews its identity Lease with kcedar down", func() bool {
		leases, err := e.admin.CoordinationV1().Leases("kube-system").List(t.Context(), metav1.ListOptions{LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver"})
		if err != nil || len(leases.Items) == 0 {
			return false
		}
		rt := leases.Items[0].Spec.RenewTime
		return rt != nil && rt.After(since.Add(time.Second))
	})
}

// checkKcedarOwnWrites: kcedar holds its status Lease, and none of its
// requests was refused by the conditions webhook (its log, where
// client-go's leader election reports failed calls).
func (e *outageEnv) checkKcedarOwnWrites(t *testing.T) {
	t.Helper()
	within(t, 30*time.Second, "kcedar holds its status Lease", func() bool {
		l, err := e.admin.CoordinationV1().Leases("kcedar-system").Get(t.Context(), "kcedar-policy-status", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	})
	if logs := e.r.proc.Logs(); strings.Contains(logs, condWebhookName) {
		t.Errorf("the conditions webhook refused a request of kcedar's own:\n%s", logs)
	}
}

// outageWaitForWebhook waits until kcedar has verified its conditions
// webhook: lead's conditional create on safe-node is allowed. A probe's
// name differs each time; the pods made are harmless.
func outageWaitForWebhook(t *testing.T, lead kubernetes.Interface) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		_, err := lead.CoreV1().Pods("team").Create(t.Context(), outagePod(fmt.Sprintf("probe-%d-%d", time.Now().UnixNano(), i), "safe-node"), metav1.CreateOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kcedar never enforced lead's conditions (its webhook unverified?): %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func outagePod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
}

func outageConfigMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

// readFile reads a file the test needs.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bufioReader feeds a YAML stream to utilyaml's reader.
func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
