package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

func TestNamespaceObjectDecisions(t *testing.T) {
	s := schematest.Schema()
	lookup := entities.StaticNamespaces{
		"a":     policytest.NamespaceObject("a", "1", map[string]string{"team": "a"}),
		"b":     policytest.NamespaceObject("b", "1", map[string]string{"team": "b"}),
		"plain": policytest.NamespaceObject("plain", "1", nil),
		"ar":    policytest.NamespaceObject("ar", "1", map[string]string{"team": "a", "restricted": ""}),
	}
	for _, cache := range []int{0, 64} {
		e := NewEngine(s, policytest.Set(t, policytest.TeamPolicies), EngineOptions{CacheSize: cache, Namespaces: lookup})
		for _, tc := range []struct {
			verb, ns string
			want     DecisionType
		}{
			{"list", "a", DecisionAllow},
			{"get", "a", DecisionAllow},
			{"list", "b", DecisionNoOpinion},
			{"list", "plain", DecisionNoOpinion},
			{"list", "ar", DecisionDeny},
			{"list", "unknown", DecisionDeny}, // the restricted forbid may hold
			{"list", "", DecisionDeny},        // all namespaces: some may be restricted
			{"delete", "a", DecisionNoOpinion},
		} {
			req := policytest.ResourceRequest("u", []string{"team-a"}, tc.verb, "", "pods", "", tc.ns, "p")
			if tc.verb == "list" {
				req.Name = ""
			}
			d := e.Authorize(context.Background(), req).FailureDecision()
			if d.Type() != tc.want {
				t.Errorf("cache %d: %s pods in %q: %v, want %v (%s)", cache, tc.verb, tc.ns, d.Type(), tc.want, d.Reason())
			}
		}
	}
	// Without the forbid, an unknown namespace is NoOpinion, never Allow.
	permitOnly := strings.SplitN(policytest.TeamPolicies, `@id("restricted")`, 2)[0]
	e := NewEngine(s, policytest.Set(t, permitOnly), EngineOptions{Namespaces: lookup})
	for _, ns := range []string{"unknown", ""} {
		if d := e.Authorize(context.Background(), policytest.ResourceRequest("u", []string{"team-a"}, "list", "", "pods", "", ns, "")); d.Type() != DecisionNoOpinion {
			t.Errorf("list pods in %q: %v", ns, d.Type())
		}
	}
	// No lookup at all: unknown everywhere.
	e = NewEngine(s, policytest.Set(t, permitOnly), EngineOptions{})
	if d := e.Authorize(context.Background(), policytest.ResourceRequest("u", []string{"team-a"}, "list", "", "pods", "", "a", "")); d.Type() != DecisionNoOpinion {
		t.Errorf("no lookup: %v", d.Type())
	}
}

func TestNamespaceObjectRelabelChangesCachedDecision(t *testing.T) {
	lookup := policytest.Namespaces{"x": policytest.NamespaceObject("x", "1", map[string]string{"team": "a"})}
	e := NewEngine(schematest.Schema(), policytest.Set(t, policytest.TeamPolicies), EngineOptions{CacheSize: 64, Namespaces: lookup})
	req := policytest.ResourceRequest("u", []string{"team-a"}, "list", "", "pods", "", "x", "")
	if d := e.Authorize(context.Background(), req); !d.IsAllowed() {
		t.Fatalf("before relabel: %v", d.Type())
	}
	lookup["x"] = policytest.NamespaceObject("x", "2", map[string]string{"team": "a", "restricted": "yes"})
	if d := e.Authorize(context.Background(), req); !d.IsDenied() {
		t.Fatalf("after relabel: %v", d.Type())
	}
	delete(lookup, "x")
	if d := e.Authorize(context.Background(), req); !d.IsDenied() {
		t.Fatalf("after the namespace left the lookup: %v", d.Type())
	}
}

// BenchmarkNamespaceObject compares a decision on namespace labels (a known
// namespace, converted once per resourceVersion) with the same decision on
// the namespace's name, and a list confined by a label selector.
func BenchmarkNamespaceObject(b *testing.B) {
	s := schematest.Schema()
	lookup := entities.StaticNamespaces{"a": policytest.NamespaceObject("a", "1", map[string]string{"team": "a"})}
	byName := `permit(principal in k8s::Group::"team-a", action == k8s::Action::"list", resource is core::pods) when { resource.namespace == "a" };`
	for _, bc := range []struct{ name, policies string }{{"by-name", byName}, {"by-label", policytest.TeamPolicies}} {
		e := NewEngine(s, policytest.Set(b, bc.policies), EngineOptions{Namespaces: lookup})
		req := policytest.ResourceRequest("u", []string{"team-a"}, "list", "", "pods", "", "a", "")
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if !e.Authorize(context.Background(), req).IsAllowed() {
					b.Fatal("not allowed")
				}
			}
		})
	}
	e := NewEngine(s, policytest.Set(b, agentPolicies), EngineOptions{})
	req := listWithSelector("agent", "ns", in("app", "agent"))
	b.Run("selector", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if !e.Authorize(context.Background(), req).IsAllowed() {
				b.Fatal("not allowed")
			}
		}
	})
}
