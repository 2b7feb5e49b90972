package webhooks

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
)

// apiService is an APIService of group and version, named as kube-apiserver
// requires (VERSION.GROUP); service, if not nil, is its spec.service.
func apiService(group, version string, service any) *unstructured.Unstructured {
	spec := map[string]any{"group": group, "version": version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15)}
	if service != nil {
		spec["service"] = service
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": version + "." + group},
		"spec":     spec,
	}}
}

// metricsService is the spec.service of an aggregated API server.
var metricsService = map[string]any{"namespace": "kube-system", "name": "metrics-server", "port": int64(443)}

// viewOf is an APIServices whose informer's store holds objs and whose
// sync state is synced.
func viewOf(t *testing.T, synced *atomic.Bool, objs ...*unstructured.Unstructured) *APIServices {
	t.Helper()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, o := range objs {
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	a := NewAPIServices(nil)
	a.view.Store(&apiServiceView{store: store, synced: synced.Load})
	return a
}

// A group version is taken for kube-apiserver's own only once the
// informer has synced and only when its APIService is Local; everything
// else (an aggregated one, an unknown one, an unreadable spec.service, a
// wildcard reaching an aggregated one) may be aggregated.
func TestAPIServicesMayBeAggregated(t *testing.T) {
	if !NewAPIServices(nil).MayBeAggregated("apps", "v1") {
		t.Fatal("before Run has a client: every group version may be aggregated")
	}
	var synced atomic.Bool
	a := viewOf(t, &synced,
		apiService("", "v1", nil), apiService("apps", "v1", nil),
		apiService("batch", "v1", nil), apiService("batch", "v1beta9", nil),
		apiService("metrics.k8s.io", "v1beta1", metricsService),
		apiService("odd.example.com", "v1", "a string, not a service"),
		apiService("null.example.com", "v1", nil),
	)
	if !a.MayBeAggregated("apps", "v1") || !a.MayBeAggregated("", "v1") {
		t.Fatal("before the informer synced: every group version may be aggregated")
	}
	synced.Store(true)
	cases := []struct {
		group, version string
		aggregated     bool
	}{
		{"", "v1", false},
		{"apps", "v1", false},
		{"batch", "", false},  // every version of batch is local
		{"batch", "*", false}, // the same
		{"metrics.k8s.io", "v1beta1", true},
		{"metrics.k8s.io", "", true},
		{"apps", "v2", true},                 // no APIService registers it
		{"unknown.example.com", "", true},    // nor any version of this group
		{"odd.example.com", "v1", true},      // spec.service unreadable: fail closed
		{"null.example.com", "v1", false},    // no spec.service
		{"*", "*", true},                     // metrics.k8s.io is among every group
		{"*", "v1", true},                    // odd.example.com/v1 is aggregated
		{"v1beta1.metrics.k8s.io", "", true}, // a name is no group
	}
	for _, c := range cases {
		if got := a.MayBeAggregated(c.group, c.version); got != c.aggregated {
			t.Errorf("MayBeAggregated(%q, %q) = %v, want %v", c.group, c.version, got, c.aggregated)
		}
	}
	if only := viewOf(t, &synced, apiService("apps", "v1", nil)); only.MayBeAggregated("*", "") {
		t.Error("every group, with only local APIServices: not aggregated")
	}
}

// Run follows the cluster's APIServices through a real informer (on a
// fake dynamic client): it folds everything while the connection fails,
// then tells local from aggregated as APIServices are listed, added,
// turned aggregated and deleted.
func TestAPIServicesRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{APIServiceResource: "APIServiceList"},
			apiService("apps", "v1", nil), apiService("metrics.k8s.io", "v1beta1", metricsService))
		var attempts atomic.Int32
		connect := func() (dynamic.Interface, error) {
			if attempts.Add(1) < 3 {
				return nil, errors.New("no kubeconfig yet")
			}
			return client, nil
		}
		a := NewAPIServices(nil)
		a.ConnectRetry = 10 * time.Millisecond
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan struct{})
		go func() { a.Run(ctx, connect); close(done) }()
		synctest.Wait()
		if attempts.Load() >= 3 || !a.MayBeAggregated("apps", "v1") {
			t.Fatalf("not connected yet (%d attempts): apps/v1 must fold", attempts.Load())
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if a.MayBeAggregated("apps", "v1") || !a.MayBeAggregated("metrics.k8s.io", "v1beta1") {
			t.Fatal("listed: apps/v1 is local, metrics.k8s.io/v1beta1 aggregated")
		}
		apiservices := client.Resource(APIServiceResource)
		if _, err := apiservices.Create(ctx, apiService("custom.example.com", "v1", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if a.MayBeAggregated("custom.example.com", "v1") {
			t.Fatal("a Local APIService added: not aggregated")
		}
		if _, err := apiservices.Update(ctx, apiService("custom.example.com", "v1", metricsService), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !a.MayBeAggregated("custom.example.com", "v1") {
			t.Fatal("the APIService now names a service: aggregated")
		}
		if err := apiservices.Delete(ctx, "v1.apps", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !a.MayBeAggregated("apps", "v1") {
			t.Fatal("apps/v1 has no APIService any more: it may be aggregated")
		}
		cancel()
		<-done
	})
}
