//go:build e2e

package e2e

import (
	"strings"
	"testing"

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
