package cedarlang

import (
	"slices"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// A sure test answers, for the shapes RBAC-like policies take, whether a
// fully known request certainly satisfies a policy, from the request's
// values and without evaluating it:
//
//   - the principal scope: any, `== E`, `is T`, `in k8s::Group::"g"` or
//     `is T in k8s::Group::"g"`;
//   - the action scope: any, `== A`, `in A` or `in [A, ...]`;
//   - the resource scope: any or `is T`;
//   - `when` clauses that are conjunctions of `resource is T` (or a
//     disjunction of them), `!(resource is T)`, `resource has a` and
//     `resource.a == "literal"` (either way round).
//
// Each of these is true exactly when the test below says so, and none of
// them can fail when it is true, so "certainly satisfied" is what cedar-go
// would answer. Anything else (an `unless`, a context read, a literal of
// another type) has no sure test. The test only ever answers "satisfied":
// a request it does not certainly satisfy is evaluated by cedar-go, so
// non-matches and errors stay cedar-go's own.
type sureTest struct {
	checks []sureCheck
}

type sureKind uint8

const (
	surePrincipalIs   sureKind = iota // principal == uid
	surePrincipalType                 // principal's type is one of types
	sureInGroup                       // principal in k8s::Group::name
	sureActionIs                      // action == uid
	sureActionIn                      // action in one of uids
	sureResourceIs                    // resource's type is one of types
	sureResourceIsNot                 // resource's type is not types[0]
	sureHas                           // resource has name
	sureEquals                        // resource.name == value
)

type sureCheck struct {
	kind  sureKind
	name  types.String // the attribute, or the group
	value types.String
	uid   types.EntityUID
	uids  []types.EntityUID
	types []types.EntityType
}

// SureFacts are the values of a fully known request that sure tests read,
// as the engine gives them to cedar-go: the principal's uid and groups (its
// only ancestors), the action, the resource's type and attributes.
type SureFacts struct {
	Principal    types.EntityUID
	Groups       []string
	Action       types.EntityUID
	ResourceType types.EntityType
	Attributes   types.RecordMap
}

// FactsOf are the sure facts of req, given the action, the resource and its
// attributes the engine evaluates it with.
func FactsOf(req *entities.Request, action, resource types.EntityUID, attrs types.RecordMap) SureFacts {
	return SureFacts{Principal: entities.PrincipalUID(req.User.Name, req.User.Groups), Groups: req.User.Groups, Action: action, ResourceType: resource.Type, Attributes: attrs}
}

// SurelySatisfied reports whether the request of facts certainly satisfies
// p (see sureTest); false also when p has no sure test.
func (p *Policy) SurelySatisfied(f *SureFacts) bool {
	t := p.sureTest()
	if t == nil || f.ResourceType == "" {
		return false // an untyped resource is no entity: `has` would not hold
	}
	for i := range t.checks {
		if !t.checks[i].holds(f) {
			return false
		}
	}
	return true
}

func (c *sureCheck) holds(f *SureFacts) bool {
	switch c.kind {
	case surePrincipalIs:
		return f.Principal == c.uid
	case surePrincipalType:
		return slices.Contains(c.types, f.Principal.Type)
	case sureInGroup:
		return slices.Contains(f.Groups, string(c.name))
	case sureActionIs:
		return f.Action == c.uid
	case sureActionIn:
		if slices.Contains(c.uids, f.Action) {
			return true
		}
		if f.Action.Type != schemagen.ActionType {
			return false
		}
		for _, g := range schemagen.ActionAncestors(string(f.Action.ID)) {
			if slices.Contains(c.uids, schemagen.ActionUID(g)) {
				return true
			}
		}
		return false
	case sureResourceIs:
		return slices.Contains(c.types, f.ResourceType)
	case sureResourceIsNot:
		return f.ResourceType != c.types[0]
	case sureHas:
		_, ok := f.Attributes[c.name]
		return ok
	case sureEquals:
		v, ok := f.Attributes[c.name].(types.String)
		return ok && v == c.value
	}
	return false
}

// sureTest is p's sure test, found on first use (nil: none).
func (p *Policy) sureTest() *sureTest {
	l := p.lazy
	l.sureOnce.Do(func() { l.sure = findSureTest(p.AST) })
	return l.sure
}

// findSureTest is a's sure test, or nil when a has a part outside the
// shapes it knows.
func findSureTest(a *ast.Policy) *sureTest {
	t := &sureTest{}
	if !t.principalScope(a.Principal) || !t.actionScope(a.Action) || !t.resourceScope(a.Resource) {
		return nil
	}
	for _, c := range a.Conditions {
		if c.Condition != ast.ConditionWhen {
			return nil
		}
		for _, n := range appendConjuncts(nil, c.Body) {
			check, ok := sureConjunct(n)
			if !ok {
				return nil
			}
			t.checks = append(t.checks, check)
		}
	}
	return t
}

func (t *sureTest) principalScope(s ast.IsPrincipalScopeNode) bool {
	switch v := s.(type) {
	case ast.ScopeTypeAll:
		return true
	case ast.ScopeTypeEq:
		t.checks = append(t.checks, sureCheck{kind: surePrincipalIs, uid: v.Entity})
		return true
	case ast.ScopeTypeIs:
		t.checks = append(t.checks, sureCheck{kind: surePrincipalType, types: []types.EntityType{v.Type}})
		return true
	case ast.ScopeTypeIn:
		return t.inGroup(v.Entity)
	case ast.ScopeTypeIsIn:
		t.checks = append(t.checks, sureCheck{kind: surePrincipalType, types: []types.EntityType{v.Type}})
		return t.inGroup(v.Entity)
	}
	return false
}

// inGroup: a principal's only ancestors are its groups.
func (t *sureTest) inGroup(e types.EntityUID) bool {
	if e.Type != schemagen.GroupType {
		return false
	}
	t.checks = append(t.checks, sureCheck{kind: sureInGroup, name: e.ID})
	return true
}

func (t *sureTest) actionScope(s ast.IsActionScopeNode) bool {
	switch v := s.(type) {
	case ast.ScopeTypeAll:
		return true
	case ast.ScopeTypeEq:
		t.checks = append(t.checks, sureCheck{kind: sureActionIs, uid: v.Entity})
		return true
	case ast.ScopeTypeIn:
		t.checks = append(t.checks, sureCheck{kind: sureActionIn, uids: []types.EntityUID{v.Entity}})
		return true
	case ast.ScopeTypeInSet:
		t.checks = append(t.checks, sureCheck{kind: sureActionIn, uids: slices.Clone(v.Entities)})
		return true
	}
	return false
}

func (t *sureTest) resourceScope(s ast.IsResourceScopeNode) bool {
	switch v := s.(type) {
	case ast.ScopeTypeAll:
		return true
	case ast.ScopeTypeIs:
		t.checks = append(t.checks, sureCheck{kind: sureResourceIs, types: []types.EntityType{v.Type}})
		return true
	}
	return false
}

// sureConjunct is the check of one top-level conjunct of a when clause.
func sureConjunct(n ast.IsNode) (sureCheck, bool) {
	switch v := n.(type) {
	case ast.NodeTypeIs, ast.NodeTypeOr:
		ts, ok := resourceTypes(v)
		return sureCheck{kind: sureResourceIs, types: ts}, ok
	case ast.NodeTypeNot:
		if is, ok := v.Arg.(ast.NodeTypeIs); ok && isVar(is.Left, "resource") {
			return sureCheck{kind: sureResourceIsNot, types: []types.EntityType{is.EntityType}}, true
		}
	case ast.NodeTypeHas:
		if isVar(v.Arg, "resource") {
			return sureCheck{kind: sureHas, name: v.Value}, true
		}
	case ast.NodeTypeEquals:
		return equalsCheck(v.Left, v.Right)
	}
	return sureCheck{}, false
}

// resourceTypes are the types of `resource is T1 || resource is T2 ...`.
func resourceTypes(n ast.IsNode) ([]types.EntityType, bool) {
	switch v := n.(type) {
	case ast.NodeTypeIs:
		return []types.EntityType{v.EntityType}, isVar(v.Left, "resource")
	case ast.NodeTypeOr:
		l, ok := resourceTypes(v.Left)
		if !ok {
			return nil, false
		}
		r, ok := resourceTypes(v.Right)
		return append(l, r...), ok
	}
	return nil, false
}

// equalsCheck is the check of `resource.a == "literal"`, either way round.
func equalsCheck(l, r ast.IsNode) (sureCheck, bool) {
	if _, isLit := l.(ast.NodeValue); isLit {
		l, r = r, l
	}
	a, ok := l.(ast.NodeTypeAccess)
	if !ok || !isVar(a.Arg, "resource") {
		return sureCheck{}, false
	}
	s, ok := literalString(r)
	return sureCheck{kind: sureEquals, name: a.Value, value: types.String(s)}, ok
}
