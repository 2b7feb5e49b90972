//go:build e2e

package e2e

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

// identityPolicies: a helpdesk may impersonate users (legacy and
// constrained), never ServiceAccounts or nodes; an operator may impersonate
// the monitor ServiceAccount. kube-system's ServiceAccounts may list
// kube-system's secrets (the pattern docs/access-reviews.md shows), and
// nodes may list pods.
const identityPolicies = `
@id("helpdesk-impersonates-users")
permit(principal == k8s::User::"helpdesk", action in [k8s::Action::"impersonate", k8s::Action::"impersonate:user-info"], resource)
when { resource is core::users || resource is io::k8s::authentication::users };

@id("helpdesk-acts-as-users")
permit(principal == k8s::User::"helpdesk", action in k8s::Action::"impersonate-on:user-info:*", resource);

@id("helpdesk-never-serviceaccounts")
forbid(principal == k8s::User::"helpdesk", action, resource)
when { resource is core::serviceaccounts || resource is io::k8s::authentication::serviceaccounts };

@id("operator-impersonates-monitor")
permit(principal == k8s::User::"operator", action == k8s::Action::"impersonate", resource is core::serviceaccounts)
when { resource.namespace == "kube-system" && resource.name == "monitor" };

@id("kube-system-serviceaccounts-list-secrets")
permit(principal is k8s::ServiceAccount, action == k8s::Action::"list", resource is core::secrets)
when { principal.namespace == "kube-system" && resource.namespace == "kube-system" };

@id("nodes-list-pods")
permit(principal is k8s::Node, action == k8s::Action::"list", resource is core::pods);
`

// TestUsernamesShapedLikeServiceAccountsAreUsers: a username that looks
// like a ServiceAccount's (or a node's) but is not one to Kubernetes is a
// User, through a real kube-apiserver. The helpdesk impersonates
// system:serviceaccount:kube-system:X (an invalid ServiceAccount name, so the
// API server impersonates a User and asks only for user impersonation) and
// gets nothing the kube-system ServiceAccount policy grants; a static token
// user named system:node:n1 outside system:nodes is no node. Controls: the
// real monitor ServiceAccount, impersonated with the right permission, lists
// the secrets; a real node (system:nodes) lists pods.
func TestUsernamesShapedLikeServiceAccountsAreUsers(t *testing.T) {
	_, opts := startKcedarWebhook(t, identityPolicies)
	opts.Tokens = []framework.Token{
		{Token: "helpdesk-token", User: "helpdesk"},
		{Token: "operator-token", User: "operator"},
		{Token: "fake-node-token", User: "system:node:n1"},
		{Token: "fake-sa-token", User: "system:serviceaccount:kube-system:Monitor"},
		{Token: "node-token", User: "system:node:n1", Groups: []string{"system:nodes"}},
	}
	c := framework.Start(t, opts)
	ctx := t.Context()
	c.EnsureServiceAccount(t, "kube-system", "monitor")
	listSecrets := func(token, as string) error {
		_, err := impersonating(c, token, as).CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		return err
	}
	for _, as := range []string{"system:serviceaccount:kube-system:X", "system:serviceaccount:kube-system:monitor ", "system:serviceaccount:Kube-System:monitor", "system:serviceaccount:kube-system:monitor:x"} {
		if err := listSecrets("helpdesk-token", as); !apierrors.IsForbidden(err) {
			t.Errorf("helpdesk as %q lists kube-system secrets: want 403, got %v", as, err)
		}
	}
	if err := listSecrets("helpdesk-token", "system:serviceaccount:kube-system:monitor"); !apierrors.IsForbidden(err) {
		t.Errorf("helpdesk as the real monitor ServiceAccount: want 403 (forbidden to impersonate ServiceAccounts), got %v", err)
	}
	if err := listSecrets("operator-token", "system:serviceaccount:kube-system:monitor"); err != nil {
		t.Errorf("operator as the monitor ServiceAccount lists kube-system secrets: %v", err)
	}
	if _, err := c.ClientFor(t, "fake-sa-token").CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a user named like an invalid kube-system ServiceAccount lists secrets: want 403, got %v", err)
	}
	if _, err := c.ClientFor(t, "fake-node-token").CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("system:node:n1 outside system:nodes lists pods: want 403, got %v", err)
	}
	if _, err := c.ClientFor(t, "node-token").CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("node n1 (system:nodes) lists pods: %v", err)
	}
}
