package diff

import (
	"slices"
	"sort"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Subject kinds.
const (
	KindUser           = "user"
	KindServiceAccount = "serviceaccount"
	KindNode           = "node"
	KindAnyone         = "anyone"
)

// Subject is who a region is about: one kind of principal, its name (and
// a ServiceAccount's namespace), and the groups it is in and not in among
// those the policies name there. A name equal to Other means any name no
// policy there names.
type Subject struct {
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name,omitempty"`
	InGroups  []string `json:"inGroups,omitempty"`
	NotIn     []string `json:"notInGroups,omitempty"`
}

// Target is a resource (by group, resource and subresource) or a
// non-resource path.
type Target struct {
	EntityType  string `json:"entityType"`
	APIGroup    string `json:"apiGroup,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Path        string `json:"path,omitempty"`
}

// Change is a decision before and after: Allow, Deny, NoOpinion or
// Conditional.
type Change struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Region is a set of requests whose decision changes the same way: every
// combination of its verbs, targets, namespaces and names made by its
// subject. Values equal to Other stand for any value no policy names.
type Region struct {
	Subject    Subject  `json:"subject"`
	Verbs      []string `json:"verbs"`
	Targets    []Target `json:"targets"`
	Namespaces []string `json:"namespaces,omitempty"`
	Names      []string `json:"names,omitempty"`
	// NamespaceLabels are the namespace-label worlds of the region, as
	// label selectors (k=v, !k), "(unknown)", "(no labels)" or "(other
	// labels)"; absent where no policy reads the namespace's labels.
	NamespaceLabels []string `json:"namespaceLabels,omitempty"`
	Change          Change   `json:"change"`
	Example         *Example `json:"example,omitempty"`
	OldPolicies     []string `json:"oldPolicies,omitempty"`
	NewPolicies     []string `json:"newPolicies,omitempty"`
	Exact           bool     `json:"exact"`
	// MayWiden: conditional before and after, and the new conditions may
	// allow an object the old ones do not (see mayWiden).
	MayWiden  bool      `json:"mayWiden,omitempty"`
	Note      string    `json:"note,omitempty"`
	changeKey [2]string // the decisions' keys, for grouping
}

// Example is one concrete request of a region.
type Example struct {
	User        string   `json:"user"`
	Groups      []string `json:"groups,omitempty"`
	Verb        string   `json:"verb"`
	APIGroup    string   `json:"apiGroup,omitempty"`
	Resource    string   `json:"resource,omitempty"`
	Subresource string   `json:"subresource,omitempty"`
	Namespace   string   `json:"namespace,omitempty"`
	Name        string   `json:"name,omitempty"`
	// NameFromSelector: the name is a field selector's (metadata.name=N).
	NameFromSelector bool `json:"nameFromSelector,omitempty"`
	// NamespaceLabels is the namespace-label world of the example.
	NamespaceLabels string `json:"namespaceLabels,omitempty"`
	Path            string `json:"path,omitempty"`
}

// Request is the example as an entities.Request.
func (e *Example) Request() *entities.Request {
	return &entities.Request{User: entities.UserInfo{Name: e.User, Groups: e.Groups}, Verb: e.Verb, ResourceRequest: e.Path == "" && e.Resource != "",
		APIGroup: e.APIGroup, Resource: e.Resource, Subresource: e.Subresource, Namespace: e.Namespace, Name: e.Name, Path: e.Path,
		NameFromSelector: e.NameFromSelector}
}

// principalMay reports whether p's scope admits principal uid (with some
// groups).
func principalMay(p *cedarlang.Policy, uid types.EntityUID) bool {
	switch s := p.AST.Principal.(type) {
	case ast.ScopeTypeEq:
		return s.Entity == uid
	case ast.ScopeTypeIn:
		return s.Entity.Type == schemagen.GroupType || s.Entity == uid
	case ast.ScopeTypeIs:
		return s.Type == uid.Type
	case ast.ScopeTypeIsIn:
		return s.Type == uid.Type && (s.Entity.Type == schemagen.GroupType || s.Entity == uid)
	}
	return true
}

// subjectOf is the subject of a cell.
func subjectOf(c cell) Subject {
	id := entities.IdentityOf(c.user, c.in)
	s := Subject{Kind: KindUser, Name: c.user, InGroups: c.in, NotIn: c.out}
	switch id.UID.Type {
	case schemagen.ServiceAccountType:
		s.Kind, s.Namespace, s.Name = KindServiceAccount, id.Namespace, id.Name
	case schemagen.NodeType:
		s.Kind, s.Name = KindNode, id.Name
	}
	return s
}

func policyIDs(d engine.Decision) []string {
	ps := d.Policies()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// row is a region while cells are merged: lists of values per dimension.
type row struct {
	r                 Region
	verbs, names, nss []string
	worlds            []string
	targets           []Target
}

// mergeCells turns the differing cells into regions: cells with the same
// subject, change and policies are merged one dimension at a time where
// the other dimensions are equal, so each region is exactly the product of
// its lists.
func mergeCells(cells []cell, exact bool) []Region {
	rows := make([]row, len(cells))
	for i, c := range cells {
		t := Target{EntityType: string(c.x.entityType), APIGroup: c.x.group, Resource: c.x.resource, Subresource: c.x.subresource, Path: c.x.path}
		ex := &Example{User: c.user, Groups: c.in, Verb: c.x.verb, APIGroup: c.x.group, Resource: c.x.resource, Subresource: c.x.subresource,
			Namespace: c.x.namespace, Name: c.x.name, NameFromSelector: c.x.nameFromSelector, NamespaceLabels: c.world, Path: c.x.path}
		rows[i] = row{r: Region{Subject: subjectOf(c), Change: Change{From: c.old.Type().String(), To: c.new.Type().String()}, Example: ex,
			OldPolicies: policyIDs(c.old), NewPolicies: policyIDs(c.new), Exact: exact, changeKey: [2]string{decisionKey(c.old), decisionKey(c.new)}},
			verbs: []string{c.x.verb}, names: []string{c.x.nameText()}, nss: []string{c.x.namespace}, worlds: []string{c.world}, targets: []Target{t}}
		if c.old.IsConditional() && c.new.IsConditional() {
			rows[i].r.MayWiden = mayWiden(c.old, c.new)
			rows[i].r.Note = "conditional on other object conditions, no wider"
			if rows[i].r.MayWiden {
				rows[i].r.Note = "conditional on other object conditions that may allow more"
			}
		}
		if c.otherConditions {
			rows[i].r.Note = strings.TrimPrefix(rows[i].r.Note+"; other groups' permits in other namespaces may add conditions to both sides", "; ")
		}
	}
	rows = mergeGroups(rows)
	for _, dim := range []int{dimRowWorlds, dimRowNames, dimRowNamespaces, dimRowVerbs, dimRowTargets} {
		rows = mergeAlong(rows, dim)
	}
	out := make([]Region, len(rows))
	for i, w := range rows {
		out[i] = w.r
		out[i].Verbs, out[i].Names, out[i].Namespaces, out[i].Targets = w.verbs, w.names, w.nss, w.targets
		if !slices.Equal(w.worlds, []string{""}) {
			out[i].NamespaceLabels = w.worlds
		}
		if w.targets[0].EntityType == string(schemagen.NonResourceURLType) {
			out[i].Names, out[i].Namespaces = nil, nil
		}
	}
	return out
}

const (
	dimRowWorlds = iota
	dimRowNames
	dimRowNamespaces
	dimRowVerbs
	dimRowTargets
)

// mergeAlong merges rows equal in everything but dimension dim.
func mergeAlong(rows []row, dim int) []row {
	index := map[string]int{}
	var out []row
	for _, w := range rows {
		k := w.key(dim)
		i, ok := index[k]
		if !ok {
			index[k] = len(out)
			out = append(out, w)
			continue
		}
		m := &out[i]
		switch dim {
		case dimRowWorlds:
			m.worlds = appendNew(m.worlds, w.worlds...)
		case dimRowNames:
			m.names = appendNew(m.names, w.names...)
		case dimRowNamespaces:
			m.nss = appendNew(m.nss, w.nss...)
		case dimRowVerbs:
			m.verbs = appendNew(m.verbs, w.verbs...)
		case dimRowTargets:
			for _, t := range w.targets {
				if !slices.Contains(m.targets, t) {
					m.targets = append(m.targets, t)
				}
			}
		}
	}
	return out
}

func appendNew(list []string, vals ...string) []string {
	for _, v := range vals {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

// mergeGroups merges rows equal but for whether the subject is in one
// group: the change does not depend on that group, which leaves both lists.
// Repeated until no two rows merge, so each row stays exactly the requests
// of its cells.
func mergeGroups(rows []row) []row {
	for {
		index := map[string]int{} // key without group g, and g's side -> row
		used := map[int]bool{}    // rows merged in this pass: their keys are stale
		merged := false
		var out []row
		for _, w := range rows {
			if i, g, ok := w.partner(index); ok && !used[i] {
				used[i] = true
				m := &out[i]
				m.r.Subject.InGroups = slices.DeleteFunc(slices.Clone(m.r.Subject.InGroups), func(x string) bool { return x == g })
				m.r.Subject.NotIn = slices.DeleteFunc(slices.Clone(m.r.Subject.NotIn), func(x string) bool { return x == g })
				merged = true
				continue
			}
			for _, g := range w.r.Subject.InGroups {
				index[w.keyWithout(g)+"\x00in"] = len(out)
			}
			for _, g := range w.r.Subject.NotIn {
				index[w.keyWithout(g)+"\x00out"] = len(out)
			}
			out = append(out, w)
		}
		rows = out
		if !merged {
			return rows
		}
	}
}

// partner finds a row of index equal to w but on the other side of one
// group g (one not yet merged away).
func (w row) partner(index map[string]int) (int, string, bool) {
	for _, g := range w.r.Subject.InGroups {
		if i, ok := index[w.keyWithout(g)+"\x00out"]; ok {
			return i, g, true
		}
	}
	for _, g := range w.r.Subject.NotIn {
		if i, ok := index[w.keyWithout(g)+"\x00in"]; ok {
			return i, g, true
		}
	}
	return 0, "", false
}

// keyWithout is the row's key with group g left out of the subject.
func (w row) keyWithout(g string) string {
	v := w
	v.r.Subject.InGroups = slices.DeleteFunc(slices.Clone(w.r.Subject.InGroups), func(x string) bool { return x == g })
	v.r.Subject.NotIn = slices.DeleteFunc(slices.Clone(w.r.Subject.NotIn), func(x string) bool { return x == g })
	return v.key(-1)
}

// key is the row with dimension dim left out.
func (w row) key(dim int) string {
	s := w.r.Subject
	parts := []string{s.Kind, s.Namespace, s.Name, strings.Join(s.InGroups, ","), strings.Join(s.NotIn, ","),
		w.r.changeKey[0], w.r.changeKey[1], strings.Join(w.r.OldPolicies, ","), strings.Join(w.r.NewPolicies, ","), w.r.Note}
	if dim != dimRowWorlds {
		parts = append(parts, "w:"+strings.Join(sorted(w.worlds), "\x01"))
	}
	if dim != dimRowNames {
		parts = append(parts, "n:"+strings.Join(sorted(w.names), ","))
	}
	if dim != dimRowNamespaces {
		parts = append(parts, "ns:"+strings.Join(sorted(w.nss), ","))
	}
	if dim != dimRowVerbs {
		parts = append(parts, "v:"+strings.Join(sorted(w.verbs), ","))
	}
	if dim != dimRowTargets {
		var ts []string
		for _, t := range w.targets {
			ts = append(ts, t.EntityType+"|"+t.APIGroup+"|"+t.Resource+"|"+t.Subresource+"|"+t.Path)
		}
		parts = append(parts, "t:"+strings.Join(sorted(ts), ","))
	}
	return strings.Join(parts, "\x00")
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// Contains reports whether req lies in region i: each of its values is
// represented by a value of the region's lists. ok is false when a value
// of req has no representative (the enumeration did not cover it). Every
// namespace is taken as unknown (see ContainsIn).
func (r *Result) Contains(i int, req *entities.Request) (in, ok bool) {
	return r.ContainsIn(i, req, nil)
}

// ContainsIn is Contains where the namespaces are those of ns (nil: none
// known).
func (r *Result) ContainsIn(i int, req *entities.Request, ns entities.NamespaceLookup) (in, ok bool) {
	g := r.Regions[i]
	sp := r.sp
	if sp == nil || g.Subject.Kind == KindAnyone {
		return g.Subject.Kind == KindAnyone, true
	}
	ok = true
	cls := func(d, v string) string {
		c, found := sp.dims[d].classify(v)
		ok = ok && found
		return c
	}
	if !r.subjectHas(g.Subject, req.User, cls) {
		return false, ok
	}
	verb := req.Verb
	if verb != entities.Wildcard && !(!req.ResourceRequest && slices.Contains(schemagen.NonResourceActions(), verb)) {
		verb = cls(dimVerb, verb)
	}
	if !slices.Contains(g.Verbs, verb) {
		return false, ok
	}
	if !req.ResourceRequest {
		path := cls(dimPath, req.Path)
		return slices.ContainsFunc(g.Targets, func(t Target) bool { return t.Path == path && t.EntityType == string(schemagen.NonResourceURLType) }), ok
	}
	if !r.resourceHas(g, req, cls) {
		return false, ok
	}
	return r.worldHas(g, req, ns), ok
}

// worldHas reports whether the request's namespace is in one of the
// region's namespace-label worlds.
func (r *Result) worldHas(g Region, req *entities.Request, ns entities.NamespaceLookup) bool {
	if len(g.NamespaceLabels) == 0 {
		return true
	}
	var obj map[string]any
	if ns != nil {
		obj, _ = ns.Namespace(req.Namespace)
	}
	desc, covered := r.sp.classifyWorld(obj)
	return covered && slices.Contains(g.NamespaceLabels, desc)
}

// subjectHas reports whether the user is the subject.
func (r *Result) subjectHas(s Subject, u entities.UserInfo, cls func(d, v string) string) bool {
	for _, g := range s.InGroups {
		if !slices.Contains(u.Groups, g) {
			return false
		}
	}
	for _, g := range s.NotIn {
		if slices.Contains(u.Groups, g) {
			return false
		}
	}
	got := subjectOf(cell{user: u.Name})
	if got.Kind != s.Kind {
		return false
	}
	switch s.Kind {
	case KindServiceAccount:
		return cls(dimPNamespace, got.Namespace) == s.Namespace && cls(dimPName, got.Name) == s.Name
	case KindNode:
		return cls(dimPName, got.Name) == s.Name
	}
	return cls(dimUsername, u.Name) == s.Name
}

// resourceHas reports whether a resource request's target, namespace and
// name are the region's.
func (r *Result) resourceHas(g Region, req *entities.Request, cls func(d, v string) string) bool {
	t := entities.ResolveTarget(r.schema, req)
	want := Target{EntityType: string(t.EntityType), APIGroup: req.APIGroup, Resource: req.Resource, Subresource: req.Subresource}
	if rep, ok := r.sp.shapeRep[t.EntityType]; ok {
		// A type no policy names is represented by one of its shape.
		t.Resource = r.sp.typed[rep]
		k := t.Resource.Key
		want = Target{EntityType: string(rep), APIGroup: k.Group, Resource: k.Resource, Subresource: k.Subresource}
	}
	if t.Resource != nil && t.Resource.AnySubresource {
		want.Subresource = cls(dimSubresource, req.Subresource)
	}
	if t.Resource == nil {
		if want.APIGroup != entities.Wildcard {
			want.APIGroup = cls(dimAPIGroup, want.APIGroup)
		}
		if want.Resource != entities.Wildcard {
			want.Resource = cls(dimResource, want.Resource)
		}
	}
	if !slices.Contains(g.Targets, want) {
		return false
	}
	ns, name := req.Namespace, req.Name
	if ns != "" {
		ns = cls(dimNamespace, ns)
	}
	if name != "" {
		name = cls(dimName, name)
		if req.NameFromSelector && r.sp.selectorNames {
			name = selectorNamePrefix + name
		}
	}
	return slices.Contains(g.Namespaces, ns) && slices.Contains(g.Names, name)
}
