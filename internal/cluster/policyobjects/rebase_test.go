package policyobjects

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/promtest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// schemaWithoutConfigMaps is schematest's schema after configmaps went away
// (in a cluster: a CRD deleted).
func schemaWithoutConfigMaps() *schemagen.Schema {
	s := schematest.Schema()
	delete(s.Resources, schemagen.ResourceKey{Resource: "configmaps"})
	return s
}

func schemaChecks(t *testing.T, s *schemagen.Schema) (store.SchemaCheck, *Checker) {
	t.Helper()
	v, err := cedarlang.NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewChecker(s)
	if err != nil {
		t.Fatal(err)
	}
	return store.SchemaCheck{Schema: s, Validator: v}, c
}

func accepted(t *testing.T, src *Source, name string) metav1.Condition {
	t.Helper()
	for _, st := range src.Statuses() {
		if st.Name == name {
			return st.Status.Conditions[0]
		}
	}
	t.Fatalf("no status for %s", name)
	return metav1.Condition{}
}

const (
	podsText = `@id("pods") permit(principal, action == k8s::Action::"get", resource is core::pods);`
	cmText   = "@id(\"pods-too\") permit(principal, action == k8s::Action::\"list\", resource is core::pods);\n@id(\"cm\") permit(principal, action, resource is core::configmaps);"
)

func TestRebaseRefusedKeepsTheSetAndMarksTheObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oldCheck, oldChecker := schemaChecks(t, schematest.Schema())
		newCheck, newChecker := schemaChecks(t, schemaWithoutConfigMaps())
		client := fakeClient(
			object(KindCluster, "", "pods", podsText, 1),
			object(KindCluster, "", "cm", cmText, 1),
		)
		store := store.NewStore(nil, oldCheck.Validator, quietLogger())
		store.Schema = oldCheck.Schema
		src := &Source{Store: store, Checker: oldChecker, Client: client, Logger: quietLogger()}
		reg := prometheus.NewPedanticRegistry()
		if err := src.RegisterMetrics(reg); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go src.Run(ctx)
		eventually(t, "ready", func() bool { return src.Ready() == nil })
		serving := store.Current()

		err := src.Rebase(newCheck, newChecker)
		if err == nil || !strings.Contains(err.Error(), "CedarPolicy/cm:2:") {
			t.Fatalf("rebase onto a schema without configmaps: %v", err)
		}
		if store.Current() != serving || store.Current().Schema != oldCheck.Schema {
			t.Fatal("a refused rebase changed the serving set or schema")
		}
		c := accepted(t, src, "cm")
		if c.Status != metav1.ConditionFalse || c.Reason != ReasonSchemaChanged || !strings.HasPrefix(c.Message, "CedarPolicy/cm:2:") || !strings.Contains(c.Message, "previous schema") {
			t.Fatalf("the object the new schema refuses: %+v", c)
		}
		// The same text `kcedar validate` prints against the new schema.
		if want := newChecker.Check(KindCluster, "", "cm", cmText).Message(); !strings.HasPrefix(c.Message, want) {
			t.Fatalf("message %q does not start with the validation text %q", c.Message, want)
		}
		if c := accepted(t, src, "pods"); c.Status != metav1.ConditionTrue {
			t.Fatalf("an object valid against both schemas: %+v", c)
		}
		if got := promtest.Value(t, reg, "kcedar_policy_objects", map[string]string{"kind": KindCluster, "state": "schema_changed"}); got != 1 {
			t.Fatalf("schema_changed objects: %v", got)
		}

		// Offers go on against the serving schema meanwhile: a configmaps
		// policy added to another object serves.
		upd := object(KindCluster, "", "pods", podsText+"\n@id(\"cm2\") permit(principal, action == k8s::Action::\"get\", resource is core::configmaps);", 2)
		if _, err := client.Resource(ClusterResource).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the edit under the serving schema", func() bool { return slices.Contains(storeIDs(store), "cm2") })
		if err := src.Rebase(newCheck, newChecker); err == nil || !strings.Contains(err.Error(), "CedarPolicy/pods") {
			t.Fatalf("the retry must now refuse both objects: %v", err)
		}
		if c := accepted(t, src, "pods"); c.Reason != ReasonSchemaChanged {
			t.Fatalf("pods after it took a configmaps policy: %+v", c)
		}

		// The API is back to the serving schema: the objects are accepted again.
		src.DropPending()
		for _, name := range []string{"pods", "cm"} {
			if c := accepted(t, src, name); c.Status != metav1.ConditionTrue {
				t.Fatalf("%s after DropPending: %+v", name, c)
			}
		}

		rebaseFixedObjects(t, ctx, client, src, newCheck, newChecker)
	})
}

// rebaseFixedObjects: once the objects the new schema refused are fixed,
// the rebase goes through, and the new schema checks every later edit.
func rebaseFixedObjects(t *testing.T, ctx context.Context, client *dynamicfake.FakeDynamicClient, src *Source, newCheck store.SchemaCheck, newChecker *Checker) {
	t.Helper()
	store := src.Store
	for name, text := range map[string]string{"pods": podsText, "cm": `@id("pods-too") permit(principal, action == k8s::Action::"list", resource is core::pods);`} {
		if _, err := client.Resource(ClusterResource).Update(ctx, object(KindCluster, "", name, text, 3), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the fixes served", func() bool { return slices.Equal(storeIDs(store), []string{"pods", "pods-too"}) })
	if err := src.Rebase(newCheck, newChecker); err != nil {
		t.Fatal(err)
	}
	if store.Current().Schema != newCheck.Schema {
		t.Fatal("the store did not move to the new schema")
	}
	for _, name := range []string{"pods", "cm"} {
		if c := accepted(t, src, name); c.Status != metav1.ConditionTrue {
			t.Fatalf("%s after the rebase: %+v", name, c)
		}
	}
	if _, err := client.Resource(ClusterResource).Update(ctx, object(KindCluster, "", "cm", cmText, 4), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the configmaps edit judged against the new schema", func() bool {
		c := accepted(t, src, "cm")
		return c.ObservedGeneration == 4 && c.Reason == "Invalid"
	})
	if slices.Contains(storeIDs(store), "cm") {
		t.Fatal("a configmaps policy serves after the schema lost configmaps")
	}
}

// An object whose content the new schema refuses while its last valid
// version (which serves) is fine does not block the rebase.
func TestRebaseKeepsTheLastValidVersionThatStillValidates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oldCheck, oldChecker := schemaChecks(t, schematest.Schema())
		newCheck, newChecker := schemaChecks(t, schemaWithoutConfigMaps())
		client := fakeClient(object(KindCluster, "", "p", podsText, 1))
		store := store.NewStore(nil, oldCheck.Validator, quietLogger())
		store.Schema = oldCheck.Schema
		src := &Source{Store: store, Checker: oldChecker, Client: client, Logger: quietLogger()}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go src.Run(ctx)
		eventually(t, "ready", func() bool { return src.Ready() == nil })
		bad := "@id(\"pods\") permit(principal, action, resource is core::pods) when { resource.nmespace == \"a\" };"
		if _, err := client.Resource(ClusterResource).Update(ctx, object(KindCluster, "", "p", bad, 2), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the invalid edit seen", func() bool { return accepted(t, src, "p").ObservedGeneration == 2 })
		if err := src.Rebase(newCheck, newChecker); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(storeIDs(store), []string{"pods"}) || store.Current().Schema != newCheck.Schema {
			t.Fatalf("serving %v", storeIDs(store))
		}
		if c := accepted(t, src, "p"); c.Reason != "Invalid" || !strings.Contains(c.Message, "generation 1 keeps serving") {
			t.Fatalf("%+v", c)
		}
	})
}

// OnObjectsChanged fires for text changes only, not for status writes (so a
// schema retry does not run for every status pass).
func TestOnObjectsChangedIgnoresStatusUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		check, checker := schemaChecks(t, schematest.Schema())
		client := fakeClient(object(KindCluster, "", "p", podsText, 1))
		store := store.NewStore(nil, check.Validator, quietLogger())
		src := &Source{Store: store, Checker: checker, Client: client, Logger: quietLogger()}
		var mu sync.Mutex
		changes, offers := 0, 0
		src.OnObjectsChanged = func() { mu.Lock(); changes++; mu.Unlock() }
		src.OnChange = func() { mu.Lock(); offers++; mu.Unlock() }
		counts := func() (int, int) { mu.Lock(); defer mu.Unlock(); return changes, offers }
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go src.Run(ctx)
		eventually(t, "ready", func() bool { return src.Ready() == nil })
		c0, o0 := counts()
		u, err := client.Resource(ClusterResource).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["status"] = map[string]any{"observedGeneration": int64(1)}
		if _, err := client.Resource(ClusterResource).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the status update offered", func() bool { _, o := counts(); return o > o0 })
		if c, _ := counts(); c != c0 {
			t.Fatal("a status update counted as an object change")
		}
		if _, err := client.Resource(ClusterResource).Update(ctx, object(KindCluster, "", "p", podsText+" // edited", 2), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the edit seen as a change", func() bool { c, _ := counts(); return c > c0 })
	})
}
