//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

const namespaceObjectPolicies = `
@id("team-a-by-namespace-label") @reason("team a works in namespaces labelled team=a")
permit(principal == k8s::User::"alice", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::pods)
when { resource has namespaceObject && resource.namespaceObject.metadata has labels &&
       resource.namespaceObject.metadata.labels.hasTag("team") &&
       resource.namespaceObject.metadata.labels.getTag("team") == "a" };

@id("restricted-namespaces") @reason("namespaces labelled restricted are off limits")
forbid(principal == k8s::User::"alice", action, resource)
when { resource has namespaceObject && resource.namespaceObject.metadata has labels &&
       resource.namespaceObject.metadata.labels.hasTag("restricted") };

@id("agent-labelled-pods") @reason("the agent reads only the pods labelled app=agent")
permit(principal == k8s::User::"agent", action in [k8s::Action::"list", k8s::Action::"watch"], resource is core::pods)
when { resource has object && resource.object.metadata has labels &&
       resource.object.metadata.labels.hasTag("app") &&
       resource.object.metadata.labels.getTag("app") == "agent" };
`

// TestNamespaceObject: kcedar serve fills namespaceObject from an informer
// on the cluster it authorizes, so a policy on namespace labels decides
// reads, and a relabel changes the answer within seconds. The cluster starts
// first (kcedar needs its kubeconfig); the webhook's address and certificate
// are fixed in advance.
func TestNamespaceObject(t *testing.T) {
	dir := t.TempDir()
	polFile := filepath.Join(dir, "policies.cedar")
	if err := os.WriteFile(polFile, []byte(namespaceObjectPolicies), 0o644); err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile := poPKI(t, dir)
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))
	opts := framework.Options{
		AuthorizationConfig: webhookBeforeRBAC,
		Tokens:              []framework.Token{{Token: "alice-token", User: "alice"}, {Token: "agent-token", User: "agent"}},
		Files:               webhookFiles(addr, caPEM),
	}
	c := framework.Start(t, opts)
	ctx := t.Context()
	admin := c.Client(t)
	label := func(ns string, labels map[string]string) {
		t.Helper()
		got, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Labels = labels
		if _, err := admin.CoreV1().Namespaces().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for ns, labels := range map[string]map[string]string{"labelled": {"team": "a"}, "plain": nil} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// kcedar reads Namespaces with the admin kubeconfig (KUBECONFIG).
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	p := framework.StartProcess(t, framework.KcedarBinary(t), "serve", "--listen", addr, "--policies", polFile,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--namespace-objects")
	p.WaitForTCP(t, addr, 60*time.Second)

	alice := c.ClientFor(t, "alice-token")
	canList := func(ns string) error {
		_, err := alice.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	}
	// eventually waits for the informer (first sync, then each relabel):
	// the bar is 5 s from the change.
	eventually := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, within)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	eventually("alice lists pods in the namespace labelled team=a", 30*time.Second, func() bool { return canList("labelled") == nil })
	if err := canList("plain"); !isForbidden(err) {
		t.Fatalf("list pods in the unlabelled namespace: want 403, got %v", err)
	}
	if err := canList(""); !isForbidden(err) {
		t.Fatalf("list pods in all namespaces: want 403, got %v", err)
	}

	// Label selectors confine reads (the API server sends them with
	// AuthorizeWithSelectors, on by default since 1.34).
	agent := c.ClientFor(t, "agent-token")
	if _, err := agent.CoreV1().Pods("plain").List(ctx, metav1.ListOptions{LabelSelector: "app=agent"}); err != nil {
		t.Fatalf("agent lists pods -l app=agent: %v", err)
	}
	if _, err := agent.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app=agent,tier=x"}); err != nil {
		t.Fatalf("agent lists pods -A -l app=agent,tier=x: %v", err)
	}
	for _, sel := range []string{"", "app", "app!=web", "app in (agent,web)", "tier=agent"} {
		if _, err := agent.CoreV1().Pods("plain").List(ctx, metav1.ListOptions{LabelSelector: sel}); !isForbidden(err) {
			t.Fatalf("agent lists pods -l %q: want 403, got %v", sel, err)
		}
	}

	start := time.Now()
	label("plain", map[string]string{"team": "a"})
	eventually("allowed after labelling team=a", 5*time.Second, func() bool { return canList("plain") == nil })
	t.Logf("relabel to allow took effect in %s", time.Since(start))

	start = time.Now()
	label("labelled", map[string]string{"team": "a", "restricted": "true"})
	eventually("denied after labelling restricted", 5*time.Second, func() bool { return isForbidden(canList("labelled")) })
	t.Logf("relabel to deny took effect in %s", time.Since(start))
}
