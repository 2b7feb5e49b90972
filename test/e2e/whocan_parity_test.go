//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// TestWhoCanRBACParity applies an RBAC fixture to a real kube-apiserver (RBAC
// mode), converts every role and binding it serves (bootstrap ones included)
// with kcedar's converter, and for each question asks who can: the subjects
// the review allows without conditions must be exactly the subjects of the
// cluster's bindings the apiserver allows, each asked with a
// SubjectAccessReview.
func TestWhoCanRBACParity(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	cs := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, ns := range []string{"wc-a", "wc-b"} {
		c.EnsureNamespace(t, ns)
	}
	applyWhoCanFixture(ctx, t, cs)

	in := &rbacconvert.Input{}
	if err := in.ReadCluster(ctx, cs); err != nil {
		t.Fatal(err)
	}
	s := embeddedschema.Schema(t)
	res, err := rbacconvert.Convert(s, in)
	if err != nil {
		t.Fatal(err)
	}
	policies, err := cedarlang.ParsePolicies("rbac.cedar", res.Policies)
	if err != nil {
		t.Fatal(err)
	}
	set, err := cedarlang.NewPolicySet(policies)
	if err != nil {
		t.Fatal(err)
	}
	az := engine.NewEngine(s, set, engine.EngineOptions{})

	// Every subject of every binding the cluster serves, as the
	// authenticator would present it.
	type subject struct {
		desc string
		user entities.UserInfo
	}
	seen := map[string]bool{}
	var subjects []subject
	addSubject := func(sub rbacv1.Subject, bindingNS string) {
		var u entities.UserInfo
		switch sub.Kind {
		case rbacv1.UserKind:
			u = entities.UserInfo{Name: sub.Name}
		case rbacv1.GroupKind:
			u = entities.UserInfo{Name: "wc-member-of:" + sub.Name, Groups: []string{sub.Name}}
		case rbacv1.ServiceAccountKind:
			ns := sub.Namespace
			if ns == "" {
				ns = bindingNS
			}
			u = entities.UserInfo{Name: schemagen.ServiceAccountUserPrefix + ns + ":" + sub.Name, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
		default:
			return
		}
		key := sub.Kind + "/" + u.Name
		if !seen[key] {
			seen[key] = true
			subjects = append(subjects, subject{desc: key, user: u})
		}
	}
	for _, b := range in.ClusterRoleBindings {
		for _, sub := range b.Subjects {
			addSubject(sub, "")
		}
	}
	for _, b := range in.RoleBindings {
		for _, sub := range b.Subjects {
			addSubject(sub, b.Namespace)
		}
	}
	// A user in no group, and one in two of the fixture's groups.
	subjects = append(subjects, subject{"nobody", entities.UserInfo{Name: "wc-nobody"}}, subject{"two groups", entities.UserInfo{Name: "wc-two", Groups: []string{"wc-readers", "wc-devs"}}})
	t.Logf("%d policies converted from %d ClusterRoleBindings and %d RoleBindings; %d subjects", set.Len(), len(in.ClusterRoleBindings), len(in.RoleBindings), len(subjects))

	questions := []authorizationv1.ResourceAttributes{
		{Verb: "get", Resource: "pods", Namespace: "wc-a"},
		{Verb: "list", Resource: "pods"},
		{Verb: "watch", Resource: "pods", Namespace: "wc-b"},
		{Verb: "create", Group: "apps", Resource: "deployments", Namespace: "wc-a"},
		{Verb: "update", Group: "apps", Resource: "deployments", Namespace: "wc-b"},
		{Verb: "get", Resource: "configmaps", Namespace: "wc-b", Name: "app-config"},
		{Verb: "get", Resource: "configmaps", Namespace: "wc-b"},
		{Verb: "delete", Resource: "secrets", Namespace: "wc-b"},
		{Verb: "get", Resource: "secrets", Namespace: "wc-a", Name: "s1"},
		{Verb: "get", Resource: "pods", Subresource: "log", Namespace: "wc-a"},
		{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "wc-a"},
		{Verb: "get", Resource: "nodes"},
		{Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "roles", Namespace: "wc-a"},
	}
	sars, allowedCount := 0, 0
	for _, q := range questions {
		req := &entities.Request{ResourceRequest: true, Verb: q.Verb, APIGroup: q.Group, Resource: q.Resource, Subresource: q.Subresource, Namespace: q.Namespace, Name: q.Name}
		rv, err := az.WhoCan(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(rv.Errors) > 0 {
			t.Fatalf("%s: %v", req, rv.Errors)
		}
		var bad []string
		var allowedSubjects []string
		for _, sub := range subjects {
			attrs := q
			sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: sub.user.Name, Groups: sub.user.Groups, ResourceAttributes: &attrs,
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("SubjectAccessReview: %v", err)
			}
			sars++
			listed := false
			for _, a := range rv.Allowed {
				if a.Matches(sub.user) {
					listed = true
				}
			}
			for _, a := range rv.Denied {
				if a.Matches(sub.user) {
					listed = false
				}
			}
			if sar.Status.Allowed {
				allowedCount++
				allowedSubjects = append(allowedSubjects, sub.desc)
			}
			if listed != sar.Status.Allowed {
				bad = append(bad, fmt.Sprintf("%s: apiserver allowed=%v (%s), who-can lists it: %v", sub.desc, sar.Status.Allowed, sar.Status.Reason, listed))
			}
			if rule := rv.Decide(sub.user, set).FailureDecision().IsAllowed(); rule != sar.Status.Allowed {
				bad = append(bad, fmt.Sprintf("%s: apiserver allowed=%v, the review's rule says %v", sub.desc, sar.Status.Allowed, rule))
			}
		}
		// The users and groups lists name the fixture's subjects exactly.
		for _, sub := range subjects {
			if sub.desc == "nobody" || sub.desc == "two groups" {
				continue
			}
			kind, name, _ := strings.Cut(sub.desc, "/")
			var inList bool
			switch kind {
			case rbacv1.GroupKind:
				inList = slices.Contains(rv.Groups, sub.user.Groups[0])
			case rbacv1.UserKind:
				inList = slices.Contains(rv.Users, name)
			default:
				continue // ServiceAccounts may be allowed through their groups
			}
			if inList && !slices.Contains(allowedSubjects, sub.desc) {
				bad = append(bad, fmt.Sprintf("%s is listed but the apiserver denies it", sub.desc))
			}
		}
		sort.Strings(allowedSubjects)
		t.Logf("%s: %d of %d subjects allowed; who-can: users %v groups %v, %d conditional entries", req, len(allowedSubjects), len(subjects), rv.Users, rv.Groups, len(rv.Conditional))
		if len(bad) > 0 {
			t.Errorf("%s:\n  %s", req, strings.Join(bad, "\n  "))
		}
	}
	t.Logf("%d SubjectAccessReviews, %d allowed", sars, allowedCount)
	if allowedCount < 20 {
		t.Errorf("only %d allowed answers: the fixture no longer exercises who-can", allowedCount)
	}
}

// applyWhoCanFixture creates roles and bindings of every subject kind, with
// resourceNames, "*" verbs and namespace-wide ServiceAccount groups, then
// waits until the apiserver's authorizer sees the last binding.
func applyWhoCanFixture(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	r := cs.RbacV1()
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	user := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: n}
	}
	group := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: n}
	}
	sa := func(ns, n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: n}
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	co := metav1.CreateOptions{}
	must(r.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wc-pod-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list", "watch"}},
	}}, co))
	must(r.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wc-named-config"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"app-config"}, Verbs: []string{"get"}},
	}}, co))
	must(r.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wc-secrets-all"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}},
	}}, co))
	must(r.Roles("wc-a").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "wc-deployer", Namespace: "wc-a"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}, Verbs: []string{"escalate"}},
	}}, co))
	must(r.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wc-readers"}, RoleRef: ref("ClusterRole", "wc-pod-reader"),
		Subjects: []rbacv1.Subject{group("wc-readers"), user("wc-alice")}}, co))
	must(r.RoleBindings("wc-a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wc-a-readers", Namespace: "wc-a"}, RoleRef: ref("ClusterRole", "wc-pod-reader"),
		Subjects: []rbacv1.Subject{sa("wc-a", "ci"), group("system:serviceaccounts:wc-b")}}, co))
	must(r.RoleBindings("wc-a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wc-a-deployers", Namespace: "wc-a"}, RoleRef: ref("Role", "wc-deployer"),
		Subjects: []rbacv1.Subject{user("wc-bob"), group("wc-devs"), sa("wc-a", "ci")}}, co))
	must(r.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wc-config"}, RoleRef: ref("ClusterRole", "wc-named-config"),
		Subjects: []rbacv1.Subject{user("wc-carol")}}, co))
	must(r.RoleBindings("wc-b").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wc-b-secrets", Namespace: "wc-b"}, RoleRef: ref("ClusterRole", "wc-secrets-all"),
		Subjects: []rbacv1.Subject{sa("wc-b", "admin"), user("wc-dave")}}, co))
	// Wait until the authorizer sees one binding of each kind (created last
	// of their kinds, and informers deliver each kind in order).
	probes := []authorizationv1.SubjectAccessReviewSpec{
		{User: "wc-carol", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: "wc-b", Name: "app-config"}},
		{User: "wc-dave", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "wc-b"}},
		{User: "wc-bob", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Group: "apps", Resource: "deployments", Namespace: "wc-a"}},
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, spec := range probes {
		for {
			sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, co)
			if err == nil && sar.Status.Allowed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the apiserver's RBAC caches did not catch up within 30s")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
