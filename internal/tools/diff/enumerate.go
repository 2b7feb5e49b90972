package diff

import (
	"fmt"
	"slices"
	"sort"

	"github.com/cedar-policy/cedar-go/types"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// point is the request without its principal: a representative of every
// dimension but the subject's.
type point struct {
	entityType                   types.EntityType
	group, resource, subresource string
	verb, namespace, name, path  string
	resourceRequest, namespaced  bool
	// admitted: admission sees the request, so conditions on its object
	// (and its open namespace) remain conditions.
	admitted bool
	// nsObject: the resource has a namespace object (nslabels.go).
	nsObject bool
	// nameFromSelector: the name comes from a field selector
	// (metadata.name=N): the request names no object.
	nameFromSelector bool
}

// request is x made by the user with groups.
func (x point) request(user string, groups []string) *entities.Request {
	return &entities.Request{User: entities.UserInfo{Name: user, Groups: groups}, Verb: x.verb, ResourceRequest: x.resourceRequest,
		APIGroup: x.group, Resource: x.resource, Subresource: x.subresource, Namespace: x.namespace, Name: x.name, Path: x.path,
		NameFromSelector: x.nameFromSelector}
}

// nameText is x's name as a region lists it: "metadata.name=N" for a name
// from a field selector.
func (x point) nameText() string {
	if x.nameFromSelector {
		return selectorNamePrefix + x.name
	}
	return x.name
}

// selectorNamePrefix marks a name from a field selector in Region.Names.
const selectorNamePrefix = "metadata.name="

// run is one comparison under way.
type run struct {
	s        *schemagen.Schema
	sp       *space
	d        []*facts
	relevant []*facts
	old, new engine.Authorizer
	inexact  map[string]bool
	cells    []cell
	decided  int
	// dStrings are the string literals of the differing policies.
	dStrings map[string]bool
	// ns is the Namespace lookup of both engines.
	ns *nsLookup
}

// cell is one representative request decided differently.
type cell struct {
	x        point
	user     string
	in, out  []string // groups the user is in, and those relevant it is not in
	world    string   // the namespace-label world ("" where none applies)
	old, new engine.Decision
	// otherConditions: groups of permits pinned elsewhere were left out
	// (run.onlyAddsConditions); they may add conditions to both sides.
	otherConditions bool
}

// points are the representatives of the space within reach.
func (r *run) points(reach cedarlang.Reach, l *literals) []point {
	var out []point
	for _, t := range r.targets(reach, l) {
		out = append(out, r.pointsOf(t, reach)...)
	}
	for i, x := range out {
		req := x.request("", nil)
		target := entities.ResolveTarget(r.s, req)
		out[i].admitted = x.verb != entities.Wildcard && len(engine.AdmissionShapes(target, req, x.verb)) > 0
		out[i].nsObject = target.HasNamespaceObject()
		r.checkSelectors(out[i], target)
	}
	return slices.DeleteFunc(out, func(x point) bool {
		return !slices.ContainsFunc(r.d, func(f *facts) bool { return f.matches(x) })
	})
}

// targets are the resource types to try: those the reach names, or, for
// an unbounded reach, every type a policy names plus one of each shape of
// the others, k8s::Resource and k8s::NonResourceURL.
func (r *run) targets(reach cedarlang.Reach, l *literals) []point {
	if reach.Types != nil {
		var out []point
		for _, t := range reach.Types {
			out = append(out, r.target(t)...)
		}
		return out
	}
	named := map[types.EntityType]bool{}
	for t := range l.entities {
		named[t] = true
	}
	res, grp := r.sp.dims[dimResource], r.sp.dims[dimAPIGroup]
	shapes := map[string]types.EntityType{}
	var keys []schemagen.ResourceKey
	for k := range r.s.Resources {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Compare(keys[j]) < 0 })
	var out []point
	for _, k := range keys {
		rs := r.s.Resources[k]
		shape := fmt.Sprint(rs.Namespaced, rs.AnySubresource, k.Subresource != "")
		mentioned := named[rs.EntityType] || res.literal[k.Resource] || grp.literal[k.Group] || len(res.patterns) > 0 || len(grp.patterns) > 0
		rep, seen := shapes[shape]
		switch {
		case mentioned:
			out = append(out, r.target(rs.EntityType)...)
		case !seen:
			shapes[shape] = rs.EntityType
			r.sp.shapeRep[rs.EntityType] = rs.EntityType
			out = append(out, r.target(rs.EntityType)...)
		default:
			r.sp.shapeRep[rs.EntityType] = rep
		}
	}
	out = append(out, r.target(schemagen.ResourceType)...)
	return append(out, r.target(schemagen.NonResourceURLType)...)
}

// target is the points of type t before verbs, namespaces and names.
func (r *run) target(t types.EntityType) []point {
	switch t {
	case schemagen.NonResourceURLType:
		return []point{{entityType: t}}
	case schemagen.ResourceType:
		var out []point
		for _, g := range append([]string{entities.Wildcard}, r.sp.dims[dimAPIGroup].reps...) {
			for _, res := range append([]string{entities.Wildcard}, r.sp.dims[dimResource].reps...) {
				x := point{entityType: t, resourceRequest: true, group: g, resource: res, namespaced: true}
				if entities.ResolveTarget(r.s, x.request("", nil)).EntityType == t {
					out = append(out, x)
				}
			}
		}
		return out
	}
	rs, ok := r.sp.typed[t]
	if !ok {
		return nil
	}
	x := point{entityType: t, resourceRequest: true, group: rs.Key.Group, resource: rs.Key.Resource, subresource: rs.Key.Subresource, namespaced: rs.Namespaced}
	if !rs.AnySubresource {
		return []point{x}
	}
	var out []point
	for _, sub := range r.sp.dims[dimSubresource].reps {
		x.subresource = sub
		out = append(out, x)
	}
	return out
}

// pointsOf spreads a target over verbs, namespaces, names or paths.
func (r *run) pointsOf(t point, reach cedarlang.Reach) []point {
	verbs := r.sp.dims[dimVerb].reps
	if t.entityType == schemagen.NonResourceURLType {
		verbs = schemagen.NonResourceActions()
	}
	if reach.Verbs != nil {
		verbs = slices.DeleteFunc(slices.Clone(verbs), func(v string) bool { return !slices.Contains(reach.Verbs, v) })
	}
	verbs = append(slices.Clone(verbs), entities.Wildcard)
	var out []point
	for _, v := range verbs {
		t.verb = v
		if t.entityType == schemagen.NonResourceURLType {
			for _, p := range r.sp.dims[dimPath].reps {
				t.path = p
				out = append(out, t)
			}
			continue
		}
		// A cluster-scoped request may name a namespace too (it is then
		// present on the entity).
		namespaces := append([]string{""}, r.sp.dims[dimNamespace].reps...)
		for _, ns := range namespaces {
			for _, n := range append([]string{""}, r.sp.dims[dimName].reps...) {
				t.namespace, t.name, t.nameFromSelector = ns, n, false
				out = append(out, t)
				if n != "" && r.sp.selectorNames {
					t.nameFromSelector = true
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// users are the representative usernames: Users, ServiceAccounts (each
// namespace with each name) and Nodes.
func (sp *space) users() []string {
	var out []string
	for _, u := range sp.dims[dimUsername].reps {
		if ts := entities.UsernameTypes(u); len(ts) == 1 && ts[0] == schemagen.UserType {
			out = append(out, u) // ServiceAccounts and nodes follow
		}
	}
	names := sp.dims[dimPName].reps
	for _, ns := range sp.dims[dimPNamespace].reps {
		for _, n := range names {
			out = append(out, schemagen.ServiceAccountUserPrefix+ns+":"+n)
		}
	}
	for _, n := range names {
		out = append(out, schemagen.NodeUserPrefix+n)
	}
	return out
}

// groupsAt are the groups whose memberships are enumerated at x, and
// whether groups of permits pinned elsewhere were left out
// (run.onlyAddsConditions).
func (r *run) groupsAt(x point) (groups []string, skipped bool) {
	seen := map[string]bool{}
	for _, f := range r.relevant {
		if !f.matches(x) {
			continue
		}
		if r.onlyAddsConditions(f, x) {
			skipped = true
			continue
		}
		for _, g := range f.groups {
			if !seen[g] {
				seen[g] = true
				groups = append(groups, g)
			}
		}
	}
	sort.Strings(groups)
	if len(groups) > MaxGroups {
		r.inexact[fmt.Sprintf("membership in more than %d groups (%d at one point)", MaxGroups, len(groups))] = true
		groups = groups[:MaxGroups]
	}
	return groups, skipped
}

// withNodesGroup adds system:nodes to the enumerated groups when a user's
// type depends on it (a node's username is a Node only in that group,
// entities.IdentityOf).
func withNodesGroup(groups, users []string) []string {
	if slices.Contains(groups, user.NodesGroup) || !slices.ContainsFunc(users, func(u string) bool { return len(entities.UsernameTypes(u)) > 1 }) {
		return groups
	}
	groups = append(groups, user.NodesGroup)
	sort.Strings(groups)
	return groups
}

// decidePoint decides every principal at x, in every namespace-label world
// there, with both sets and keeps the cells that differ.
func (r *run) decidePoint(x point) {
	groups, skipped := r.groupsAt(x)
	users := slices.DeleteFunc(r.sp.users(), func(u string) bool {
		return !slices.ContainsFunc(entities.UsernameTypes(u), func(t types.EntityType) bool {
			uid := types.NewEntityUID(t, types.String(u))
			return slices.ContainsFunc(r.d, func(f *facts) bool { return principalMay(f.p, uid) })
		})
	})
	groups = withNodesGroup(groups, users)
	for _, w := range r.worldsAt(x) {
		r.ns.current = &w
		for mask := 0; mask < 1<<len(groups); mask++ {
			var in, out []string
			for i, g := range groups {
				if mask&(1<<i) != 0 {
					in = append(in, g)
				} else {
					out = append(out, g)
				}
			}
			for _, u := range users {
				if r.decided >= maxDecisions {
					r.inexact[fmt.Sprintf("more than %d requests to decide", maxDecisions)] = true
					return
				}
				r.decided++
				o, n := r.decide(x.request(u, in))
				if decisionKey(o) != decisionKey(n) {
					r.cells = append(r.cells, cell{x: x, user: u, in: in, out: out, world: w.desc, old: o, new: n, otherConditions: skipped})
				}
			}
		}
	}
}

// checkSelectors notes where a label selector may change a decision the
// method does not enumerate: a list or watch of a resource with objects
// that a changed policy reading resource.object matches (the selector
// fixes the listed objects' labels, engine/selectors.go). Where no changed
// policy reads the object, a selector adds the same object policies to
// both sides and cannot make them differ.
func (r *run) checkSelectors(x point, t entities.Target) {
	verbs := r.sp.dims[dimVerb]
	list, _ := verbs.classify("list")
	watch, _ := verbs.classify("watch")
	if (x.verb != list && x.verb != watch) || t.Resource == nil || len(t.Resource.Versions) == 0 {
		return
	}
	if slices.ContainsFunc(r.d, func(f *facts) bool { return f.readsObject && f.matches(x) }) {
		r.inexact["label selectors of a list or watch (a changed policy reads resource.object)"] = true
	}
}
