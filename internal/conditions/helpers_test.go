package conditions

import (
	"math/rand"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/oracle"
)

// newEngine is the engine of schema and policies with its conditions,
// signed with a fresh random key.
func newEngine(schema *schemagen.Schema, policies *cedarlang.PolicySet, opts engine.EngineOptions) *Engine {
	return New(engine.NewEngine(schema, policies, opts), NewCodec(RandomKeyring()))
}

func mustPolicies(t testing.TB, src string) *cedarlang.PolicySet {
	t.Helper()
	ps, err := cedarlang.ParsePolicies("test.cedar", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func resReq(user string, groups []string, verb, group, resource, sub, ns, name string) *entities.Request {
	return &entities.Request{User: entities.UserInfo{Name: user, Groups: groups}, Verb: verb, ResourceRequest: true,
		APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.Intn(len(xs))] }

// oraclePolicies is ps for the one-phase oracle.
func oraclePolicies(ps []*cedarlang.Policy) *oracle.Policies {
	out := &oracle.Policies{}
	for _, p := range ps {
		out.Add(p.ID, p.Compiled())
	}
	return out
}

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

// mutableNamespaces is a NamespaceLookup a test changes.
type mutableNamespaces struct{ m map[string]map[string]any }

func (l *mutableNamespaces) Namespace(name string) (map[string]any, bool) {
	o, ok := l.m[name]
	return o, ok
}
