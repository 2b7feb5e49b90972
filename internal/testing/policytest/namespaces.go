package policytest

import (
	"bytes"
	"encoding/json"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/oracle"
)

// NamespaceObject is a Namespace object with labels (nil: no labels field).
func NamespaceObject(name, rv string, labels map[string]string) map[string]any {
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

// TeamPolicies read the namespace's labels: team-a's members may read and
// create pods in namespaces labelled team=a, and nobody may do anything in
// one labelled restricted.
const TeamPolicies = `
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

// Namespaces is a namespace lookup whose objects a test changes, like an
// informer's: Namespace objects by name.
type Namespaces map[string]map[string]any

// Namespace is the object of the Namespace name.
func (l Namespaces) Namespace(name string) (map[string]any, bool) {
	o, ok := l[name]
	return o, ok
}

// OraclePolicies is ps for the unindexed one-phase oracle.
func OraclePolicies(ps []*cedarlang.Policy) *oracle.Policies {
	out := &oracle.Policies{}
	for _, p := range ps {
		out.Add(p.ID, p.Compiled())
	}
	return out
}

// NamespaceOracle is the oracle's decision on req with the Namespace
// object obj (nil: none) as the resource's namespaceObject.
func NamespaceOracle(s *schemagen.Schema, orc *oracle.Policies, req *entities.Request, obj map[string]any) string {
	target := entities.ResolveTarget(s, req)
	attrs := target.Attributes(req, nil, nil)
	conv := entities.NewObjectConverter(s)
	if obj != nil {
		attrs[schemagen.AttrNamespaceObject] = conv.NamespaceObject(RoundTrip(obj))
	}
	ents := &entities.Entities{Principal: entities.PrincipalEntity(req.User), Resource: types.Entity{UID: target.EntityUID(req), Attributes: types.NewRecord(attrs)}, Maps: conv.Maps}
	return oracle.Evaluate(orc, ents, ents.Principal.UID, schemagen.ActionUID(req.Verb), target.EntityUID(req)).Decision
}

// RoundTrip is obj as it reads back from JSON, numbers as json.Number.
func RoundTrip(obj map[string]any) map[string]any {
	b, _ := json.Marshal(obj)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	_ = dec.Decode(&out)
	return out
}
