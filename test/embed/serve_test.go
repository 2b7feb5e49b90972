package embed_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubernetesfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/server"
)

// The policy objects' resources, as a cluster serves them.
var (
	cedarPolicies           = cedar.CedarPolicyResource
	namespacedCedarPolicies = cedar.NamespacedCedarPolicyResource
)

// The policy file before and after it is rewritten: developers read pods in
// dev, then in prod instead.
const (
	devReads  = `@id("dev-reads") permit (principal in k8s::Group::"dev", action == k8s::Action::"get", resource is core::pods) when { resource.namespace == "dev" };`
	prodReads = `@id("dev-reads") permit (principal in k8s::Group::"dev", action == k8s::Action::"get", resource is core::pods) when { resource.namespace == "prod" };`
	// objectReads is the policy of a CedarPolicy object.
	objectReads = `@id("carol-configmaps") permit (principal == k8s::User::"carol", action == k8s::Action::"get", resource is core::configmaps);`
)

// servedPolicies is what kcedar serve builds, from the public API alone: a
// FileSource over dir's files and a cluster's policy objects (client-go's
// fake clients), the authorizer over it, and package server with the
// admission, review, policy webhook and readiness pieces, over plain HTTP.
type servedPolicies struct {
	source  *cedar.FileSource
	server  *httptest.Server
	dynamic *dynamicfake.FakeDynamicClient
	// watching gets each resource whose watch the source's informers start.
	watching chan schema.GroupVersionResource
	// reloaded holds a token after any load since it was last drained.
	reloaded chan struct{}
}

func newServedPolicies(t *testing.T, dir string) *servedPolicies {
	t.Helper()
	sp := &servedPolicies{watching: make(chan schema.GroupVersionResource, 16), reloaded: make(chan struct{}, 1)}
	sp.dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		cedarPolicies:           "CedarPolicyList",
		namespacedCedarPolicies: "NamespacedCedarPolicyList",
	})
	// The fake's watch does not replay what was created before it started:
	// the test creates objects only once the informer watches.
	sp.dynamic.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		select { // the first watch of each resource is what counts
		case sp.watching <- action.GetResource():
		default:
		}
		return false, nil, nil
	})
	quiet := slog.New(slog.DiscardHandler)
	cedarSchema := newSchema(t)
	source, err := cedar.NewFileSource(cedarSchema, []string{dir}, cedar.FileSourceOptions{Logger: quiet, Settle: 0,
		PolicyObjects: &cedar.PolicyObjects{Client: sp.dynamic, Kubernetes: kubernetesfake.NewClientset()}})
	if err != nil {
		t.Fatal(err)
	}
	authz, err := cedar.New(source, cedarSchema, cedar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// After the authorizer: a load has moved it when the token arrives.
	source.Subscribe(func(cedar.ReloadEvent) {
		select {
		case sp.reloaded <- struct{}{}:
		default:
		}
	})
	handler, err := server.New(authz, server.Options{Logger: quiet, Admitter: authz, Reviewer: authz,
		PolicyAdmission: source.PolicyWebhook(), Ready: source.Ready, Status: func() string { return source.Status().String() }})
	if err != nil {
		t.Fatal(err)
	}
	sp.source, sp.server = source, httptest.NewServer(handler)
	t.Cleanup(sp.server.Close)
	return sp
}

// run runs the source until the test ends.
func (sp *servedPolicies) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sp.source.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("FileSource.Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("FileSource.Run did not return within 10s of its context's end")
		}
	})
}

// waitUntil waits for holds to report true, checking it again after every
// load, for at most ten seconds; what is the awaited state, for the failure.
func (sp *servedPolicies) waitUntil(t *testing.T, what string, holds func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !holds() {
		select {
		case <-sp.reloaded:
		case <-deadline:
			t.Fatalf("no load made %s within 10s; source: %s", what, sp.source.Status())
		}
	}
}

// readyz is /readyz's status code.
func (sp *servedPolicies) readyz(t *testing.T) int {
	t.Helper()
	resp, err := sp.server.Client().Get(sp.server.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// decide is the server's decision on user in groups getting resource in
// namespace: Allow, Deny or NoOpinion.
func (sp *servedPolicies) decide(t *testing.T, username string, groups []string, resource, namespace string) string {
	t.Helper()
	in := authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: username, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Version: "v1", Resource: resource}},
	}
	var out authorizationv1.SubjectAccessReview
	post(t, sp.server, "/v1/authorize", in, &out)
	switch {
	case out.Status.Allowed && out.Status.Denied:
		t.Fatalf("allowed and denied: %+v", out.Status)
	case out.Status.Allowed:
		return "Allow"
	case out.Status.Denied:
		return "Deny"
	}
	return "NoOpinion"
}

// writeRenamed writes text to path by renaming a complete file into place,
// as an editor or a ConfigMap update does.
func writeRenamed(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".new" // not *.cedar: the source never reads it
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestServeFromThePublicAPI builds kcedar serve from the public packages
// and client-go alone, and checks over HTTP that it serves its files, reloads
// them when they change, serves the cluster's policy objects, and is ready
// once they have loaded.
func TestServeFromThePublicAPI(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "team.cedar")
	if err := os.WriteFile(file, []byte(devReads), 0o644); err != nil {
		t.Fatal(err)
	}
	sp := newServedPolicies(t, dir)
	dev := []string{"dev"}

	// Not ready, and no decision, until the objects have synced.
	if code := sp.readyz(t); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before the source runs: %d, want 503", code)
	}
	sp.run(t)
	sp.waitUntil(t, "/readyz 200", func() bool { return sp.readyz(t) == http.StatusOK })

	// (a) The file's policy allows.
	if got := sp.decide(t, "alice", dev, "pods", "dev"); got != "Allow" {
		t.Fatalf("alice in dev gets pods in dev: %s, want Allow", got)
	}
	if got := sp.decide(t, "alice", dev, "pods", "prod"); got != "NoOpinion" {
		t.Fatalf("alice in dev gets pods in prod before the rewrite: %s, want NoOpinion", got)
	}

	// (b) The rewritten file serves instead.
	writeRenamed(t, file, prodReads)
	sp.waitUntil(t, "the rewritten file serve", func() bool { return sp.decide(t, "alice", dev, "pods", "prod") == "Allow" })
	if got := sp.decide(t, "alice", dev, "pods", "dev"); got != "NoOpinion" {
		t.Fatalf("alice in dev gets pods in dev after the rewrite: %s, want NoOpinion", got)
	}

	// (c) A CedarPolicy object's policy joins the set.
	if got := sp.decide(t, "carol", nil, "configmaps", "dev"); got != "NoOpinion" {
		t.Fatalf("carol gets configmaps before the object: %s, want NoOpinion", got)
	}
	sp.awaitWatch(t, cedarPolicies)
	object := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kcedar.dev/v1alpha1",
		"kind":       "CedarPolicy",
		"metadata":   map[string]any{"name": "carol"},
		"spec":       map[string]any{"content": objectReads},
	}}
	if _, err := sp.dynamic.Resource(cedarPolicies).Create(context.Background(), object, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sp.waitUntil(t, "the CedarPolicy object's policy serve", func() bool { return sp.decide(t, "carol", nil, "configmaps", "dev") == "Allow" })
	// The files serve on beside it.
	if got := sp.decide(t, "alice", dev, "pods", "prod"); got != "Allow" {
		t.Fatalf("alice in dev gets pods in prod beside the object: %s, want Allow", got)
	}
	if code := sp.readyz(t); code != http.StatusOK {
		t.Fatalf("/readyz with files and objects loaded: %d, want 200", code)
	}
}

// awaitWatch waits until the source's informer watches gvr.
func (sp *servedPolicies) awaitWatch(t *testing.T, gvr schema.GroupVersionResource) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-sp.watching:
			if got == gvr {
				return
			}
		case <-deadline:
			t.Fatalf("the source did not watch %s within 10s", gvr)
		}
	}
}
