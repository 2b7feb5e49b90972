package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/oracle"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// nsObject is a Namespace object with labels (nil: no labels field).
func nsObject(name, rv string, labels map[string]string) map[string]any {
	md := map[string]any{"name": name, "resourceVersion": rv}
	if labels != nil {
		l := map[string]any{}
		for k, v := range labels {
			l[k] = v
		}
		md["labels"] = l
	}
	return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": md}
}

const teamPolicies = `
@id("team-a")
permit(principal in k8s::Group::"team-a", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"create"], resource is core::pods)
when { resource has namespaceObject && resource.namespaceObject.metadata has labels &&
       resource.namespaceObject.metadata.labels.hasTag("team") &&
       resource.namespaceObject.metadata.labels.getTag("team") == "a" };

@id("restricted")
forbid(principal, action, resource)
when { resource has namespaceObject && resource.namespaceObject.metadata has labels &&
       resource.namespaceObject.metadata.labels.hasTag("restricted") };
`

func TestNamespaceObjectDecisions(t *testing.T) {
	s := schematest.Schema()
	lookup := entities.StaticNamespaces{
		"a":     nsObject("a", "1", map[string]string{"team": "a"}),
		"b":     nsObject("b", "1", map[string]string{"team": "b"}),
		"plain": nsObject("plain", "1", nil),
		"ar":    nsObject("ar", "1", map[string]string{"team": "a", "restricted": ""}),
	}
	for _, cache := range []int{0, 64} {
		e := NewEngine(s, policytest.Set(t, teamPolicies), EngineOptions{CacheSize: cache, Namespaces: lookup})
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
	permitOnly := strings.SplitN(teamPolicies, `@id("restricted")`, 2)[0]
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

// mutableNamespaces is a lookup whose objects change, like an informer's.
type mutableNamespaces struct{ m map[string]map[string]any }

func (l *mutableNamespaces) Namespace(name string) (map[string]any, bool) {
	o, ok := l.m[name]
	return o, ok
}

func TestNamespaceObjectRelabelChangesCachedDecision(t *testing.T) {
	lookup := &mutableNamespaces{m: map[string]map[string]any{"x": nsObject("x", "1", map[string]string{"team": "a"})}}
	e := NewEngine(schematest.Schema(), policytest.Set(t, teamPolicies), EngineOptions{CacheSize: 64, Namespaces: lookup})
	req := policytest.ResourceRequest("u", []string{"team-a"}, "list", "", "pods", "", "x", "")
	if d := e.Authorize(context.Background(), req); !d.IsAllowed() {
		t.Fatalf("before relabel: %v", d.Type())
	}
	lookup.m["x"] = nsObject("x", "2", map[string]string{"team": "a", "restricted": "yes"})
	if d := e.Authorize(context.Background(), req); !d.IsDenied() {
		t.Fatalf("after relabel: %v", d.Type())
	}
	delete(lookup.m, "x")
	if d := e.Authorize(context.Background(), req); !d.IsDenied() {
		t.Fatalf("after the namespace left the lookup: %v", d.Type())
	}
}

// BenchmarkNamespaceObject compares a decision on namespace labels (a known
// namespace, converted once per resourceVersion) with the same decision on
// the namespace's name, and a list confined by a label selector.
func BenchmarkNamespaceObject(b *testing.B) {
	s := schematest.Schema()
	lookup := entities.StaticNamespaces{"a": nsObject("a", "1", map[string]string{"team": "a"})}
	byName := `permit(principal in k8s::Group::"team-a", action == k8s::Action::"list", resource is core::pods) when { resource.namespace == "a" };`
	for _, bc := range []struct{ name, policies string }{{"by-name", byName}, {"by-label", teamPolicies}} {
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

// namespaceOracle is the one-phase decision of req with namespaceObject obj
// (nil: absent).
func namespaceOracle(s *schemagen.Schema, orc *oracle.Policies, req *entities.Request, obj map[string]any) string {
	target := entities.ResolveTarget(s, req)
	attrs := target.Attributes(req, nil, nil)
	conv := entities.NewObjectConverter(s)
	if obj != nil {
		attrs[schemagen.AttrNamespaceObject] = conv.NamespaceObject(roundTrip(obj))
	}
	ents := &entities.Entities{Principal: entities.PrincipalEntity(req.User), Resource: types.Entity{UID: target.EntityUID(req), Attributes: types.NewRecord(attrs)}, Maps: conv.Maps}
	return oracle.Evaluate(orc, ents, ents.Principal.UID, schemagen.ActionUID(req.Verb), target.EntityUID(req)).Decision
}

// roundTrip is obj as the callback decodes it from JSON (numbers as
// json.Number).
func roundTrip(obj map[string]any) map[string]any {
	b, _ := json.Marshal(obj)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	_ = dec.Decode(&out)
	return out
}
