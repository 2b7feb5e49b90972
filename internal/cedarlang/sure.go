package cedarlang

import (
	"slices"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// A sure test decides, for the shapes most policies take, whether a fully
// known request satisfies a policy, from the request's values and without
// evaluating it with cedar-go:
//
//   - the principal scope: any, `== E`, `is T`, `in k8s::Group::"g"` or
//     `is T in k8s::Group::"g"`;
//   - the action scope: any, `== A`, `in A` or `in [A, ...]`;
//   - the resource scope: any or `is T`;
//   - `when` and `unless` clauses built with `&&`, `||` and `!` from
//     `resource is T`, `principal has a` and `resource has a`, and, on an
//     attribute `a` of the principal or the resource: `a == "literal"`
//     (either way round), `a like "pattern"` and
//     `["literal", ...].contains(a)`.
//
// The test follows Cedar's evaluation order, short-circuits included, and
// answers Unsure wherever cedar-go could fail: an attribute read that is
// absent, a `like` or `contains` of a value that is not a string. So an
// answer other than Unsure is exactly what cedar-go would answer, with no
// error; Unsure leaves the policy to cedar-go, whose non-matches and
// errors stay its own. Anything else (a context read, a tag, a literal of
// another type) has no sure test.
type sureTest struct {
	checks []sureCheck // a conjunction, in evaluation order
	// readsPrincipal: some check reads the principal's attributes
	// (SureFacts.PrincipalAttributes).
	readsPrincipal bool
}

// Sure is a sure test's answer.
type Sure uint8

const (
	// Unsure: cedar-go evaluates the policy.
	Unsure Sure = iota
	// SurelySatisfied: cedar-go would find the policy satisfied.
	SurelySatisfied
	// SurelyNotSatisfied: cedar-go would find it not satisfied, without
	// an error.
	SurelyNotSatisfied
)

type sureKind uint8

const (
	surePrincipalIs   sureKind = iota // principal == uid
	surePrincipalType                 // principal's type is one of types
	sureInGroup                       // principal in k8s::Group::name
	sureActionIs                      // action == uid
	sureActionIn                      // action in one of uids
	sureResourceIs                    // resource's type is one of types
	sureHas                           // entity has name
	sureEquals                        // entity.name == value
	sureLike                          // entity.name like pattern
	sureContains                      // [values...].contains(entity.name)
	sureAnd                           // every one of subs, left to right
	sureOr                            // one of subs, left to right
	sureNot                           // not subs[0]
)

type sureCheck struct {
	kind sureKind
	// principal: sureHas, sureEquals, sureLike and sureContains read the
	// principal's attribute name, else the resource's.
	principal bool
	name      types.String // the attribute, or the group
	value     types.String
	values    []types.String
	pattern   types.Pattern
	uid       types.EntityUID
	uids      []types.EntityUID
	types     []types.EntityType
	subs      []sureCheck
}

// SureFacts are the values of a fully known request that sure tests read,
// as the engine gives them to cedar-go: the principal's uid and groups (its
// only ancestors), the action, the resource's type and attributes, and,
// for a policy whose test reads them (Policy.SureReadsPrincipal), the
// principal's attributes.
type SureFacts struct {
	Principal    types.EntityUID
	Groups       []string
	Action       types.EntityUID
	ResourceType types.EntityType
	Attributes   types.RecordMap
	// PrincipalAttributes: nil until the caller fills them in.
	PrincipalAttributes *types.Record
}

// FactsOf are the sure facts of req, given the action, the resource and its
// attributes the engine evaluates it with.
func FactsOf(req *entities.Request, action, resource types.EntityUID, attrs types.RecordMap) SureFacts {
	return SureFacts{Principal: entities.PrincipalUID(req.User.Name, req.User.Groups), Groups: req.User.Groups, Action: action, ResourceType: resource.Type, Attributes: attrs}
}

// Surely is what p's sure test answers for the request of f (see
// sureTest); Unsure also when p has no sure test, or when the test reads
// the principal's attributes and f does not hold them.
func (p *Policy) Surely(f *SureFacts) Sure {
	t := p.sureTest()
	if t == nil || f.ResourceType == "" || (t.readsPrincipal && f.PrincipalAttributes == nil) {
		return Unsure // an untyped resource is no entity: `has` would fail
	}
	switch conjunction(t.checks, f) {
	case sureTrue:
		return SurelySatisfied
	case sureFalse:
		return SurelyNotSatisfied
	}
	return Unsure
}

// SureReadsPrincipal reports whether p's sure test reads the principal's
// attributes, which SureFacts.PrincipalAttributes must then hold.
func (p *Policy) SureReadsPrincipal() bool {
	t := p.sureTest()
	return t != nil && t.readsPrincipal
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
		check, ok := sureNode(c.Body)
		if !ok {
			return nil
		}
		if c.Condition == ast.ConditionUnless {
			check = sureCheck{kind: sureNot, subs: []sureCheck{check}}
		}
		t.checks = append(t.checks, check)
	}
	t.readsPrincipal = slices.ContainsFunc(t.checks, readsPrincipal)
	return t
}

// readsPrincipal reports whether c (or a check under it) reads the
// principal's attributes.
func readsPrincipal(c sureCheck) bool {
	switch c.kind {
	case sureHas, sureEquals, sureLike, sureContains:
		return c.principal
	}
	return slices.ContainsFunc(c.subs, readsPrincipal)
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
