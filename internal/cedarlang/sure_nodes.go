package cedarlang

import (
	"slices"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// sureNode is the check of a condition's expression n, when n is built
// from the shapes sure tests know (sureTest).
func sureNode(n ast.IsNode) (sureCheck, bool) {
	switch v := n.(type) {
	case ast.NodeTypeAnd:
		return sureBranches(sureAnd, v.Left, v.Right)
	case ast.NodeTypeOr:
		return sureBranches(sureOr, v.Left, v.Right)
	case ast.NodeTypeNot:
		sub, ok := sureNode(v.Arg)
		return sureCheck{kind: sureNot, subs: []sureCheck{sub}}, ok
	case ast.NodeTypeIs:
		return sureCheck{kind: sureResourceIs, types: []types.EntityType{v.EntityType}}, isVar(v.Left, "resource")
	case ast.NodeTypeHas:
		principal, ok := sureEntity(v.Arg)
		return sureCheck{kind: sureHas, principal: principal, name: v.Value}, ok
	case ast.NodeTypeEquals:
		return equalsCheck(v.Left, v.Right)
	case ast.NodeTypeLike:
		c, ok := attributeCheck(sureLike, v.Arg)
		c.pattern = v.Value
		return c, ok
	case ast.NodeTypeContains:
		return containsCheck(v.Left, v.Right)
	}
	return sureCheck{}, false
}

// sureBranches is the check of `l && r` or `l || r` (kind).
func sureBranches(kind sureKind, l, r ast.IsNode) (sureCheck, bool) {
	left, ok := sureNode(l)
	if !ok {
		return sureCheck{}, false
	}
	right, ok := sureNode(r)
	return sureCheck{kind: kind, subs: []sureCheck{left, right}}, ok
}

// sureEntity reports whether n is the principal (true) or the resource
// (false) variable; ok is false for anything else.
func sureEntity(n ast.IsNode) (principal, ok bool) {
	switch {
	case isVar(n, "principal"):
		return true, true
	case isVar(n, "resource"):
		return false, true
	}
	return false, false
}

// attributeCheck is a check of kind on n, an attribute of the principal or
// the resource.
func attributeCheck(kind sureKind, n ast.IsNode) (sureCheck, bool) {
	a, ok := n.(ast.NodeTypeAccess)
	if !ok {
		return sureCheck{}, false
	}
	principal, ok := sureEntity(a.Arg)
	return sureCheck{kind: kind, principal: principal, name: a.Value}, ok
}

// equalsCheck is the check of `x.a == "literal"`, either way round.
func equalsCheck(l, r ast.IsNode) (sureCheck, bool) {
	if _, isLit := l.(ast.NodeValue); isLit {
		l, r = r, l
	}
	c, ok := attributeCheck(sureEquals, l)
	s, isString := literalString(r)
	c.value = types.String(s)
	return c, ok && isString
}

// containsCheck is the check of `["literal", ...].contains(x.a)`.
func containsCheck(set, element ast.IsNode) (sureCheck, bool) {
	strs, ok := literalStrings(set)
	if !ok {
		return sureCheck{}, false
	}
	c, ok := attributeCheck(sureContains, element)
	c.values = make([]types.String, len(strs))
	for i, s := range strs {
		c.values[i] = types.String(s)
	}
	return c, ok
}

// sureValue is a check's value: false, true, or unknown (cedar-go could
// fail, or the check cannot tell).
type sureValue uint8

const (
	sureFalse sureValue = iota
	sureTrue
	sureUnknown
)

func sureBool(b bool) sureValue {
	if b {
		return sureTrue
	}
	return sureFalse
}

// conjunction is the value of checks joined by `&&`, as Cedar evaluates
// it: left to right, the first false one deciding, an unknown one before
// it leaving the whole unknown.
func conjunction(checks []sureCheck, f *SureFacts) sureValue {
	for i := range checks {
		if v := checks[i].eval(f); v != sureTrue {
			return v
		}
	}
	return sureTrue
}

func (c *sureCheck) eval(f *SureFacts) sureValue {
	switch c.kind {
	case sureAnd:
		return conjunction(c.subs, f)
	case sureOr:
		if v := c.subs[0].eval(f); v != sureFalse {
			return v
		}
		return c.subs[1].eval(f)
	case sureNot:
		switch c.subs[0].eval(f) {
		case sureTrue:
			return sureFalse
		case sureFalse:
			return sureTrue
		}
		return sureUnknown
	case sureHas, sureEquals, sureLike, sureContains:
		return c.attribute(f)
	}
	return sureBool(c.scope(f))
}

// scope is the value of a check that cannot fail: a scope's, or `is`.
func (c *sureCheck) scope(f *SureFacts) bool {
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
		return actionWithin(f.Action, c.uids)
	case sureResourceIs:
		return slices.Contains(c.types, f.ResourceType)
	}
	return false
}

// actionWithin reports whether action is one of uids or a member of one.
func actionWithin(action types.EntityUID, uids []types.EntityUID) bool {
	if slices.Contains(uids, action) {
		return true
	}
	if action.Type != schemagen.ActionType {
		return false
	}
	for _, g := range schemagen.ActionAncestors(string(action.ID)) {
		if slices.Contains(uids, schemagen.ActionUID(g)) {
			return true
		}
	}
	return false
}

// attribute is the value of a check on an attribute: `has` is never
// unknown; a read of an absent attribute fails in Cedar, and so does a
// `like` or `contains` test of a value that is not a string (unknown).
func (c *sureCheck) attribute(f *SureFacts) sureValue {
	var v types.Value
	var present bool
	if c.principal {
		v, present = f.PrincipalAttributes.Get(c.name)
	} else {
		v, present = f.Attributes[c.name]
	}
	if c.kind == sureHas {
		return sureBool(present)
	}
	if !present {
		return sureUnknown
	}
	s, isString := v.(types.String)
	switch {
	case c.kind == sureEquals:
		return sureBool(isString && s == c.value) // == of other types is false
	case !isString:
		return sureUnknown
	case c.kind == sureLike:
		return sureBool(c.pattern.Match(s))
	}
	return sureBool(slices.Contains(c.values, s))
}
