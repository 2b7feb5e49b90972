package diff

import (
	"slices"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Location is where a request falls in a comparison's enumeration: the
// representative of each of its values, each at its level of the tree
// (the representatives of a level come from the policies that may match
// the values above it).
type Location struct {
	target  Target
	verb    string
	subject Subject // the user's representative, without groups
	// namespace is a ServiceAccount's own namespace.
	namespace string
	groups    []string
	// ns is the namespace, or a non-resource URL's path.
	ns, name, world string
	nonResource     bool
}

// Locate finds where req falls, its namespaces those of ns (nil: none
// known); ok is false when a value of req has no representative (the
// enumeration did not cover it).
func (r *Result) Locate(req *entities.Request, ns entities.NamespaceLookup) (loc Location, ok bool) {
	if r.run == nil {
		return Location{}, true
	}
	return r.run.locate(req, ns)
}

// Has reports whether the request at loc lies in region g.
func (g *Region) Has(loc Location) bool {
	if g.Change.From == "?" {
		return true // undecided: every request
	}
	if !g.subjectHas(loc) || !(g.anyOf(AnyVerb) || slices.Contains(g.Verbs, loc.verb)) {
		return false
	}
	if loc.nonResource {
		return slices.ContainsFunc(g.Targets, func(t Target) bool {
			return t.EntityType == string(nonResourceType) && (g.anyOf(AnyPath) || t.Path == loc.ns)
		})
	}
	want := targetKey(loc.target)
	if !slices.ContainsFunc(g.Targets, func(t Target) bool { return targetKey(t) == want }) {
		return false
	}
	return (g.anyOf(AnyNamespace) || slices.Contains(g.Namespaces, loc.ns)) && (g.anyOf(AnyName) || slices.Contains(g.Names, loc.name)) &&
		(len(g.NamespaceLabels) == 0 || slices.Contains(g.NamespaceLabels, loc.world))
}

func (g *Region) anyOf(dim string) bool { return slices.Contains(g.Any, dim) }

// subjectHas reports whether the user at loc is the region's subject.
func (g *Region) subjectHas(loc Location) bool {
	s := g.Subject
	for _, grp := range s.InGroups {
		if !slices.Contains(loc.groups, grp) {
			return false
		}
	}
	for _, grp := range s.NotIn {
		if slices.Contains(loc.groups, grp) {
			return false
		}
	}
	switch {
	case s.Kind == KindAnyone:
		return true
	case s.Kind != loc.subject.Kind:
		return false
	case s.All && IsOther(s.Namespace):
		return s.Namespace == loc.subject.Namespace
	case s.All:
		return s.Namespace == "" || s.Namespace == loc.namespace
	}
	return s.Namespace == loc.subject.Namespace && s.Name == loc.subject.Name
}

// Contains reports whether req lies in region i. ok is false when a value
// of req has no representative (the enumeration did not cover it). Every
// namespace is taken as unknown (see ContainsIn).
func (r *Result) Contains(i int, req *entities.Request) (in, ok bool) {
	return r.ContainsIn(i, req, nil)
}

// ContainsIn is Contains where the namespaces are those of ns (nil: none
// known).
func (r *Result) ContainsIn(i int, req *entities.Request, ns entities.NamespaceLookup) (in, ok bool) {
	loc, ok := r.Locate(req, ns)
	return r.Regions[i].Has(loc), ok
}

// locate walks the enumeration's tree as req: its target, verb, user,
// namespace (or path), name and namespace-label world, each classified
// among the representatives of its level.
func (r *run) locate(req *entities.Request, ns entities.NamespaceLookup) (Location, bool) {
	ok := true
	cls := func(d *dimension, v string) string {
		c, found := d.classify(v)
		ok = ok && found
		return c
	}
	x, loc, found := r.locateTarget(req)
	ok = ok && found
	alive := r.aliveAt(x)
	switch {
	case req.Verb == entities.Wildcard:
		loc.verb = req.Verb
	case loc.nonResource:
		loc.verb = req.Verb
		ok = ok && slices.Contains(schemagen.NonResourceActions(), req.Verb)
	default:
		loc.verb = cls(r.verbDim(x, alive), req.Verb)
	}
	x.verb = loc.verb
	alive = keep(alive, func(f *facts) bool { return f.verbMatches(loc.verb) })
	if loc.verb == entities.Wildcard {
		alive = forEveryVerb(alive, entities.Verbs(r.s, x.request("", nil)))
	}
	rep, found := usersAt(alive).classify(req.User.Name)
	ok = ok && found
	loc.subject = identitySubject(rep, slices.Contains(req.User.Groups, user.NodesGroup))
	loc.namespace, _, _ = entities.ServiceAccountName(req.User.Name)
	loc.groups = req.User.Groups
	alive = keep(alive, func(f *facts) bool { return f.principalMatches(rep) })
	if loc.nonResource {
		loc.ns = cls(localDim(alive, dimPath), req.Path)
		return loc, ok
	}
	target := entities.ResolveTarget(r.s, x.request("", nil))
	x.admitted = x.verb != entities.Wildcard && len(engine.AdmissionShapes(target, x.request("", nil), x.verb)) > 0
	x.nsObject = target.HasNamespaceObject()
	var given []string
	if slices.ContainsFunc(alive, func(f *facts) bool { return f.readsNS }) {
		given = sortedKeys(mapKeys(map[string]bool{}, r.given))
	}
	if req.Namespace != "" {
		loc.ns = cls(localDim(alive, dimNamespace, given...), req.Namespace)
	}
	alive = keep(alive, func(f *facts) bool { return f.namespaceMatches(loc.ns, x.admitted) })
	if req.Name != "" {
		loc.name = cls(localDim(alive, dimName), req.Name)
	}
	leafAlive := keep(alive, func(f *facts) bool { return f.nameMatches(loc.name) })
	if req.Name != "" && req.NameFromSelector && slices.ContainsFunc(alive, func(f *facts) bool { return f.readsNamed }) {
		loc.name = selectorNamePrefix + loc.name
	}
	x.namespace = loc.ns
	if needsWorlds(x, leafAlive) {
		var obj map[string]any
		if ns != nil {
			obj, _ = ns.Namespace(req.Namespace)
		}
		desc, covered := labelsAt(leafAlive).classifyWorld(obj)
		loc.world, ok = desc, ok && covered
	}
	return loc, ok
}

// locateTarget is req's target point (its type, and the representatives
// of its group, resource and subresource) and its Location so far.
func (r *run) locateTarget(req *entities.Request) (point, Location, bool) {
	if !req.ResourceRequest {
		return point{entityType: nonResourceType}, Location{nonResource: true, target: Target{EntityType: string(nonResourceType)}}, true
	}
	ok := true
	cls := func(d, v string) string {
		c, found := r.sp.dims[d].classify(v)
		ok = ok && found
		return c
	}
	t := entities.ResolveTarget(r.s, req)
	x := point{entityType: t.EntityType, resourceRequest: true, group: req.APIGroup, resource: req.Resource, subresource: req.Subresource, namespaced: true}
	if rep, found := r.sp.shapeRep[t.EntityType]; found {
		// A type no policy names is represented by one of its shape.
		t.Resource = r.sp.typed[rep]
		x.entityType = rep
	}
	if res := t.Resource; res != nil {
		x.group, x.resource, x.subresource, x.namespaced = res.Key.Group, res.Key.Resource, res.Key.Subresource, res.Namespaced
		if res.AnySubresource {
			x.subresource = cls(dimSubresource, req.Subresource)
		}
	} else {
		var found bool
		x.group, x.resource, found = r.locateUntyped(x.group, x.resource)
		ok = ok && found
	}
	return x, Location{target: r.targetOf(x)}, ok
}

// locateUntyped is the representatives of the API group and resource of
// a k8s::Resource request, as untypedTargets chooses them.
func (r *run) locateUntyped(group, resource string) (string, string, bool) {
	alive := keep(r.relevant, func(f *facts) bool { return f.typeMatches(schemagen.ResourceType) })
	ok := true
	if group != entities.Wildcard {
		group, ok = localDim(alive, dimAPIGroup).classify(group)
	}
	alive = keep(alive, func(f *facts) bool { return f.pinMatches(dimAPIGroup, group) })
	if resource != entities.Wildcard {
		var found bool
		resource, found = localDim(alive, dimResource).classify(resource)
		ok = ok && found
	}
	return group, resource, ok
}
