package diff

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// The request dimensions the method enumerates, named by the attribute a
// policy reads them through.
const (
	dimVerb        = "context.verb"
	dimNamespace   = "resource.namespace"
	dimName        = "resource.name"
	dimPath        = "resource.path"
	dimAPIGroup    = "resource.apiGroup"
	dimResource    = "resource.resource"
	dimSubresource = "resource.subresource"
	dimUsername    = "principal.username"
	dimPNamespace  = "principal.namespace"
	dimPName       = "principal.name"
	dimGroups      = "principal.groups"
)

// stringDims are the dimensions whose values are strings a policy compares
// with literals (every one but the groups, which are a set).
var stringDims = []string{dimVerb, dimNamespace, dimName, dimPath, dimAPIGroup, dimResource, dimSubresource, dimUsername, dimPNamespace, dimPName}

// admissionVerbs are the verbs whose requests admission sees.
var admissionVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// literals are the values policies compare request attributes with: string
// literals by dimension, like patterns by dimension, entity literals by
// type, and the constructs the method cannot enumerate exactly.
type literals struct {
	strs     map[string]map[string]bool
	likes    map[string][]types.Pattern
	entities map[types.EntityType]map[string]bool
	// crossDims are dimensions compared with another attribute: they get a
	// second fresh value, so that both "equal" and "different" occur.
	crossDims map[string]bool
	// inexact names constructs the enumeration does not cover.
	inexact map[string]bool
	// readsNS: a policy reads resource.namespaceObject; nsKeys are the
	// namespace label keys they name (nslabels.go).
	readsNS bool
	nsKeys  map[string]bool
	// readsObject: a policy reads resource.object; readsNamed: it reads
	// resource.named.
	readsObject, readsNamed bool
}

func newLiterals() *literals {
	return &literals{strs: map[string]map[string]bool{}, likes: map[string][]types.Pattern{}, entities: map[types.EntityType]map[string]bool{},
		crossDims: map[string]bool{}, inexact: map[string]bool{}, nsKeys: map[string]bool{}}
}

func addTo[K comparable](m map[K]map[string]bool, k K, v string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][v] = true
}

// add reads the literals of p.
func (l *literals) add(p *cedarlang.Policy) {
	l.scope(p.AST)
	for _, c := range p.AST.Conditions {
		ast.Inspect(ast.NewNode(c.Body), func(n ast.IsNode) bool {
			l.node(n)
			return true
		})
		ast.Inspect(ast.NewNode(c.Body), l.nsNode)
	}
}

// scope reads the entity literals of p's scope.
func (l *literals) scope(p *ast.Policy) {
	uids := func(s any) {
		switch v := s.(type) {
		case ast.ScopeTypeEq:
			addTo(l.entities, v.Entity.Type, string(v.Entity.ID))
		case ast.ScopeTypeIn:
			addTo(l.entities, v.Entity.Type, string(v.Entity.ID))
		case ast.ScopeTypeInSet:
			for _, e := range v.Entities {
				addTo(l.entities, e.Type, string(e.ID))
			}
		case ast.ScopeTypeIs:
			addTo(l.entities, v.Type, "")
		case ast.ScopeTypeIsIn:
			addTo(l.entities, v.Type, "")
			addTo(l.entities, v.Entity.Type, string(v.Entity.ID))
		}
	}
	uids(p.Principal)
	uids(p.Action)
	uids(p.Resource)
}

// node reads one condition node: comparisons of an attribute with
// literals, entity literals, `is` tests, and constructs not enumerated.
func (l *literals) node(n ast.IsNode) {
	switch v := n.(type) {
	case ast.NodeValue:
		l.value(v.Value, "")
	case ast.NodeTypeIs:
		addTo(l.entities, v.EntityType, "")
	case ast.NodeTypeIsIn:
		addTo(l.entities, v.EntityType, "")
	case ast.NodeTypeLike:
		if d := attrDim(v.Arg); d != "" {
			l.likes[d] = append(l.likes[d], v.Value)
		}
	case ast.NodeTypeEquals:
		l.compare(v.Left, v.Right)
	case ast.NodeTypeNotEquals:
		l.compare(v.Left, v.Right)
	case ast.NodeTypeIn:
		l.compare(v.Left, v.Right)
	case ast.NodeTypeContains:
		l.compare(v.Left, v.Right)
	case ast.NodeTypeContainsAll:
		l.compare(v.Left, v.Right)
	case ast.NodeTypeContainsAny:
		l.compare(v.Left, v.Right)
	case ast.NodeTypeAccess:
		l.access(v.Arg, string(v.Value))
	case ast.NodeTypeHas:
		l.access(v.Arg, string(v.Value))
	case ast.NodeTypeHasTag:
		l.tags(v.Left)
	case ast.NodeTypeGetTag:
		l.tags(v.Left)
	case ast.NodeTypeIsEmpty:
		if attrDim(v.Arg) == dimGroups {
			// Membership in a group no policy names matters too.
			addTo(l.strs, dimGroups, freshGroup)
		}
	}
}

// value records the strings and entities of a literal, for dimension d
// ("" when it is compared with nothing recognized).
func (l *literals) value(v types.Value, d string) {
	switch x := v.(type) {
	case types.String:
		if d != "" {
			addTo(l.strs, d, string(x))
		}
	case types.EntityUID:
		addTo(l.entities, x.Type, string(x.ID))
	case types.Set:
		for e := range x.All() {
			l.value(e, d)
		}
	}
}

// compare records the literals a comparison of an attribute with literals
// uses; an attribute compared with another attribute marks both.
func (l *literals) compare(a, b ast.IsNode) {
	da, db := attrDim(a), attrDim(b)
	switch {
	case da != "" && db != "":
		l.crossDims[da], l.crossDims[db] = true, true
	case da != "":
		l.literalsOf(b, da)
	case db != "":
		l.literalsOf(a, db)
	}
}

// literalsOf records the string literals in n (a value or a set of
// values) for dimension d.
func (l *literals) literalsOf(n ast.IsNode, d string) {
	ast.Inspect(ast.NewNode(n), func(n ast.IsNode) bool {
		if v, ok := n.(ast.NodeValue); ok {
			l.value(v.Value, d)
		}
		return true
	})
}

// access notes attributes the enumeration does not vary, and reads of the
// object and of resource.named (a read of attribute attr of arg, or a
// `has` test of it).
func (l *literals) access(arg ast.IsNode, attr string) {
	switch {
	case isVarNode(arg, "principal") && attr == schemagen.AttrUID:
		l.inexact["principal.uid"] = true
	case isVarNode(arg, "resource") && attr == "labelSelector":
		l.inexact["resource.labelSelector"] = true
	case isVarNode(arg, "resource") && attr == "fieldSelector":
		l.inexact["resource.fieldSelector"] = true
	case isVarNode(arg, "resource") && attr == "object":
		l.readsObject = true
	case isVarNode(arg, "resource") && attr == schemagen.AttrNamed:
		l.readsNamed = true
	}
}

// attrDim is the dimension n reads, or "".
func attrDim(n ast.IsNode) string {
	if g, ok := n.(ast.NodeTypeGetTag); ok {
		if k, ok := labelKey(g.Left, g.Right); ok {
			return nsLabelDim(k)
		}
		return ""
	}
	a, ok := n.(ast.NodeTypeAccess)
	if !ok {
		return ""
	}
	v, ok := a.Arg.(ast.NodeTypeVariable)
	if !ok {
		return ""
	}
	d := string(v.Name) + "." + string(a.Value)
	if d == dimGroups || slices.Contains(stringDims, d) {
		return d
	}
	return ""
}

func isVarNode(n ast.IsNode, name string) bool {
	v, ok := n.(ast.NodeTypeVariable)
	return ok && string(v.Name) == name
}

// tags notes a read of the principal's tags (the user's extra), which the
// enumeration does not vary.
func (l *literals) tags(of ast.IsNode) {
	if isVarNode(of, "principal") {
		l.inexact["the user's extra (principal tags)"] = true
	}
}

// values are the literals of dimension d: its own, the loose ones, and
// (for names of principals and users) the ids of entity literals.
func (l *literals) values(d string) []string {
	set := map[string]bool{}
	for v := range l.strs[d] {
		set[v] = true
	}
	switch d {
	case dimVerb:
		// The engine treats the verbs admission sees apart (the object is
		// unknown): each is its own class.
		for _, v := range admissionVerbs {
			set[v] = true
		}
		for v := range l.entities[schemagen.ActionType] {
			set[v] = true
		}
		delete(set, schemagen.AllVerbs)
	case dimUsername:
		for _, t := range []types.EntityType{schemagen.UserType, schemagen.ServiceAccountType, schemagen.NodeType} {
			for v := range l.entities[t] {
				set[v] = true
			}
		}
	case dimPNamespace, dimPName:
		l.principalParts(d, set)
	}
	if !strings.HasPrefix(d, nsLabelDim("")) {
		delete(set, "") // a label's value may be empty; these never are
	}
	return sortedKeys(set)
}

// principalParts adds to set the namespaces or names (d) of the
// ServiceAccount and Node usernames among the literals.
func (l *literals) principalParts(d string, set map[string]bool) {
	users := slices.Collect(maps.Keys(l.strs[dimUsername]))
	for _, t := range []types.EntityType{schemagen.ServiceAccountType, schemagen.NodeType} {
		users = append(users, slices.Collect(maps.Keys(l.entities[t]))...)
	}
	for _, u := range users {
		if ns, name, ok := entities.ServiceAccountName(u); ok {
			set[map[bool]string{true: ns, false: name}[d == dimPNamespace]] = true
		} else if name, ok := strings.CutPrefix(u, schemagen.NodeUserPrefix); ok && d == dimPName {
			set[name] = true
		}
	}
}

// groups are the group literals: k8s::Group entities and strings compared
// with principal.groups.
func (l *literals) groups() []string {
	set := map[string]bool{}
	for v := range l.entities[schemagen.GroupType] {
		set[v] = true
	}
	for v := range l.strs[dimGroups] {
		set[v] = true
	}
	delete(set, "")
	return sortedKeys(set)
}

// patterns are the like patterns of dimension d. For the verb, an action
// group impersonate-on:<mode>:* among the literals is the pattern of its
// members, so that a member no policy names is represented.
func (l *literals) patterns(d string) []types.Pattern {
	out := slices.Clone(l.likes[d])
	if d == dimVerb {
		for _, v := range sortedKeys(l.entities[schemagen.ActionType]) {
			if mode, _, ok := schemagen.ParseImpersonateOn(v); ok && schemagen.IsActionGroup(v) {
				out = append(out, types.NewPattern(schemagen.ImpersonateOnVerb(mode, ""), types.Wildcard{}))
			}
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// likeStrings are strings built to match p (each wildcard one "m") and to
// miss it (the match with a character before and after), the misses only
// where they do miss.
func likeStrings(p types.Pattern) []string {
	text := string(p.MarshalCedar())
	text = strings.TrimSuffix(strings.TrimPrefix(text, `"`), `"`)
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		switch {
		case text[i] == '\\' && i+1 < len(text):
			i++
			b.WriteByte(unescape(text[i]))
		case text[i] == '*':
			b.WriteString("m")
		default:
			b.WriteByte(text[i])
		}
	}
	match := b.String()
	out := []string{}
	if p.Match(types.String(match)) {
		out = append(out, match)
	}
	for _, miss := range []string{"~" + match, match + "~", strings.TrimSuffix(match, "m")} {
		if miss != "" && !p.Match(types.String(miss)) {
			out = append(out, miss)
		}
	}
	return out
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case '0':
		return 0
	}
	return c
}
