package server

import (
	"github.com/kcedar/kcedar/internal/engine"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// A schema refresh (store.Store.Rebase) swaps the set and the schema it was
// validated against together: decisions follow the new schema at once, and
// requests served during the swap see one pair or the other, never a mix.
func TestDecisionsFollowARebasedSchema(t *testing.T) {
	withCM := schematest.Schema()
	withoutCM := schematest.Schema()
	delete(withoutCM.Resources, schemagen.ResourceKey{Resource: "configmaps"})
	check := func(s *schemagen.Schema) store.SchemaCheck {
		v, err := cedarlang.NewSchemaValidator(s)
		if err != nil {
			t.Fatal(err)
		}
		return store.SchemaCheck{Schema: s, Validator: v}
	}
	dir := t.TempDir()
	// Untyped resources only: configmaps are typed (core::configmaps) while
	// the schema has them, and fall back to k8s::Resource once it has not.
	if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(`@id("untyped") permit(principal, action, resource is k8s::Resource);`), 0o644); err != nil {
		t.Fatal(err)
	}
	old := check(withCM)
	store := store.NewStore([]string{dir}, old.Validator, quietLogger())
	store.Schema = old.Schema
	if err := store.Load(); err != nil {
		t.Fatal(err)
	}
	var degraded atomic.Value
	degraded.Store("")
	s := New(storeAuthorizer(withCM, store, nil, engine.EngineOptions{}), Options{Logger: quietLogger(), Degraded: func() string { return degraded.Load().(string) }})
	cm := sarJSON("alice", nil, "get", "", "configmaps", "a", "x")
	if _, st := post(t, s, "/v1/authorize", cm); st.Allowed {
		t.Fatal("configmaps allowed as untyped while the schema types them")
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if a := s.serving.Engine(); a == nil || a.Schema() != a.Policies().Schema {
					t.Error("an engine paired a set with another schema than its own")
					return
				}
				post(t, s, "/v1/authorize", cm)
			}
		}()
	}
	if err := store.Rebase(check(withoutCM)); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if s.serving.Schema() != withoutCM {
		t.Fatal("Schema() is not the serving set's")
	}
	if _, st := post(t, s, "/v1/authorize", cm); !st.Allowed {
		t.Fatal("configmaps not untyped after the schema lost them")
	}

	degraded.Store("the cluster's API changed")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Body.String(), "degraded: serving 1 policies") || !strings.Contains(rec.Body.String(), "the cluster's API changed") {
		t.Fatalf("readyz with a degraded detail: %d %s", rec.Code, rec.Body)
	}
}
