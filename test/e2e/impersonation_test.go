//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

// The seed example of constrained impersonation, through a real
// kube-apiserver (which asks impersonate-on:arbitrary-node:get on the
// request, then impersonate:arbitrary-node on authentication.k8s.io nodes):
// lucas can only impersonate node foo, and only to get pods.
const impersonationPolicies = `
@id("lucas-impersonates-node-foo")
permit(principal == k8s::User::"lucas", action == k8s::Action::"impersonate:arbitrary-node", resource is io::k8s::authentication::nodes)
when { resource.name == "foo" };

@id("lucas-as-a-node-gets-pods")
permit(principal == k8s::User::"lucas", action == k8s::Action::"impersonate-on:arbitrary-node:get", resource is core::pods);

@id("node-foo-gets-pods")
permit(principal == k8s::Node::"system:node:foo", action == k8s::Action::"get", resource is core::pods);
`

func TestConstrainedImpersonation(t *testing.T) {
	_, opts := startKcedarWebhook(t, impersonationPolicies)
	opts.Tokens = []framework.Token{{Token: "lucas-token", User: "lucas"}}
	c := framework.Start(t, opts)
	ctx := t.Context()
	c.EnsureNamespace(t, "team-a")
	as := func(user string) kubernetes.Interface {
		cfg := c.UserConfig("lucas-token")
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	// Authorized: the pod does not exist, so the answer is 404, not 403.
	if _, err := as("system:node:foo").CoreV1().Pods("team-a").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lucas as node foo gets a pod: want 404 (authorized), got %v", err)
	}
	for name, call := range map[string]func() error{
		"as node foo, list pods": func() error {
			_, err := as("system:node:foo").CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{})
			return err
		},
		"as node foo, get a secret": func() error {
			_, err := as("system:node:foo").CoreV1().Secrets("team-a").Get(ctx, "s", metav1.GetOptions{})
			return err
		},
		"as node bar, get a pod": func() error {
			_, err := as("system:node:bar").CoreV1().Pods("team-a").Get(ctx, "web", metav1.GetOptions{})
			return err
		},
		"as user alice, get a pod": func() error {
			_, err := as("alice").CoreV1().Pods("team-a").Get(ctx, "web", metav1.GetOptions{})
			return err
		},
		"as himself, get a pod": func() error {
			_, err := c.ClientFor(t, "lucas-token").CoreV1().Pods("team-a").Get(ctx, "web", metav1.GetOptions{})
			return err
		},
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("lucas %s: want 403, got %v", name, err)
		} else if strings.HasPrefix(name, "as node") && !strings.Contains(err.Error(), "impersonate") {
			t.Errorf("lucas %s: want a 403 on impersonation, got %v", name, err)
		}
	}
}

// associatedNodePolicies: the csi-driver ServiceAccount may impersonate
// only the node its pod runs on, and only to get pods. What "its own node"
// means is the verb: kube-apiserver checks the association (the token's
// node-name extra against the target node) itself before it asks
// impersonate:associated-node, with the name "*".
const associatedNodePolicies = `
@id("csi-driver-impersonates-its-node")
permit(principal, action == k8s::Action::"impersonate:associated-node", resource is io::k8s::authentication::nodes)
when { principal is k8s::ServiceAccount && principal.namespace == "kube-system" && principal.name == "csi-driver" };

@id("csi-driver-as-its-node-gets-pods")
permit(principal, action == k8s::Action::"impersonate-on:associated-node:get", resource is core::pods)
when { principal is k8s::ServiceAccount && principal.namespace == "kube-system" && principal.name == "csi-driver" };

@id("nodes-get-pods")
permit(principal is k8s::Node, action == k8s::Action::"get", resource is core::pods);
`

// TestAssociatedNodeImpersonation: a node agent's ServiceAccount, with a
// token bound to its pod on node foo, gets pods as node foo, and is refused
// listing secrets as foo, acting as node bar, and the legacy impersonate.
// The decision log shows that kcedar saw and decided the constrained checks
// (there is no Node authorizer here: the chain is kcedar, then RBAC).
func TestAssociatedNodeImpersonation(t *testing.T) {
	decisions := filepath.Join(t.TempDir(), "decisions.jsonl")
	_, opts := startKcedarWebhook(t, associatedNodePolicies, "--decision-log", decisions, "--decision-log-sample-allows", "1")
	c := framework.Start(t, opts)
	ctx := t.Context()
	admin := c.Client(t)
	c.EnsureServiceAccount(t, "kube-system", "csi-driver")
	c.EnsureNamespace(t, "team-a")
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "foo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The agent's pod, bound to foo (no scheduler, no kubelet: the test
	// binds it), and a token bound to that pod: kube-apiserver then adds the
	// node's name to the ServiceAccount's user info.
	pod, err := admin.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "csi-foo"},
		Spec: corev1.PodSpec{NodeName: "foo", ServiceAccountName: "csi-driver", Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "csi-driver", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	as := func(user string) kubernetes.Interface { return impersonating(c, tr.Status.Token, user) }
	if _, err := as("system:node:foo").CoreV1().Pods("team-a").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("csi-driver as its node foo gets a pod: want 404 (authorized), got %v", err)
	}
	for name, call := range map[string]func() error{
		"as node foo, list secrets": func() error {
			_, err := as("system:node:foo").CoreV1().Secrets("team-a").List(ctx, metav1.ListOptions{})
			return err
		},
		"as node bar, get a pod": func() error {
			_, err := as("system:node:bar").CoreV1().Pods("team-a").Get(ctx, "web", metav1.GetOptions{})
			return err
		},
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("csi-driver %s: want 403, got %v", name, err)
		}
	}
	// The legacy verb is not granted by the constrained ones.
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:kube-system:csi-driver",
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users", Name: "system:node:foo"}}}
	if got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{}); err != nil || got.Status.Allowed {
		t.Errorf("legacy impersonate of system:node:foo: %v %+v, want not allowed", err, got)
	}
	log, err := os.ReadFile(decisions)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"verb":"impersonate-on:associated-node:get"`, `"verb":"impersonate:associated-node"`, `"csi-driver-impersonates-its-node"`} {
		if !strings.Contains(string(log), want) {
			t.Errorf("kcedar's decision log has no %s:\n%s", want, log)
		}
	}
}

// readsAsAlicePolicies: the reporter ServiceAccount may impersonate user
// alice, and while impersonating anyone by user-info, only read. KEP-5284
// asks the identity (impersonate:user-info on alice) and the request
// (impersonate-on:user-info:<verb>) separately, so "only alice, only for
// reads" holds because alice is the one identity reporter may take.
const readsAsAlicePolicies = `
@id("reporter-impersonates-alice")
permit(principal, action == k8s::Action::"impersonate:user-info", resource is io::k8s::authentication::users)
when { principal is k8s::ServiceAccount && principal.namespace == "tools" && principal.name == "reporter" && resource.name == "alice" };

@id("reporter-as-someone-reads")
permit(principal, action in [k8s::Action::"impersonate-on:user-info:get", k8s::Action::"impersonate-on:user-info:list", k8s::Action::"impersonate-on:user-info:watch"], resource)
when { principal is k8s::ServiceAccount && principal.namespace == "tools" && principal.name == "reporter" };

@id("alice-works-with-configmaps")
permit(principal == k8s::User::"alice", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"create"], resource is core::configmaps);
`

// TestImpersonateAliceForReads: reporter reads as alice, and is refused
// writing as alice (which alice may do herself) and reading as bob.
func TestImpersonateAliceForReads(t *testing.T) {
	_, opts := startKcedarWebhook(t, readsAsAlicePolicies)
	c := framework.Start(t, opts)
	ctx := t.Context()
	c.EnsureServiceAccount(t, "tools", "reporter")
	c.EnsureNamespace(t, "team-a")
	tr, err := c.Client(t).CoreV1().ServiceAccounts("tools").CreateToken(ctx, "reporter", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	as := func(user string) kubernetes.Interface { return impersonating(c, tr.Status.Token, user) }
	if _, err := as("alice").CoreV1().ConfigMaps("team-a").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("reporter lists configmaps as alice: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-as-alice"}}
	if _, err := as("alice").CoreV1().ConfigMaps("team-a").Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reporter creates a configmap as alice: want 403, got %v", err)
	}
	if _, err := as("bob").CoreV1().ConfigMaps("team-a").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reporter lists configmaps as bob: want 403, got %v", err)
	}
}

// impersonating is a client of the bearer of token, impersonating user.
func impersonating(c *framework.Cluster, token, user string) kubernetes.Interface {
	cfg := rest.AnonymousClientConfig(c.AdminConfig)
	cfg.BearerToken = token
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return kubernetes.NewForConfigOrDie(cfg)
}
