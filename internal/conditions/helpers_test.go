package conditions

import (
	"math/rand"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/oracle"
)

// newEngine is the engine of schema and policies with its conditions,
// signed with a fresh random key.
func newEngine(schema *schemagen.Schema, policies *cedarlang.PolicySet, opts engine.EngineOptions) *Engine {
	return New(engine.NewEngine(schema, policies, opts), NewCodec(RandomKeyring()))
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
