package cedarlang

import (
	"slices"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Dimensions: the paths the index keys, one per attribute whose value is
// known when a request is authorized (keyedPaths, plus the verb, the types,
// the groups and the tags). Every predicate kind the index knows applies to
// every dimension it can: equality and literal sets to all, `like` to the
// string-valued ones, containment to the set-valued ones.
const (
	dVerb uint8 = iota // the verb: action, context.verb
	dRType
	dUser       // principal username (the principal uid's id)
	dGroup      // a group the principal is in
	dPType      // principal type
	dPNamespace // ServiceAccount namespace
	dPName      // ServiceAccount or Node name
	dNamespace
	dName
	dAPIGroup
	dResource
	dPath // a non-resource URL's path
	// dExtra: a user-info extra (k, v) the principal has ("k\x00v", from
	// principal.getTag("k")), or an extra key it has ("k\x01", from
	// principal.hasTag("k")). Set-valued, like dGroup; always known.
	dExtra
	// dLabel: a label of the request's namespace (the labels of
	// resource.namespaceObject), as dExtra: "k\x00v" or "k\x01". Open when
	// the namespace's object is not known, absent when the request has none.
	dLabel
	dUID         // principal.uid: the user's UID, absent when it has none
	dSubresource // resource.subresource: never open ("*" is literal)
	nDims
	// dAlt: a disjunction of constraints on different dimensions: "alice,
	// or a member of admins", "in team-7, or a team-7 admin". A policy keyed
	// on it is filed under each alternative; it is not checked after the
	// lookup.
	dAlt = nDims
)

// resourceDims are the dimensions of the resource a request may leave open:
// a permit that constrains one the request leaves open can leave only a
// residual (CandidateQuery.SkipResidualOnly).
const resourceDims uint16 = 1<<dNamespace | 1<<dName | 1<<dAPIGroup | 1<<dResource | 1<<dPath | 1<<dLabel

// openableDims are every dimension a request may leave open: the resource's,
// and the verb ("*" in Candidates: every verb).
const openableDims = resourceDims | 1<<dVerb

// multiDims are the set-valued dimensions: a request has any number of
// values on them, and a constraint holds when one of them is among its own.
const multiDims uint16 = 1<<dGroup | 1<<dExtra | 1<<dLabel

func isMultiDim(d uint8) bool { return multiDims&(1<<d) != 0 }

func isResourceDim(d uint8) bool { return resourceDims&(1<<d) != 0 }

func isOpenableDim(d uint8) bool { return openableDims&(1<<d) != 0 }

// keyedPath is a scalar attribute the index keys: where a policy reads it,
// its dimension, when reading it cannot fail, and where a request's
// description holds its value.
type keyedPath struct {
	variable types.String // principal, resource or context
	attr     types.String
	dim      uint8
	// always: every request has it (reading it never fails). Otherwise it
	// may be absent, unless a top-level `has` guards it or the policy fixes
	// the principal's type among presentOn.
	always    bool
	presentOn []types.EntityType
	value     func(q *CandidateQuery) QueryValue
}

// keyedPaths are the scalar attributes of principal, resource and context
// whose values the index knows for a request. Objects (resource.object,
// oldObject) are not known before admission: reading them is left to
// partial evaluation, and no predicate on them is keyed.
var keyedPaths = []keyedPath{
	{variable: "principal", attr: schemagen.AttrUsername, dim: dUser, always: true,
		value: func(q *CandidateQuery) QueryValue { return known(string(q.Principal.ID)) }},
	{variable: "principal", attr: schemagen.AttrUID, dim: dUID,
		value: func(q *CandidateQuery) QueryValue { return q.UID }},
	{variable: "principal", attr: schemagen.AttrNamespace, dim: dPNamespace, presentOn: []types.EntityType{schemagen.ServiceAccountType},
		value: func(q *CandidateQuery) QueryValue { return q.PrincipalNamespace }},
	{variable: "principal", attr: schemagen.AttrName, dim: dPName, presentOn: []types.EntityType{schemagen.ServiceAccountType, schemagen.NodeType},
		value: func(q *CandidateQuery) QueryValue { return q.PrincipalName }},
	{variable: "context", attr: schemagen.AttrVerb, dim: dVerb, always: true, value: verbValue},
	{variable: "resource", attr: schemagen.AttrNamespace, dim: dNamespace,
		value: func(q *CandidateQuery) QueryValue { return q.Namespace }},
	{variable: "resource", attr: schemagen.AttrName, dim: dName,
		value: func(q *CandidateQuery) QueryValue { return q.Name }},
	{variable: "resource", attr: schemagen.AttrAPIGroup, dim: dAPIGroup,
		value: func(q *CandidateQuery) QueryValue { return q.APIGroup }},
	{variable: "resource", attr: schemagen.AttrResource, dim: dResource,
		value: func(q *CandidateQuery) QueryValue { return q.Resource }},
	{variable: "resource", attr: schemagen.AttrSubresource, dim: dSubresource,
		value: func(q *CandidateQuery) QueryValue { return q.Subresource }},
	{variable: "resource", attr: schemagen.AttrPath, dim: dPath,
		value: func(q *CandidateQuery) QueryValue { return q.Path }},
}

// verbValue is the request's verb: "*" is open (every verb).
func verbValue(q *CandidateQuery) QueryValue {
	if q.Verb == "*" {
		return openValue
	}
	return known(q.Verb)
}

// attr names a recognized attribute read: the dimension it fixes, and
// whether reading it may fail (the attribute may be absent).
func (x *extractor) attr(n ast.IsNode) (dim uint8, mayFail, ok bool) {
	a, isAccess := n.(ast.NodeTypeAccess)
	if !isAccess {
		return 0, false, false
	}
	v, isVar := a.Arg.(ast.NodeTypeVariable)
	if !isVar {
		return 0, false, false
	}
	i := slices.IndexFunc(keyedPaths, func(p keyedPath) bool { return p.variable == v.Name && p.attr == a.Value })
	if i < 0 {
		return 0, false, false
	}
	p := &keyedPaths[i]
	if p.always {
		return p.dim, false, true
	}
	guarded := x.guards[string(v.Name)+"."+string(a.Value)]
	return p.dim, !guarded && !x.onlyTypes(p.presentOn), true
}

// onlyTypes reports whether the policy so far fixes the principal's type
// among ts.
func (x *extractor) onlyTypes(ts []types.EntityType) bool {
	if x.ptypes == nil || len(ts) == 0 {
		return false
	}
	for _, t := range x.ptypes {
		if !slices.Contains(ts, types.EntityType(t)) {
			return false
		}
	}
	return true
}

// describe fills s with q's values as the index reads them.
func (ix *index) describe(s *lookupState, q CandidateQuery) {
	s.rtype = q.ResourceType
	s.set(ix, dPType, known(string(q.Principal.Type)))
	for i := range keyedPaths {
		s.set(ix, keyedPaths[i].dim, keyedPaths[i].value(&q))
	}
	for d := range nDims {
		if s.open[d] {
			s.openMask |= 1 << d
		}
	}
	s.has[dGroup] = true
	for _, g := range q.Groups {
		s.multi[dGroup] = append(s.multi[dGroup], ix.hash(g))
	}
	ix.describeTags(s, q)
}
