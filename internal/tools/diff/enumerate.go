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

const nonResourceType = schemagen.NonResourceURLType

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
	// listOrWatch: the verb stands for list or watch.
	listOrWatch bool
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

// run is one comparison under way. The enumeration is a tree: a target,
// then its verbs, the users, the namespaces and names (or the paths of a
// non-resource URL), then at each leaf the groups and namespace-label
// worlds. Each level's representatives come from the literals of the
// policies that may still match there, and a branch where no differing
// policy may match is not followed: both sets decide it alike.
type run struct {
	s        *schemagen.Schema
	sp       *space
	relevant []*facts
	inexact  map[string]bool
	// dStrings are the string literals of the differing policies.
	dStrings map[string]bool
	// given are the Namespace objects Compare was given.
	given entities.StaticNamespaces
	// tasks are the requests to decide, cells those decided differently.
	tasks []task
	cells []*cell
}

// levels are the representatives of the levels above a leaf, which a
// region's lists are complete against: the verbs of its target, the
// subjects of its verb, the namespaces (or paths) of its user, the names
// of its namespace.
type levels struct {
	verbs, subjects, namespaces, names []string
	users                              *userSpace
}

// leaf is a point with its user, the policies alive there, and what its
// tasks share: the groups whose memberships are enumerated and the
// namespace-label worlds.
type leaf struct {
	x      point
	user   string
	alive  []*facts
	levels *levels
	groups []string
	worlds []world
	// worldReps are the worlds' descriptions.
	worldReps []string
	// otherConditions: groups of permits pinned elsewhere were left out
	// (run.onlyAddsConditions); they may add conditions to both sides.
	otherConditions bool
	// everyVerb, for a request for every verb ("*"), is one verb of each
	// class of the target's verbs the policies that may match tell apart
	// (everyVerbAt), found when first needed.
	everyVerb []string
}

// verbs are lf.everyVerb, found in r on first use (by the one worker
// deciding the leaf).
func (lf *leaf) verbs(r *run) []string {
	if lf.everyVerb == nil {
		lf.everyVerb = r.everyVerbAt(lf.x, lf.user)
	}
	return lf.everyVerb
}

// task is one request to decide: a leaf's user in the groups of mask (a
// bit for each of the leaf's groups) and not in the others, in one
// namespace-label world (an index of the leaf's).
type task struct {
	lf    *leaf
	mask  uint32
	world int
}

// in and out are the leaf's groups the task's user is in and not in.
func (t task) in() []string  { return t.groups(true) }
func (t task) out() []string { return t.groups(false) }

func (t task) groups(in bool) []string {
	var out []string
	for j, g := range t.lf.groups {
		if (t.mask&(1<<j) != 0) == in {
			out = append(out, g)
		}
	}
	return out
}

// worldOf is the task's namespace-label world.
func (t task) worldOf() *world { return &t.lf.worlds[t.world] }

// cell is one representative request decided differently.
type cell struct {
	task
	old, new engine.Decision
	keys     [2]string // the decisions' keys (decisionKey)
	seq      int       // the cell's place among the tasks
}

// enumerate lists the tasks of the space within reach, at most
// maxDecisions of them (beyond, the comparison is not exact).
func (r *run) enumerate(reach cedarlang.Reach, l *literals) {
	for _, t := range r.targets(reach, l) {
		alive := r.aliveAt(t)
		if anyDiffers(alive) && !r.byVerb(t, alive) {
			return
		}
	}
}

// byVerb spreads a target over its verbs; false when the budget is spent.
func (r *run) byVerb(t point, alive []*facts) bool {
	var verbs []string
	listOrWatch := map[string]bool{}
	if t.entityType == nonResourceType {
		verbs = slices.Clone(schemagen.NonResourceActions())
	} else {
		dim := r.verbDim(t, alive)
		verbs = slices.Clone(dim.reps)
		for _, v := range []string{"list", "watch"} {
			rep, _ := dim.classify(v)
			listOrWatch[rep] = true
		}
	}
	verbs = append(verbs, entities.Wildcard)
	for _, v := range verbs {
		av := keep(alive, func(f *facts) bool { return f.verbMatches(v) })
		if v == entities.Wildcard {
			x := t
			x.verb = v
			av = forEveryVerb(av, entities.Verbs(r.s, x.request("", nil)))
		}
		if !anyDiffers(av) {
			continue
		}
		x := t
		x.verb, x.listOrWatch = v, listOrWatch[v]
		target := entities.ResolveTarget(r.s, x.request("", nil))
		x.admitted = v != entities.Wildcard && len(engine.AdmissionShapes(target, x.request("", nil), v)) > 0
		x.nsObject = target.HasNamespaceObject()
		if !r.byUser(x, av, verbs) {
			return false
		}
	}
	return true
}

// verbDim is the verbs of target t where the policies alive are fs. The
// engine treats the verbs admission sees apart (the object is unknown):
// each is its own class (literals.values), and so is get on a connect
// resource (pods/exec, ...), which admission sees too.
func (r *run) verbDim(t point, fs []*facts) *dimension {
	var extra []string
	if res := entities.ResolveTarget(r.s, t.request("", nil)).Resource; res != nil && res.IsConnect() {
		extra = append(extra, "get")
	}
	return localDim(fs, dimVerb, extra...)
}

// byUser spreads a point over the users.
func (r *run) byUser(x point, alive []*facts, verbs []string) bool {
	users := usersAt(alive)
	lv := levels{verbs: verbs, subjects: users.identities(), users: users}
	for _, u := range users.reps {
		au := keep(alive, func(f *facts) bool { return f.principalMatches(u) })
		if !anyDiffers(au) {
			continue
		}
		var ok bool
		if x.entityType == nonResourceType {
			ok = r.byPath(x, u, au, lv)
		} else {
			ok = r.byNamespace(x, u, au, lv)
		}
		if !ok {
			return false
		}
	}
	return true
}

// byPath spreads a non-resource point over its paths.
func (r *run) byPath(x point, u string, alive []*facts, lv levels) bool {
	lv.namespaces = localDim(alive, dimPath).reps
	for _, p := range lv.namespaces {
		ap := keep(alive, func(f *facts) bool { return f.pathMatches(p) })
		x.path = p
		if anyDiffers(ap) && !r.leaf(x, u, ap, &lv) {
			return false
		}
	}
	return true
}

// byNamespace spreads a point over the namespaces ("" an open namespace;
// a cluster-scoped request may name a namespace too, present on the
// entity). A namespace given to Compare is its own class where a policy
// reads namespace labels.
func (r *run) byNamespace(x point, u string, alive []*facts, lv levels) bool {
	var given []string
	if slices.ContainsFunc(alive, func(f *facts) bool { return f.readsNS }) {
		given = sortedKeys(mapKeys(map[string]bool{}, r.given))
	}
	lv.namespaces = append([]string{""}, localDim(alive, dimNamespace, given...).reps...)
	for _, ns := range lv.namespaces {
		an := keep(alive, func(f *facts) bool { return f.namespaceMatches(ns, x.admitted) })
		x.namespace = ns
		if anyDiffers(an) && !r.byName(x, u, an, lv) {
			return false
		}
	}
	return true
}

// byName spreads a point over the names ("" no name); where a policy reads
// resource.named, a name from a field selector is a class of its own.
func (r *run) byName(x point, u string, alive []*facts, lv levels) bool {
	selectorNames := slices.ContainsFunc(alive, func(f *facts) bool { return f.readsNamed })
	names := append([]string{""}, localDim(alive, dimName).reps...)
	lv.names = nil
	for _, n := range names {
		lv.names = append(lv.names, n)
		if n != "" && selectorNames {
			lv.names = append(lv.names, selectorNamePrefix+n)
		}
	}
	for _, n := range names {
		am := keep(alive, func(f *facts) bool { return f.nameMatches(n) })
		if !anyDiffers(am) {
			continue
		}
		x.name, x.nameFromSelector = n, false
		if !r.leaf(x, u, am, &lv) {
			return false
		}
		x.nameFromSelector = true
		if n != "" && selectorNames && !r.leaf(x, u, am, &lv) {
			return false
		}
	}
	return true
}

// leaf lists the tasks of user u at x: every subset of the groups the
// policies alive there name, in every namespace-label world. False when
// the budget is spent.
func (r *run) leaf(x point, u string, alive []*facts, lv *levels) bool {
	r.checkSelectors(x, alive)
	for _, f := range alive {
		for k := range f.lits.inexact {
			r.inexact[k] = true
		}
	}
	groups, skipped := r.groupsAt(x, alive)
	if isNodeUsername(u) && !slices.Contains(groups, user.NodesGroup) {
		// A node's username is a Node only in system:nodes
		// (entities.IdentityOf).
		groups = append(groups, user.NodesGroup)
		sort.Strings(groups)
	}
	worlds, descs := r.worldsAt(x, alive)
	lf := &leaf{x: x, user: u, alive: alive, levels: lv, groups: groups, worlds: worlds, worldReps: descs, otherConditions: skipped}
	for i := range worlds {
		for mask := range uint32(1) << len(groups) {
			if len(r.tasks) >= maxDecisions {
				r.inexact[fmt.Sprintf("more than %d requests to decide", maxDecisions)] = true
				return false
			}
			r.tasks = append(r.tasks, task{lf: lf, mask: mask, world: i})
		}
	}
	return true
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
		return r.untypedTargets()
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

// untypedTargets are the points of k8s::Resource (a resource the schema
// does not type, or a request for every group or resource): each API
// group the policies of k8s::Resource name (or "*"), then each resource
// the policies alive for that group name (or "*").
func (r *run) untypedTargets() []point {
	var out []point
	alive := keep(r.relevant, func(f *facts) bool { return f.typeMatches(schemagen.ResourceType) })
	for _, g := range append([]string{entities.Wildcard}, localDim(alive, dimAPIGroup).reps...) {
		ag := keep(alive, func(f *facts) bool { return f.pinMatches(dimAPIGroup, g) })
		if !anyDiffers(ag) {
			continue
		}
		for _, res := range append([]string{entities.Wildcard}, localDim(ag, dimResource).reps...) {
			x := point{entityType: schemagen.ResourceType, resourceRequest: true, group: g, resource: res, namespaced: true}
			if entities.ResolveTarget(r.s, x.request("", nil)).EntityType == schemagen.ResourceType {
				out = append(out, x)
			}
		}
	}
	return out
}

// aliveAt are the relevant policies that may match target t.
func (r *run) aliveAt(t point) []*facts {
	return keep(r.relevant, func(f *facts) bool {
		return f.typeMatches(t.entityType) && (t.entityType != schemagen.ResourceType || f.pinMatches(dimAPIGroup, t.group) && f.pinMatches(dimResource, t.resource))
	})
}

// everyVerbAt is one verb of each class of the verbs of x's target (the
// verbs a request for every verb stands for) that the policies that may
// match at x by user, of any verb, tell apart.
func (r *run) everyVerbAt(x point, user string) []string {
	alive := keep(r.aliveAt(x), func(f *facts) bool { return f.matches(x, user) })
	dim := r.verbDim(x, alive)
	seen := map[string]bool{}
	var out []string
	for _, v := range entities.Verbs(r.s, x.request(user, nil)) {
		rep, ok := dim.classify(v)
		if !ok {
			rep = v // uncovered: its own class
		}
		if !seen[rep] {
			seen[rep] = true
			out = append(out, v)
		}
	}
	return out
}

// groupsAt are the groups whose memberships are enumerated at x, where
// the policies alive are fs, and whether groups of permits pinned
// elsewhere were left out (run.onlyAddsConditions).
func (r *run) groupsAt(x point, fs []*facts) (groups []string, skipped bool) {
	seen := map[string]bool{}
	for _, f := range fs {
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

// checkSelectors notes where a label selector may change a decision the
// method does not enumerate: a list or watch of a resource with objects
// that a changed policy reading resource.object matches (the selector
// fixes the listed objects' labels, engine/selectors.go). Where no changed
// policy reads the object, a selector adds the same object policies to
// both sides and cannot make them differ.
func (r *run) checkSelectors(x point, alive []*facts) {
	if !x.listOrWatch {
		return
	}
	t := entities.ResolveTarget(r.s, x.request("", nil))
	if t.Resource == nil || len(t.Resource.Versions) == 0 {
		return
	}
	if slices.ContainsFunc(alive, func(f *facts) bool { return f.readsObject && f.differs() }) {
		r.inexact["label selectors of a list or watch (a changed policy reads resource.object)"] = true
	}
}

// mapKeys adds to out the keys of m and the values of lists.
func mapKeys[V any](out map[string]bool, m map[string]V, lists ...[]string) map[string]bool {
	for k := range m {
		out[k] = true
	}
	for _, l := range lists {
		for _, v := range l {
			out[v] = true
		}
	}
	return out
}
