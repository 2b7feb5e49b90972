package server

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// The decision cache's lookups are counted by result. A review decided by
// partial evaluation (a create, whose name is not known yet, from a caller
// that takes conditions) is stored, so asking it again is a hit; a fully
// known one is decided each time, and so is the same create from a caller
// that takes no conditions: the permit could only leave a condition, so it
// is not evaluated at all.
func TestDecisionCacheLookupsCounted(t *testing.T) {
	dir := t.TempDir()
	policy := `@id("named") permit(principal, action in [k8s::Action::"create", k8s::Action::"get"], resource is core::pods) when { resource.name == "web" };`
	if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, review string
		hits, misses string
	}{
		{"partial", sarBody("alice", nil, "create", "pods", "team-a", true), "1", "1"},
		{"folded", sarBody("alice", nil, "create", "pods", "team-a", false), "0", "2"},
		{"known", sarJSON("alice", nil, "get", "", "pods", "team-a", "web"), "0", "2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := serve(t, serveConfig{schema: schematest.Schema(), paths: []string{dir}})
			for range 2 {
				post(t, s, "/v1/authorize", c.review)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			metrics := rec.Body.String()
			for _, want := range []string{
				`kcedar_decision_cache_lookups_total{result="hit"} ` + c.hits,
				`kcedar_decision_cache_lookups_total{result="miss"} ` + c.misses,
			} {
				if !strings.Contains(metrics, want+"\n") {
					t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "kcedar_decision_cache_lookups"))
				}
			}
		})
	}
}
