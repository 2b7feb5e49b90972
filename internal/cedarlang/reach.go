package cedarlang

import (
	"slices"

	publicast "github.com/cedar-policy/cedar-go/ast"
	"github.com/cedar-policy/cedar-go/types"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// Reach over-approximates the requests a policy can match: a permit can
// grant nothing outside it, and a forbid can deny nothing outside it. It is
// read from the same facts the index relies on (the scope, `is` tests and
// literal comparisons of the top-level conjunction), which hold for every
// request the policy matches. A nil list means every value.
type Reach struct {
	Verbs []string           // verbs ("get"); nil: every verb
	Types []types.EntityType // resource entity types; nil: every type
	Names []string           // resource names (resource.name == "..."); nil: every name
	Paths []string           // non-resource URL paths (resource.path == "..."); nil: every path
}

// ReachOf is the reach of p.
func ReachOf(p *Policy) Reach {
	x := extract(p.AST, p.Effect == types.Forbid)
	var r Reach
	var haveVerbs, haveTypes, haveNames bool
	for _, c := range x.cons {
		if c.prefix {
			continue // a `like` prefix: not a value
		}
		if c.needs != 0 {
			// A forbid's constraint after a read that may fail (an absent
			// attribute): when it fails the forbid denies whatever this
			// constraint says, so it does not bound what the forbid denies.
			continue
		}
		switch c.dim {
		case dVerb:
			r.Verbs, haveVerbs = narrow(r.Verbs, haveVerbs, c.vals)
		case dRType:
			var ts []string
			ts, haveTypes = narrow(typeStrings(r.Types), haveTypes, c.vals)
			r.Types = entityTypes(ts)
		case dName:
			r.Names, haveNames = narrow(r.Names, haveNames, c.vals)
		}
	}
	r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == "" || v[0] == 0 })
	if haveVerbs && r.Verbs == nil {
		r.Verbs = []string{}
	}
	r.Paths = literalPaths(p.AST)
	if p.Effect == types.Forbid {
		// A forbid that reads an absent name errors, and denies: its
		// name constraints do not bound what it denies.
		r.Names, r.Paths = nil, nil
	}
	return r
}

// narrow intersects the values known so far with vals.
func narrow(have []string, known bool, vals []string) ([]string, bool) {
	if !known {
		return slices.Clone(vals), true
	}
	out := []string{}
	for _, v := range have {
		if slices.Contains(vals, v) {
			out = append(out, v)
		}
	}
	return out, true
}

func typeStrings(ts []types.EntityType) []string {
	if ts == nil {
		return nil
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

func entityTypes(ss []string) []types.EntityType {
	if ss == nil {
		return nil
	}
	out := make([]types.EntityType, len(ss))
	for i, s := range ss {
		out[i] = types.EntityType(s)
	}
	return out
}

// literalPaths is the path a top-level `resource.path == "..."` conjunct
// pins, or nil.
func literalPaths(p *ast.Policy) []string {
	var conj []ast.IsNode
	for _, c := range p.Conditions {
		if c.Condition == ast.ConditionWhen {
			conj = appendConjuncts(conj, c.Body)
		}
	}
	for _, n := range conj {
		eq, ok := n.(ast.NodeTypeEquals)
		if !ok {
			continue
		}
		for _, lr := range [2][2]ast.IsNode{{eq.Left, eq.Right}, {eq.Right, eq.Left}} {
			a, isAccess := lr[0].(ast.NodeTypeAccess)
			if s, isStr := literalString(lr[1]); isAccess && isStr && isVar(a.Arg, "resource") && a.Value == schemagen.AttrPath {
				return []string{s}
			}
		}
	}
	return nil
}

// AccessText is p's text without its annotations: what it grants or denies
// (an @id or @reason is not access). Two policies with the same AccessText
// match the same requests.
func AccessText(p *Policy) string {
	bare := *p.AST
	bare.Annotations = nil
	return string((*publicast.Policy)(&bare).MarshalCedar())
}
