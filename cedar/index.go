package cedar

import (
	"slices"

	"github.com/cedar-policy/cedar-go/types"
	"github.com/cedar-policy/cedar-go/x/exp/ast"

	"github.com/kcedar/kcedar/schemagen"
)

// The index narrows a request to the policies whose scope can match it, so the
// cost of a decision grows with the policies that concern the request, not with
// the size of the set. Keys come from the scope only; when clauses are evaluated.
//
// A policy lands in one bucket per (action, resource type) pair of its scope
// (anyKey for an unconstrained part), and within a bucket under its principal
// key: the principal uid, a group, a principal type, or any.
type index struct {
	buckets map[bucketKey]*bucket
}

type bucketKey struct {
	action       string // verb, or anyKey
	resourceType types.EntityType
}

const anyKey = "\x00any"

type bucket struct {
	anyPrincipal []int
	byPrincipal  map[principalKey][]int
}

type principalKey struct {
	kind byte // 'u' entity uid, 'g' group, 't' type
	typ  types.EntityType
	id   types.String
}

func buildIndex(policies []*Policy) *index {
	ix := &index{buckets: map[bucketKey]*bucket{}}
	for i, p := range policies {
		actions := scopeActions(p.AST.Action)
		if len(actions) == 1 && actions[0] == anyKey {
			if vs, ok := contextVerbs(p.AST); ok {
				actions = vs
			}
		}
		rtypes := scopeResourceTypes(p.AST.Resource)
		pkey, anyP := scopePrincipal(p.AST.Principal)
		for _, a := range actions {
			for _, rt := range rtypes {
				k := bucketKey{a, rt}
				b := ix.buckets[k]
				if b == nil {
					b = &bucket{byPrincipal: map[principalKey][]int{}}
					ix.buckets[k] = b
				}
				if anyP {
					b.anyPrincipal = append(b.anyPrincipal, i)
				} else {
					b.byPrincipal[pkey] = append(b.byPrincipal[pkey], i)
				}
			}
		}
	}
	return ix
}

func scopeActions(s ast.IsActionScopeNode) []string {
	switch v := s.(type) {
	case ast.ScopeTypeEq:
		return []string{actionKey(v.Entity)}
	case ast.ScopeTypeIn:
		if v.Entity == schemagen.AllVerbsAction {
			return []string{anyKey}
		}
		return []string{actionKey(v.Entity)}
	case ast.ScopeTypeInSet:
		out := make([]string, 0, len(v.Entities))
		for _, e := range v.Entities {
			if e == schemagen.AllVerbsAction {
				return []string{anyKey}
			}
			out = append(out, actionKey(e))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return []string{anyKey}
}

// actionKey is the verb of a k8s::Action; other entities get a key no request
// uses, since a request's action is always a k8s::Action.
func actionKey(e types.EntityUID) string {
	if e.Type != schemagen.ActionType {
		return "\x00" + string(e.Type) + "::" + string(e.ID)
	}
	return string(e.ID)
}

func scopeResourceTypes(s ast.IsResourceScopeNode) []types.EntityType {
	if t, ok := ScopeResourceType(s); ok {
		return []types.EntityType{t}
	}
	return []types.EntityType{anyKey}
}

// ScopeResourceType is the one resource type a resource scope allows
// (`resource is T`, `is T in ...`, `== T::"..."`); ok is false when the scope
// allows every type.
func ScopeResourceType(s ast.IsResourceScopeNode) (t types.EntityType, ok bool) {
	switch v := s.(type) {
	case ast.ScopeTypeIs:
		return v.Type, true
	case ast.ScopeTypeIsIn:
		return v.Type, true
	case ast.ScopeTypeEq:
		return v.Entity.Type, true
	}
	return "", false
}

func scopePrincipal(s ast.IsPrincipalScopeNode) (principalKey, bool) {
	switch v := s.(type) {
	case ast.ScopeTypeEq:
		return principalKey{kind: 'u', typ: v.Entity.Type, id: v.Entity.ID}, false
	case ast.ScopeTypeIn:
		return inKey(v.Entity), false
	case ast.ScopeTypeIs:
		return principalKey{kind: 't', typ: v.Type}, false
	case ast.ScopeTypeIsIn:
		return inKey(v.Entity), false
	}
	return principalKey{}, true
}

// inKey: principals' only ancestors are groups, so `principal in X` matches a
// group's members when X is a group and otherwise only X itself.
func inKey(e types.EntityUID) principalKey {
	if e.Type == schemagen.GroupType {
		return principalKey{kind: 'g', id: e.ID}
	}
	return principalKey{kind: 'u', typ: e.Type, id: e.ID}
}

// Candidates returns, in policy order, the policies whose scope may match a
// request by principal (with its groups) doing verb on resourceType. The slice
// is freshly allocated.
func (ps *PolicySet) Candidates(principal types.EntityUID, groups []string, verb string, resourceType types.EntityType) []*Policy {
	var idx []int
	for _, a := range [2]string{verb, anyKey} {
		for _, rt := range [2]types.EntityType{resourceType, anyKey} {
			b := ps.index.buckets[bucketKey{a, rt}]
			if b == nil {
				continue
			}
			idx = append(idx, b.anyPrincipal...)
			if len(b.byPrincipal) == 0 {
				continue
			}
			idx = append(idx, b.byPrincipal[principalKey{kind: 'u', typ: principal.Type, id: principal.ID}]...)
			idx = append(idx, b.byPrincipal[principalKey{kind: 't', typ: principal.Type}]...)
			for _, g := range groups {
				idx = append(idx, b.byPrincipal[principalKey{kind: 'g', id: types.String(g)}]...)
			}
		}
	}
	if len(idx) == 0 {
		return nil
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	out := make([]*Policy, len(idx))
	for i, j := range idx {
		out[i] = ps.Policies[j]
	}
	return out
}

// contextVerbs: a policy with an unconstrained action whose first when
// condition starts with `context.verb == "x"` or `[...].contains(context.verb)`
// can only match those verbs.
func contextVerbs(p *ast.Policy) ([]string, bool) {
	if len(p.Conditions) == 0 || p.Conditions[0].Condition != ast.ConditionWhen {
		return nil, false
	}
	n := p.Conditions[0].Body
	for {
		and, ok := n.(ast.NodeTypeAnd)
		if !ok {
			break
		}
		n = and.Left
	}
	isVerb := func(n ast.IsNode) bool {
		a, ok := n.(ast.NodeTypeAccess)
		if !ok || a.Value != schemagen.AttrVerb {
			return false
		}
		v, ok := a.Arg.(ast.NodeTypeVariable)
		return ok && v.Name == "context"
	}
	str := func(n ast.IsNode) (string, bool) {
		v, ok := n.(ast.NodeValue)
		if !ok {
			return "", false
		}
		s, ok := v.Value.(types.String)
		return string(s), ok
	}
	switch v := n.(type) {
	case ast.NodeTypeEquals:
		if isVerb(v.Left) {
			if s, ok := str(v.Right); ok {
				return []string{s}, true
			}
		}
	case ast.NodeTypeContains:
		if !isVerb(v.Right) {
			return nil, false
		}
		var out []string
		switch set := v.Left.(type) {
		case ast.NodeTypeSet:
			for _, e := range set.Elements {
				s, ok := str(e)
				if !ok {
					return nil, false
				}
				out = append(out, s)
			}
		case ast.NodeValue:
			sv, ok := set.Value.(types.Set)
			if !ok {
				return nil, false
			}
			for e := range sv.All() {
				s, ok := e.(types.String)
				if !ok {
					return nil, false
				}
				out = append(out, string(s))
			}
		default:
			return nil, false
		}
		return out, len(out) > 0
	}
	return nil, false
}
