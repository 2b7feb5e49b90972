//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

const authzPolicies = `
@id("alice-pods-team-a") @reason("alice reads pods in team-a")
permit(principal == k8s::User::"alice", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods)
when { resource.namespace == "team-a" };

@id("no-secrets-for-mallory") @reason("mallory never reads secrets")
forbid(principal == k8s::User::"mallory", action, resource is core::secrets);

@id("builders-read-configmaps")
permit(principal is k8s::ServiceAccount, action in [k8s::Action::"get", k8s::Action::"list"], resource is core::configmaps)
when { principal.namespace == "team-a" && principal.name == "builder" && resource.namespace == principal.namespace };

@id("ops-group-lists-nodes")
permit(principal in k8s::Group::"ops", action == k8s::Action::"list", resource is core::nodes);

@id("carol-impersonates-bob")
permit(principal == k8s::User::"carol", action == k8s::Action::"impersonate", resource is core::users)
when { resource.name == "bob" };

@id("bob-pods-team-a")
permit(principal == k8s::User::"bob", action == k8s::Action::"list", resource is core::pods)
when { resource.namespace == "team-a" };

@id("metrics-for-scraper")
permit(principal == k8s::User::"scraper", action == k8s::Action::"get", resource is k8s::NonResourceURL)
when { resource.path == "/metrics" };
`

// startKcedarWebhook starts kcedar serve on a free port with policies and
// returns the process and the AuthorizationConfiguration + webhook kubeconfig
// files that put it before RBAC. extraArgs go to kcedar serve after its
// defaults (a repeated flag's last value wins).
func startKcedarWebhook(t *testing.T, policies string, extraArgs ...string) (*framework.Process, framework.Options) {
	t.Helper()
	dir := t.TempDir()
	polFile := filepath.Join(dir, "policies.cedar")
	if err := os.WriteFile(polFile, []byte(policies), 0o644); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	addr := "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))
	args := append([]string{"serve", "--listen", addr, "--policies", polFile, "--write-ca", caFile, "--reload-interval", "200ms"}, extraArgs...)
	p := framework.StartProcess(t, framework.KcedarBinary(t), args...)
	ca := p.WaitForTLS(t, addr, caFile, 60*time.Second)
	opts := framework.Options{
		AuthorizationConfig: webhookBeforeRBAC,
		Files:               webhookFiles(addr, ca),
	}
	return p, opts
}

func isForbidden(err error) bool { return apierrors.IsForbidden(err) }

func TestWebhookAuthorizerBeforeRBAC(t *testing.T) {
	kcedar, opts := startKcedarWebhook(t, authzPolicies)
	opts.Tokens = []framework.Token{
		{Token: "alice-token", User: "alice", UID: "alice-uid"},
		{Token: "mallory-token", User: "mallory"},
		{Token: "rita-token", User: "rita"},
		{Token: "olga-token", User: "olga", Groups: []string{"ops"}},
		{Token: "carol-token", User: "carol"},
		{Token: "scraper-token", User: "scraper"},
		{Token: "nobody-token", User: "nobody"},
	}
	c := framework.Start(t, opts)
	ctx := t.Context()
	admin := c.Client(t)
	for _, ns := range []string{"team-a", "team-b"} {
		c.EnsureNamespace(t, ns)
	}
	// RBAC grants: rita may list pods in team-b; mallory may read secrets everywhere.
	mustCreate(t, func() error {
		_, err := admin.RbacV1().Roles("team-b").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := admin.RbacV1().RoleBindings("team-b").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rita"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "rita"}}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mallory-view"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "mallory"}}}, metav1.CreateOptions{})
		return err
	})

	t.Run("permitted user lists pods in one namespace but not across all", func(t *testing.T) {
		alice := c.ClientFor(t, "alice-token")
		if _, err := alice.CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list pods in team-a: %v", err)
		}
		if _, err := alice.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !isForbidden(err) {
			t.Fatalf("list pods in all namespaces: want 403, got %v", err)
		}
		if _, err := alice.CoreV1().Pods("team-b").List(ctx, metav1.ListOptions{}); !isForbidden(err) {
			t.Fatalf("list pods in team-b: want 403, got %v", err)
		}
	})
	t.Run("forbid denies with a 403 naming the policy even where RBAC allows", func(t *testing.T) {
		mallory := c.ClientFor(t, "mallory-token")
		if _, err := mallory.CoreV1().ConfigMaps("team-a").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("RBAC grant (cluster-admin) should apply to configmaps: %v", err)
		}
		_, err := mallory.CoreV1().Secrets("team-a").List(ctx, metav1.ListOptions{})
		if !isForbidden(err) || !strings.Contains(err.Error(), "no-secrets-for-mallory") || !strings.Contains(err.Error(), "mallory never reads secrets") {
			t.Fatalf("want 403 naming the policy, got %v", err)
		}
		if n := strings.Count(err.Error(), "kcedar: "); n != 1 {
			t.Fatalf(`want "kcedar: " once in the 403, got %d: %v`, n, err)
		}
	})
	t.Run("request no policy covers falls through to RBAC", func(t *testing.T) {
		rita := c.ClientFor(t, "rita-token")
		if _, err := rita.CoreV1().Pods("team-b").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("RBAC-granted list: %v", err)
		}
		if _, err := rita.CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{}); !isForbidden(err) {
			t.Fatalf("ungranted list: want 403, got %v", err)
		}
		nobody := c.ClientFor(t, "nobody-token")
		_, err := nobody.CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{})
		if !isForbidden(err) {
			t.Fatalf("nobody: want 403, got %v", err)
		}
		// The API server prefixes a NoOpinion's reason with the authorizer's
		// name: kcedar's own reason must not repeat it.
		if n := strings.Count(err.Error(), "kcedar: "); n != 1 || !strings.Contains(err.Error(), "kcedar: no policy applies") {
			t.Fatalf(`nobody: want the reason "kcedar: no policy applies" with "kcedar: " once, got %d in %v`, n, err)
		}
	})
	t.Run("service account policy", func(t *testing.T) {
		c.EnsureServiceAccount(t, "team-a", "builder")
		c.EnsureServiceAccount(t, "team-b", "builder")
		for ns, wantOK := range map[string]bool{"team-a": true, "team-b": false} {
			tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "builder", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sa := c.ClientFor(t, tr.Status.Token)
			_, err = sa.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if wantOK && err != nil {
				t.Fatalf("%s/builder lists configmaps in its namespace: %v", ns, err)
			}
			if !wantOK && !isForbidden(err) {
				t.Fatalf("%s/builder: want 403, got %v", ns, err)
			}
		}
	})
	t.Run("group policy", func(t *testing.T) {
		olga := c.ClientFor(t, "olga-token")
		if _, err := olga.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("ops member lists nodes: %v", err)
		}
		if _, err := c.ClientFor(t, "alice-token").CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !isForbidden(err) {
			t.Fatalf("non-member: want 403, got %v", err)
		}
	})
	t.Run("impersonation", func(t *testing.T) {
		asUser := func(user string) kubernetes.Interface {
			cfg := c.UserConfig("carol-token")
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
			return kubernetes.NewForConfigOrDie(cfg)
		}
		if _, err := asUser("bob").CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("carol as bob: %v", err)
		}
		if _, err := asUser("eve").CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{}); !isForbidden(err) || !strings.Contains(err.Error(), "impersonate") {
			t.Fatalf("carol as eve: want 403 on impersonate, got %v", err)
		}
	})
	t.Run("non-resource URL", func(t *testing.T) {
		for token, want := range map[string]int{"scraper-token": 200, "nobody-token": 403} {
			raw := c.ClientFor(t, token).Discovery().RESTClient().Get().AbsPath("/metrics").Do(ctx)
			var code int
			raw.StatusCode(&code)
			if code != want {
				t.Fatalf("%s GET /metrics: %d, want %d (%v)", token, code, want, raw.Error())
			}
		}
	})
	t.Run("with kcedar stopped the failure policy applies", func(t *testing.T) {
		rita := c.ClientFor(t, "rita-token")
		kcedar.Stop()
		// failurePolicy: Deny — even the RBAC-granted request is refused.
		// kube-apiserver answers a Deny that came with an error as 500.
		_, err := rita.CoreV1().Pods("team-b").List(ctx, metav1.ListOptions{})
		if err == nil || !(isForbidden(err) || apierrors.IsInternalError(err)) || !strings.Contains(err.Error(), "/v1/authorize") {
			t.Fatalf("with the webhook down, want the request refused by failurePolicy Deny, got %v", err)
		}
		// The privileged admin is not affected.
		if _, err := admin.CoreV1().Pods("team-b").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("admin: %v", err)
		}
	})
	_ = corev1.Pod{}
}

func mustCreate(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
