//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
)

// escalationNS is the namespace the leads write policies in.
const escalationNS = "team-a"

// escalationRBAC binds the writers' rights, all through RBAC:
//   - lead: view in team-a (the rules of the view ClusterRole), and writes of NamespacedCedarPolicy there;
//   - lead-escalate: the same, and escalate on namespacedcedarpolicies;
//   - cluster-writer: create on CedarPolicy, view in team-a only;
//   - deleter: view in team-a, writes of NamespacedCedarPolicy there, and
//     get and delete on CedarPolicy.
func escalationRBAC(t *testing.T, env *poEnv) {
	t.Helper()
	ctx := t.Context()
	rbac := env.c.Client(t).RbacV1()
	writes := []string{"get", "list", "create", "update", "patch", "delete"}
	nsRule := func(verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{policyobjects.Group}, Resources: []string{policyobjects.ResourceNamespaced}, Verbs: verbs}
	}
	clusterRule := func(verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{policyobjects.Group}, Resources: []string{policyobjects.ResourceCluster}, Verbs: verbs}
	}
	roles := []*rbacv1.Role{
		{ObjectMeta: metav1.ObjectMeta{Name: "policy-writer", Namespace: escalationNS}, Rules: []rbacv1.PolicyRule{nsRule(writes...)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "policy-escalate", Namespace: escalationNS}, Rules: []rbacv1.PolicyRule{nsRule("escalate")}},
	}
	for _, r := range roles {
		if _, err := rbac.Roles(escalationNS).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// view aggregates system:aggregate-to-view, but without a controller
	// manager nothing aggregates it here: view-rules holds the same rules.
	agg, err := rbac.ClusterRoles().Get(ctx, "system:aggregate-to-view", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterRoles := []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "view-rules"}, Rules: agg.Rules},
		{ObjectMeta: metav1.ObjectMeta{Name: "cedarpolicy-creator"}, Rules: []rbacv1.PolicyRule{clusterRule("create")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cedarpolicy-deleter"}, Rules: []rbacv1.PolicyRule{clusterRule("get", "delete")}},
	}
	for _, r := range clusterRoles {
		if _, err := rbac.ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	user := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}
	}
	bind := func(name, kind, role string, users ...string) {
		var subjects []rbacv1.Subject
		for _, u := range users {
			subjects = append(subjects, user(u)...)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: escalationNS}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}}
		if _, err := rbac.RoleBindings(escalationNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("view", "ClusterRole", "view-rules", "lead", "lead-escalate", "cluster-writer", "deleter")
	bind("policy-writer", "Role", "policy-writer", "lead", "lead-escalate", "deleter")
	bind("policy-escalate", "Role", "policy-escalate", "lead-escalate")
	for name, u := range map[string]string{"cedarpolicy-creator": "cluster-writer", "cedarpolicy-deleter": "deleter"} {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: user(u),
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}
		if _, err := rbac.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// as is a dynamic client acting as user, by impersonation: the admission
// request's userInfo is user's.
func as(t *testing.T, env *poEnv, user string) dynamic.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.c.AdminConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// refused wants err to be the webhook's refusal, naming every one of want.
func refused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want refused", what)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: the refusal does not name %q: %v", what, w, err)
		}
	}
	t.Logf("%s: kubectl would print: %v", what, err)
}

// TestPolicyObjectEscalation: writes of policy objects, by users acting
// through the API server, are checked against the writers' own rights.
func TestPolicyObjectEscalation(t *testing.T) {
	env := startPolicyObjects(t, poOptions{direct: true})
	env.c.EnsureNamespace(t, escalationNS)
	escalationRBAC(t, env)
	ctx := t.Context()
	lead := as(t, env, "lead").Resource(policyobjects.NamespacedResource).Namespace(escalationNS)
	create := func(ri dynamic.ResourceInterface, kind, ns, name, content string) error {
		_, err := ri.Create(ctx, poObject(kind, ns, name, content), metav1.CreateOptions{})
		return err
	}
	// The webhook must answer before the checks below mean anything.
	createPolicy(t, lead, policyobjects.KindNamespaced, escalationNS, "pods", `@id("grant-pods")
permit(principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::pods);`)

	t.Run("a lead with view is refused secrets, pods/exec and everything", func(t *testing.T) {
		err := create(lead, policyobjects.KindNamespaced, escalationNS, "secrets", `@id("grant-secrets")
permit(principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::secrets);`)
		refused(t, "get secrets", err, `permit "grant-secrets"`, "get core secrets in team-a", "escalate on namespacedcedarpolicies")
		err = create(lead, policyobjects.KindNamespaced, escalationNS, "exec", `@id("grant-exec")
permit(principal == k8s::User::"alice", action == k8s::Action::"create", resource is core::pods_exec);`)
		refused(t, "pods/exec", err, "create core pods/exec in team-a")
		err = create(lead, policyobjects.KindNamespaced, escalationNS, "everything", `permit(principal, action, resource);`)
		refused(t, "everything", err, "gives access you do not hold yourself")
	})

	t.Run("an update that widens an accepted policy is refused", func(t *testing.T) {
		// kcedar's status writer updates the object too: each update
		// starts from the latest version and retries a conflict.
		update := func(mutate func(u *unstructured.Unstructured) error) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				u, err := lead.Get(ctx, "pods", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if err := mutate(u); err != nil {
					return err
				}
				_, err = lead.Update(ctx, u, metav1.UpdateOptions{})
				return err
			})
		}
		err := update(func(u *unstructured.Unstructured) error {
			content, _, _ := unstructured.NestedString(u.Object, "spec", "content")
			wider := content + "\n@id(\"list-secrets\")\npermit(principal == k8s::User::\"alice\", action == k8s::Action::\"list\", resource is core::secrets);"
			return unstructured.SetNestedField(u.Object, wider, "spec", "content")
		})
		refused(t, "widening update", err, `permit "list-secrets"`, "list core secrets in team-a")
		// A label alone changes no content: allowed.
		err = update(func(u *unstructured.Unstructured) error {
			u.SetLabels(map[string]string{"reviewed": "yes"})
			return nil
		})
		if err != nil {
			t.Errorf("a label-only update: %v", err)
		}
	})

	t.Run("a lead with escalate is accepted", func(t *testing.T) {
		ri := as(t, env, "lead-escalate").Resource(policyobjects.NamespacedResource).Namespace(escalationNS)
		if err := create(ri, policyobjects.KindNamespaced, escalationNS, "secrets", `@id("grant-secrets")
permit(principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::secrets);`); err != nil {
			t.Fatalf("escalate: %v", err)
		}
	})

	t.Run("a CedarPolicy writer with namespaced rights only is refused a cluster-wide grant", func(t *testing.T) {
		ri := as(t, env, "cluster-writer").Resource(policyobjects.ClusterResource)
		err := create(ri, policyobjects.KindCluster, "", "pods-everywhere", `@id("pods-everywhere")
permit(principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::pods);`)
		refused(t, "cluster-wide get pods", err, "get core pods in every namespace", "escalate on cedarpolicies")
	})

	t.Run("deleting a forbid the writer could not have granted is refused", func(t *testing.T) {
		createPolicy(t, env.cluster, policyobjects.KindCluster, "", "no-pod-deletes", `@id("no-pod-deletes")
forbid(principal, action == k8s::Action::"delete", resource is core::pods) when { resource.namespace == "team-a" };`)
		err := as(t, env, "deleter").Resource(policyobjects.ClusterResource).Delete(ctx, "no-pod-deletes", metav1.DeleteOptions{})
		refused(t, "delete of a forbid", err, `removing forbid "no-pod-deletes"`, "delete core pods")
		if _, err := env.cluster.Get(ctx, "no-pod-deletes", metav1.GetOptions{}); err != nil {
			t.Errorf("the forbid is gone: %v", err)
		}
	})

	t.Run("without the webhook in place NamespacedCedarPolicy objects are not served", func(t *testing.T) {
		r := env.replicas[0]
		within(t, 5*time.Second, "alice may get pods in team-a (grant-pods)", func() bool { return sarAllowed(t, env.hc, r, "alice", "get", escalationNS) })
		vwcs := env.c.Client(t).AdmissionregistrationV1().ValidatingWebhookConfigurations()
		vwc, err := vwcs.Get(ctx, "kcedar-policies", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := vwcs.Delete(ctx, vwc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		within(t, 5*time.Second, "grant-pods no longer served", func() bool { return !sarAllowed(t, env.hc, r, "alice", "get", escalationNS) })
		vwc.ResourceVersion = ""
		if _, err := vwcs.Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		within(t, 5*time.Second, "grant-pods served again", func() bool { return sarAllowed(t, env.hc, r, "alice", "get", escalationNS) })
	})
}
