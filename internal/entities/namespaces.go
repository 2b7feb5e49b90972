package entities

import (
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// NamespaceLookup finds Namespace objects by name: what fills a namespaced
// request's namespaceObject. obj is the Namespace as JSON decoded with
// UseNumber (as ObjectConverter takes objects); ok is false when the
// namespace is not known to the lookup (not created yet, or not yet seen),
// which kcedar treats as unknown, never as "no labels".
type NamespaceLookup interface {
	Namespace(name string) (obj map[string]any, ok bool)
}

// StaticNamespaces is a NamespaceLookup over a fixed set of Namespace
// objects by name (offline tools, tests).
type StaticNamespaces map[string]map[string]any

// Namespace implements NamespaceLookup.
func (s StaticNamespaces) Namespace(name string) (map[string]any, bool) {
	obj, ok := s[name]
	return obj, ok
}

// NamespaceObject converts a Namespace object into the value of
// namespaceObject: the Namespace resource's object record.
func (c *ObjectConverter) NamespaceObject(obj map[string]any) types.Record {
	return c.Object(c.Schema.NamespaceObjectResource(), obj)
}

// HasNamespaceObject reports whether t's entity has the namespaceObject
// attribute: namespaced typed resources and k8s::Resource.
func (t Target) HasNamespaceObject() bool {
	if t.Resource != nil {
		return t.Resource.Namespaced
	}
	return t.EntityType == schemagen.ResourceType
}

// NamespaceVersion is the resourceVersion of a Namespace object ("" when it
// has none).
func NamespaceVersion(obj map[string]any) string {
	md, _ := obj[schemagen.AttrMetadata].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	return rv
}
