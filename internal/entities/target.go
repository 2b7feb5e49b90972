package entities

import (
	"sync"
	"sync/atomic"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// Target is where a request lands in the schema.
type Target struct {
	EntityType types.EntityType
	// Resource is the typed resource, nil for k8s::Resource and k8s::NonResourceURL.
	Resource *schemagen.Resource
}

// ResolveTarget maps a request onto the schema: a typed resource entity, or
// k8s::Resource for wildcards and resources the schema does not know, or
// k8s::NonResourceURL.
func ResolveTarget(s *schemagen.Schema, req *Request) Target {
	if !req.ResourceRequest {
		return Target{EntityType: schemagen.NonResourceURLType}
	}
	if req.APIGroup != Wildcard && req.Resource != Wildcard && req.Subresource != Wildcard {
		if r, ok := s.Lookup(req.APIGroup, req.Resource, req.Subresource); ok {
			return Target{EntityType: r.EntityType, Resource: r}
		}
	}
	return Target{EntityType: schemagen.ResourceType}
}

// Open reports which resource attributes a request leaves open: "every value"
// at authorization time. Open attributes are never equal to anything.
// On k8s::Resource, where namespace, name and subresource are optional, an
// open one may also be absent (see OptionalWhenOpen).
func (t Target) Open(req *Request) map[string]bool {
	open := map[string]bool{}
	switch {
	case t.EntityType == schemagen.NonResourceURLType:
	case t.Resource != nil:
		if t.Resource.Namespaced && req.Namespace == "" {
			open[schemagen.AttrNamespace] = true
		}
		if req.Name == "" {
			open[schemagen.AttrName] = true
		}
	default:
		if req.APIGroup == Wildcard {
			open[schemagen.AttrAPIGroup] = true
		}
		if req.Resource == Wildcard {
			open[schemagen.AttrResource] = true
		}
		// Whether an unknown resource is namespaced is unknown too, so an empty
		// namespace may mean "all namespaces".
		if req.Namespace == "" {
			open[schemagen.AttrNamespace] = true
		}
		if req.Name == "" {
			open[schemagen.AttrName] = true
		}
	}
	return open
}

// OptionalWhenOpen reports whether an open attribute may also be absent: on
// k8s::Resource, an unknown resource may be cluster-scoped. (A "*"
// subresource is not open: like RBAC, kcedar reads it literally.)
func (t Target) OptionalWhenOpen(attr string) bool {
	if t.EntityType != schemagen.ResourceType {
		return false
	}
	switch attr {
	case schemagen.AttrNamespace, schemagen.AttrName:
		return true
	}
	return false
}

// Attributes returns the resource entity's attributes for req. An attribute
// in open gets the value openValue returns for it (partial evaluation passes a
// variable; nil leaves the attribute out); with a nil openValue, open
// attributes take the request's values.
func (t Target) Attributes(req *Request, open map[string]bool, openValue func(attr string) types.Value) types.RecordMap {
	m := make(types.RecordMap, 6) // the most a target has: group, resource, subresource, namespace, name, named
	set := func(attr, v string, present bool) {
		if open[attr] && openValue != nil {
			if v := openValue(attr); v != nil {
				m[types.String(attr)] = v
			}
			return
		}
		if present {
			m[types.String(attr)] = types.String(v)
		}
	}
	switch {
	case t.EntityType == schemagen.NonResourceURLType:
		m[schemagen.AttrPath] = types.String(req.Path)
	case t.Resource != nil:
		r := t.Resource
		set(schemagen.AttrAPIGroup, r.Key.Group, true)
		set(schemagen.AttrResource, r.Key.Resource, true)
		if r.HasSubresourceAttr() {
			// userextras: the subresource is the extra key, any value.
			set(schemagen.AttrSubresource, req.Subresource, true)
		}
		// Cluster-scoped: the namespace the request names, if any (never open).
		set(schemagen.AttrNamespace, req.Namespace, r.Namespaced || req.Namespace != "")
		set(schemagen.AttrName, req.Name, true)
		m[schemagen.AttrNamed] = types.Boolean(req.Named())
	default:
		set(schemagen.AttrAPIGroup, req.APIGroup, true)
		set(schemagen.AttrResource, req.Resource, true)
		set(schemagen.AttrSubresource, req.Subresource, req.Subresource != "")
		set(schemagen.AttrNamespace, req.Namespace, req.Namespace != "")
		set(schemagen.AttrName, req.Name, req.Name != "")
		m[schemagen.AttrNamed] = types.Boolean(req.Named())
	}
	return m
}

// EntityUID is the resource entity's uid. Resource entities have no meaningful
// id (policies use attributes), except non-resource URLs, named by path.
func (t Target) EntityUID(req *Request) types.EntityUID {
	if t.EntityType == schemagen.NonResourceURLType {
		return types.NewEntityUID(t.EntityType, types.String(req.Path))
	}
	return types.NewEntityUID(t.EntityType, "")
}

// Verbs returns the verbs a request's verb stands for: itself, or for "*"
// every verb action in the schema (for a non-resource request, the
// non-resource verbs and their impersonate-on forms). An action group named
// as a verb (impersonate-on:<mode>:*) stands for itself, as in RBAC.
func Verbs(s *schemagen.Schema, req *Request) []string {
	if req.Verb != Wildcard {
		return []string{req.Verb}
	}
	if !req.ResourceRequest {
		return schemagen.NonResourceActions()
	}
	return s.Verbs
}

// ContextFor is the context of a request for action: {verb: "<verb>"}.
// Records are immutable, so one per verb is built and shared.
func ContextFor(action types.EntityUID) types.Record {
	if r, ok := contexts.Load(action.ID); ok {
		return r.(types.Record)
	}
	r := types.NewRecord(types.RecordMap{schemagen.AttrVerb: types.String(action.ID)})
	// Requests may carry any verb: the cache is bounded.
	if contextCount.Load() < maxCachedContexts && len(action.ID) <= 64 {
		if _, loaded := contexts.LoadOrStore(action.ID, r); !loaded {
			contextCount.Add(1)
		}
	}
	return r
}

const maxCachedContexts = 256

var (
	contexts     sync.Map // types.String -> types.Record
	contextCount atomic.Int64
)
