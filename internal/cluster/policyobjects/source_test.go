package policyobjects

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func object(kind, ns, name, content string, generation int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(),
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"content": content},
	}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	u.SetGeneration(generation)
	return u
}

func fakeClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		ClusterResource:    KindCluster + "List",
		NamespacedResource: KindNamespaced + "List",
	}, objs...)
}

func testChecker(t testing.TB) *Checker {
	t.Helper()
	c, err := NewChecker(schematest.Schema())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func storeIDs(s *store.Store) []string {
	var out []string
	if cur := s.Current(); cur != nil {
		for _, p := range cur.Policies {
			out = append(out, p.ID)
		}
	}
	slices.Sort(out)
	return out
}

// eventually waits, in the calling test's synctest bubble, until f holds:
// it checks f whenever every goroutine of the bubble is blocked, and moves
// the bubble's fake clock on in steps (for timers and retries) up to a
// deadline of ten seconds of that clock. No real time passes.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		synctest.Wait()
		if f() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // the bubble's clock
	}
}

func TestSourceServesObjectsWithLastGoodPerObject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		checker := testChecker(t)
		v, err := cedarlang.NewSchemaValidator(schematest.Schema())
		if err != nil {
			t.Fatal(err)
		}
		client := fakeClient(
			object(KindCluster, "", "ops", `@id("ops") permit(principal in k8s::Group::"ops", action, resource);`, 1),
			object(KindNamespaced, "team", "dev", `@id("dev") permit(principal in k8s::Group::"dev", action, resource is core::pods);`, 1),
		)
		store := store.NewStore(nil, v, quietLogger())
		src := &Source{Store: store, Checker: checker, Client: client, Logger: quietLogger()}
		if src.Ready() == nil {
			t.Fatal("ready before syncing")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx) }()
		eventually(t, "ready", func() bool { return src.Ready() == nil })
		if got, want := storeIDs(store), []string{"NamespacedCedarPolicy/team/dev/dev", "ops"}; !slices.Equal(got, want) {
			t.Fatalf("serving %v, want %v", got, want)
		}

		// An invalid update: the object's last valid text keeps serving, its
		// status says why with the position.
		bad := object(KindCluster, "", "ops", "@id(\"ops\") permit(principal in k8s::Group::\"ops\", action, resource)\nwhen { resource.nmespace == \"x\" };", 2)
		if _, err := client.Resource(ClusterResource).Update(ctx, bad, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var st ObjectStatus
		eventually(t, "the invalid status", func() bool {
			for _, s := range src.Statuses() {
				if s.Name == "ops" && s.Status.ObservedGeneration == 2 {
					st = s
					return true
				}
			}
			return false
		})
		c := st.Status.Conditions[0]
		if c.Type != ConditionAccepted || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "CedarPolicy/ops:2:") || !strings.Contains(c.Message, "generation 1 keeps serving") {
			t.Fatalf("condition %+v", c)
		}
		if got := storeIDs(store); !slices.Contains(got, "ops") {
			t.Fatalf("the last valid version stopped serving: %v", got)
		}

		// The status writer writes it (no lease needed to call WriteAll).
		w := &StatusWriter{Source: src, Client: client, Logger: quietLogger()}
		w.WriteAll(ctx)
		u, err := client.Resource(ClusterResource).Get(ctx, "ops", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		if len(conds) != 1 || conds[0].(map[string]any)["status"] != "False" {
			t.Fatalf("status written: %v", u.Object["status"])
		}

		// Deleting objects revokes their policies.
		if err := client.Resource(ClusterResource).Delete(ctx, "ops", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.Resource(NamespacedResource).Namespace("team").Delete(ctx, "dev", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "revocation", func() bool { return len(storeIDs(store)) == 0 && store.Current() != nil })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestCheckerExplainsWithPositions(t *testing.T) {
	c := testChecker(t)
	v := c.Check(KindCluster, "", "p", "permit(principal, action, resource is core::pods)\nwhen { resource.nmespace == \"a\" };")
	if v.Valid || len(v.Errors) == 0 || !strings.HasPrefix(v.Errors[0], "CedarPolicy/p:2:") || !strings.Contains(v.Errors[0], "hint:") {
		t.Fatalf("%+v", v)
	}
	v = c.Check(KindNamespaced, "a", "p", "forbid(principal, action, resource);")
	if v.Valid || !strings.Contains(v.Message(), "NamespacedCedarPolicy/a/p:1:1") || !strings.Contains(v.Message(), "may only permit") {
		t.Fatalf("%+v", v)
	}
	v = c.Check(KindNamespaced, "a", "p", `@id("x") permit(principal, action, resource); permit(principal, action, resource);`)
	if !v.Valid || !slices.Equal(v.IDs, []string{"NamespacedCedarPolicy/a/p/x", "NamespacedCedarPolicy/a/p:1:47"}) {
		t.Fatalf("%+v", v)
	}
	v = c.Check(KindCluster, "", "p", "permit(principal, action, resource) when { true } garbage")
	if v.Valid || !strings.Contains(v.Message(), "CedarPolicy/p:1:") {
		t.Fatalf("%+v", v)
	}
}
