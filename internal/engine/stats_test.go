package engine

import (
	"context"
	"testing"

	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

const statsPolicies = `
@id("no-secrets-for-mallory") forbid(principal == k8s::User::"mallory", action, resource is core::secrets);
@id("alice-reads-pods-in-a") permit(principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::pods)
when { resource.namespace == "a" };
@id("alice-reads-pods-anywhere") permit(principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::pods);
@id("alice-creates-pods-on-n1") permit(principal == k8s::User::"alice", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
`

// AuthorizeWithStats decides as Authorize does and reports the cache's part
// and the candidates it evaluated: a decision found in the cache evaluated
// none, one decided now as many as the index yielded until the answer was
// settled.
func TestAuthorizeWithStats(t *testing.T) {
	ps := policytest.Set(t, statsPolicies)
	s := schematest.Schema()
	cached := NewEngine(s, ps, EngineOptions{CacheSize: 64})
	uncached := NewEngine(s, ps, EngineOptions{})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		engine *Engine
		user   string
		verb   string
		res    string
		want   Stats
	}{
		// Fully known: looked up, never cached, the first satisfied permit settles it.
		{"allow, looked up", cached, "alice", "get", "pods", Stats{Cache: CacheMiss, Candidates: 1}},
		{"allow, looked up again", cached, "alice", "get", "pods", Stats{Cache: CacheMiss, Candidates: 1}},
		{"allow, no cache", uncached, "alice", "get", "pods", Stats{Cache: CacheNone, Candidates: 1}},
		{"deny by the forbid alone", cached, "mallory", "get", "secrets", Stats{Cache: CacheMiss, Candidates: 1}},
		{"no candidate", cached, "bob", "get", "pods", Stats{Cache: CacheMiss, Candidates: 0}},
		// A conditional create needs partial evaluation: cached, then a hit.
		{"conditional, decided", cached, "alice", "create", "pods", Stats{Cache: CacheMiss, Candidates: 1}},
		{"conditional, from the cache", cached, "alice", "create", "pods", Stats{Cache: CacheHit, Candidates: 0}},
	} {
		name := "p1" // a named get is fully known: never cached
		if tc.verb == "create" {
			name = ""
		}
		req := policytest.ResourceRequest(tc.user, nil, tc.verb, "", tc.res, "", "a", name)
		var st Stats
		got := tc.engine.AuthorizeWithStats(ctx, req, &st)
		if st != tc.want {
			t.Errorf("%s: stats %+v, want %+v", tc.name, st, tc.want)
		}
		if want := uncached.Authorize(ctx, req); got.Type() != want.Type() || DescribePolicies(got.Policies()) != DescribePolicies(want.Policies()) {
			t.Errorf("%s: decided %v (%s), Authorize without a cache %v (%s)", tc.name, got.Type(), got.Reason(), want.Type(), want.Reason())
		}
	}
}

// A "*" verb is decided for every verb: the candidates of all of them count.
func TestAuthorizeWithStatsCountsEveryVerb(t *testing.T) {
	ps := policytest.Set(t, statsPolicies)
	e := NewEngine(schematest.Schema(), ps, EngineOptions{})
	var one, every Stats
	e.AuthorizeWithStats(context.Background(), policytest.ResourceRequest("alice", nil, "get", "", "pods", "", "a", ""), &one)
	d := e.AuthorizeWithStats(context.Background(), policytest.ResourceRequest("alice", nil, "*", "", "pods", "", "a", ""), &every)
	if d.IsAllowed() {
		t.Fatalf("alice may not do every verb on pods: %v", d.Reason())
	}
	if every.Candidates < one.Candidates || every.Candidates == 0 {
		t.Errorf("every verb evaluated %d candidates, get alone %d", every.Candidates, one.Candidates)
	}
}

func TestCacheResultNames(t *testing.T) {
	for r, want := range map[CacheResult]string{CacheNone: "none", CacheHit: "hit", CacheMiss: "miss"} {
		if r.String() != want {
			t.Errorf("%d: %q, want %q", r, r.String(), want)
		}
	}
}
