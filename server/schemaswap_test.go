package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// A schema refresh (cedar.FileSource.SetSchema) swaps the set and the
// schema it was validated against together: decisions follow the new
// schema at once, and every request served during the swap is answered by
// one pair or the other.
func TestDecisionsFollowARebasedSchema(t *testing.T) {
	withCM := schematest.Schema()
	withoutCM := schematest.Schema()
	delete(withoutCM.Resources, schemagen.ResourceKey{Resource: "configmaps"})
	var degraded atomic.Value
	degraded.Store("")
	// Untyped resources only: configmaps are typed (core::configmaps) while
	// the schema has them, and fall back to k8s::Resource once it has not.
	s, _ := serveText(t, `@id("untyped") permit(principal, action, resource is k8s::Resource);`,
		serveConfig{schema: withCM, server: Options{Degraded: func() string { return degraded.Load().(string) }}})
	cm := sarJSON("alice", nil, "get", "", "configmaps", "a", "x")
	if _, st := post(t, s, "/v1/authorize", cm); st.Allowed || st.Denied {
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
				if rec, st := post(t, s, "/v1/authorize", cm); rec.Code != http.StatusOK || st.Denied {
					t.Errorf("during the swap: %d %+v, want Allow or NoOpinion", rec.Code, st)
					return
				}
			}
		}()
	}
	if err := s.source.SetSchema(publicSchema(withoutCM)); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
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
