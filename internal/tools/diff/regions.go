package diff

import (
	"slices"
	"sort"

	"github.com/cedar-policy/cedar-go/types"
	"k8s.io/apiserver/pkg/authentication/user"

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

// Subject is who a region is about: anyone, or one kind of principal (all
// of them, every ServiceAccount of a namespace, or one name), and the
// groups it is in and not in among those the policies name there (any
// others do not matter). A name or namespace equal to Other means any
// value no policy there names. A node's Node is in system:nodes, and a
// User named like a node is not: that group is not listed for them.
type Subject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// All: every principal of the kind (of the namespace, for
	// ServiceAccounts with a namespace); Name is empty.
	All      bool     `json:"all,omitempty"`
	InGroups []string `json:"inGroups,omitempty"`
	NotIn    []string `json:"notInGroups,omitempty"`
}

// Target is a resource (by group, resource and subresource) or a
// non-resource path.
type Target struct {
	EntityType  string `json:"entityType"`
	APIGroup    string `json:"apiGroup,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Path        string `json:"path,omitempty"`
	// Namespaced: the resource is namespaced (or may be: k8s::Resource).
	Namespaced bool `json:"namespaced,omitempty"`
	// Others: the resource stands for every resource of its shape
	// (namespaced or not, with a subresource or not) that no policy names.
	Others bool `json:"others,omitempty"`
}

// Change is a decision before and after: Allow, Deny, NoOpinion or
// Conditional.
type Change struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Dimensions a region may hold for every value of (Region.Any).
const (
	AnyVerb      = "verbs"
	AnyNamespace = "namespaces"
	AnyName      = "names"
	AnyPath      = "paths"
	AnyLabels    = "namespaceLabels"
)

// Region is a set of requests whose decision changes the same way: every
// combination of its verbs, targets, namespaces and names made by its
// subject. Values equal to Other stand for any value no policy names
// there. A dimension listed in Any holds every value (its list is empty):
// the change does not depend on it.
type Region struct {
	Subject    Subject  `json:"subject"`
	Verbs      []string `json:"verbs,omitempty"`
	Targets    []Target `json:"targets"`
	Namespaces []string `json:"namespaces,omitempty"`
	Names      []string `json:"names,omitempty"`
	// NamespaceLabels are the namespace-label worlds of the region, as
	// label selectors (k=v, !k), "(unknown)", "(no labels)" or "(other
	// labels)"; absent where no policy reads the namespace's labels.
	NamespaceLabels []string `json:"namespaceLabels,omitempty"`
	Any             []string `json:"any,omitempty"`
	Change          Change   `json:"change"`
	Example         *Example `json:"example,omitempty"`
	OldPolicies     []string `json:"oldPolicies,omitempty"`
	NewPolicies     []string `json:"newPolicies,omitempty"`
	Exact           bool     `json:"exact"`
	// MayWiden: conditional before and after, and the new conditions may
	// allow an object the old ones do not (see mayWiden).
	MayWiden bool   `json:"mayWiden,omitempty"`
	Note     string `json:"note,omitempty"`
	// Requests is the number of representative requests of the region
	// (each stands for the requests its values represent).
	Requests int `json:"requests"`
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

// subjectOf is the subject of a cell: its principal as Kubernetes types
// it, in and not in the groups enumerated (system:nodes left out for a
// node's username: its kind says which side it is on).
func subjectOf(c *cell) Subject {
	in, out := c.in(), c.out()
	s := identitySubject(c.lf.user, slices.Contains(in, user.NodesGroup))
	if isNodeUsername(c.lf.user) {
		notNodes := func(g string) bool { return g == user.NodesGroup }
		in, out = slices.DeleteFunc(in, notNodes), slices.DeleteFunc(out, notNodes)
	}
	s.InGroups, s.NotIn = in, out
	return s
}

// subjectKey is a subject without its groups, as a key.
func subjectKey(s Subject) string {
	all := ""
	if s.All {
		all = "*"
	}
	return s.Kind + "\x00" + s.Namespace + "\x00" + s.Name + "\x00" + all
}

func policyIDs(d engine.Decision) []string {
	ps := d.Policies()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// targetOf is a point's target (without the path of a non-resource URL,
// which rows list as their namespace).
func (r *run) targetOf(x point) Target {
	t := Target{EntityType: string(x.entityType), APIGroup: x.group, Resource: x.resource, Subresource: x.subresource, Namespaced: x.namespaced}
	if rep, ok := r.sp.shapeRep[x.entityType]; ok && rep == x.entityType {
		t.Others = true
	}
	return t
}

// targetKey is a target as a key.
func targetKey(t Target) string {
	return t.EntityType + "|" + t.APIGroup + "|" + t.Resource + "|" + t.Subresource + "|" + t.Path
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}
