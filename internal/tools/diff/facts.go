package diff

import (
	"slices"
	"sort"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Sides of a policy: the sets that hold it (policies are the same when
// their access texts are).
const (
	sideOld uint8 = 1 << iota
	sideNew
	sideBoth = sideOld | sideNew
)

// facts are what the enumeration reads of one policy: the sets that hold
// it, its reach, the values a permit pins its namespace, API group and
// resource to (pinsOf), the groups it names and its literals.
type facts struct {
	p      *cedarlang.Policy
	side   uint8
	reach  cedarlang.Reach
	pins   map[string][]string
	groups []string
	lits   *literals
	// readsNS, readsObject, readsNamed: it reads
	// resource.namespaceObject, resource.object, resource.named.
	readsNS, readsObject, readsNamed bool
	// values and patterns cache lits.values and lits.patterns by dimension.
	values   map[string][]string
	patterns map[string][]types.Pattern
	// readsAct: its conditions read the action or the context
	// (readsAction), everyVerb: it decides every verb alike (allVerbs).
	readsAct, everyVerb bool
}

func factsOf(p *cedarlang.Policy, side uint8) *facts {
	f := &facts{p: p, side: side, reach: reachOf(p), lits: newLiterals(), values: map[string][]string{}, patterns: map[string][]types.Pattern{}}
	f.lits.add(p)
	f.groups = f.lits.groups()
	f.readsNS, f.readsObject, f.readsNamed = f.lits.readsNS, f.lits.readsObject, f.lits.readsNamed
	f.readsAct = readsAction(p)
	f.everyVerb = actionsAll(p) && !f.readsAct
	// Filled now, so that workers read them without writing.
	for _, d := range stringDims {
		f.values[d], f.patterns[d] = f.lits.values(d), f.lits.patterns(d)
	}
	for k := range f.lits.nsKeys {
		d := nsLabelDim(k)
		f.values[d], f.patterns[d] = f.lits.values(d), f.lits.patterns(d)
	}
	f.pins = map[string][]string{}
	if p.Effect == types.Permit {
		for _, d := range pinnedDims {
			if vs, ok := pinsOf(p.AST, d); ok {
				f.pins[d] = vs
			}
		}
	}
	return f
}

// differs reports whether only one of the sets holds the policy.
func (f *facts) differs() bool { return f.side != sideBoth }

// valuesOf is lits.values(d), computed once (factsOf).
func (f *facts) valuesOf(d string) []string {
	if v, ok := f.values[d]; ok {
		return v
	}
	return f.lits.values(d)
}

// patternsOf is lits.patterns(d), computed once (factsOf).
func (f *facts) patternsOf(d string) []types.Pattern {
	if v, ok := f.patterns[d]; ok {
		return v
	}
	return f.lits.patterns(d)
}

// relevantFacts are the facts of the enforced policies of both sets that
// may match where reach is, one per access text.
func relevantFacts(oldSet, newSet *cedarlang.PolicySet, reach cedarlang.Reach) []*facts {
	byText := map[string]*facts{}
	var out []*facts
	for _, s := range []struct {
		set  *cedarlang.PolicySet
		side uint8
	}{{oldSet, sideOld}, {newSet, sideNew}} {
		for _, p := range s.set.Policies {
			if p.IsAudit() || !overlaps(reachOf(p), reach) {
				continue
			}
			text := cedarlang.AccessText(p)
			if f, ok := byText[text]; ok {
				f.side |= s.side
				continue
			}
			f := factsOf(p, s.side)
			byText[text] = f
			out = append(out, f)
		}
	}
	return out
}

// anyDiffers reports whether one of fs differs.
func anyDiffers(fs []*facts) bool { return slices.ContainsFunc(fs, (*facts).differs) }

// keep is the facts of fs for which ok holds (a new slice).
func keep(fs []*facts, ok func(*facts) bool) []*facts {
	var out []*facts
	for _, f := range fs {
		if ok(f) {
			out = append(out, f)
		}
	}
	return out
}

// pinnedDims are the dimensions a permit's pins are read on.
var pinnedDims = []string{dimNamespace, dimAPIGroup, dimResource}

// pinsOf are the values dimension d takes wherever p's when clauses hold
// (constraintOn); ok is false when they do not bound it. Only a permit's
// pins bound where it matches: a forbid whose condition errors denies.
func pinsOf(p *ast.Policy, d string) ([]string, bool) {
	for _, c := range p.Conditions {
		if c.Condition != ast.ConditionWhen {
			continue
		}
		if vs, ok := constraintOn(c.Body, d); ok {
			return vs, true
		}
	}
	return nil, false
}

// constraintOn is the values dimension d takes wherever n holds: n is (a
// conjunction with a conjunct that is) `attr == "v"`, `["v", ...].contains
// (attr)`, or a disjunction whose every side is one.
func constraintOn(n ast.IsNode, d string) ([]string, bool) {
	switch v := n.(type) {
	case ast.NodeTypeAnd:
		if vs, ok := constraintOn(v.Left, d); ok {
			return vs, true
		}
		return constraintOn(v.Right, d)
	case ast.NodeTypeOr:
		l, okL := constraintOn(v.Left, d)
		r, okR := constraintOn(v.Right, d)
		if !okL || !okR {
			return nil, false
		}
		return sortedKeys(mapKeys(map[string]bool{}, map[string]bool(nil), l, r)), true
	case ast.NodeTypeEquals:
		for _, lr := range [2][2]ast.IsNode{{v.Left, v.Right}, {v.Right, v.Left}} {
			val, isVal := lr[1].(ast.NodeValue)
			s, isStr := val.Value.(types.String)
			if attrDim(lr[0]) == d && isVal && isStr {
				return []string{string(s)}, true
			}
		}
	case ast.NodeTypeContains:
		if attrDim(v.Right) == d {
			return stringSet(v.Left)
		}
	}
	return nil, false
}

// stringSet is the strings of a set literal made only of strings.
func stringSet(n ast.IsNode) ([]string, bool) {
	var out []string
	switch s := n.(type) {
	case ast.NodeTypeSet:
		for _, e := range s.Elements {
			v, ok := e.(ast.NodeValue)
			str, isStr := v.Value.(types.String)
			if !ok || !isStr {
				return nil, false
			}
			out = append(out, string(str))
		}
	case ast.NodeValue:
		set, ok := s.Value.(types.Set)
		if !ok {
			return nil, false
		}
		for e := range set.All() {
			str, isStr := e.(types.String)
			if !isStr {
				return nil, false
			}
			out = append(out, string(str))
		}
	default:
		return nil, false
	}
	sort.Strings(out)
	return out, true
}

// typeMatches reports whether f may match a request on entity type t.
func (f *facts) typeMatches(t types.EntityType) bool {
	return f.reach.Types == nil || slices.Contains(f.reach.Types, t)
}

// verbMatches reports whether f may match verb v (a "*" request is decided
// as every verb at once: any policy may change it).
func (f *facts) verbMatches(v string) bool {
	return v == entities.Wildcard || f.reach.Verbs == nil || slices.Contains(f.reach.Verbs, v)
}

// pathMatches reports whether f may match a non-resource request for path.
func (f *facts) pathMatches(path string) bool {
	return f.reach.Paths == nil || slices.Contains(f.reach.Paths, path)
}

// namespaceMatches reports whether f may match in namespace ns. An open
// namespace may still be decided by a pinned permit: it becomes a
// condition where admission sees the request (elsewhere it is folded).
func (f *facts) namespaceMatches(ns string, admitted bool) bool {
	pins, pinned := f.pins[dimNamespace]
	return !pinned || slices.Contains(pins, ns) || (ns == "" && admitted)
}

// pinMatches reports whether f may match value v of dimension d (an API
// group or resource; "*", a request for every one, may match any pin).
func (f *facts) pinMatches(d, v string) bool {
	pins, pinned := f.pins[d]
	return !pinned || v == entities.Wildcard || slices.Contains(pins, v)
}

// nameMatches reports whether f may match a request naming name ("": none,
// which leaves the name open).
func (f *facts) nameMatches(name string) bool {
	return f.reach.Names == nil || name == "" || slices.Contains(f.reach.Names, name)
}

// principalMatches reports whether f's scope admits a user of this
// username, of any type it can have (with some groups).
func (f *facts) principalMatches(username string) bool {
	return slices.ContainsFunc(usernameTypes(username), func(t types.EntityType) bool {
		return principalMay(f.p, types.NewEntityUID(t, types.String(username)))
	})
}

// matches reports whether f may match a request at x made by user.
func (f *facts) matches(x point, user string) bool {
	if !f.typeMatches(x.entityType) || !f.verbMatches(x.verb) || (user != "" && !f.principalMatches(user)) {
		return false
	}
	if x.entityType == nonResourceType {
		return f.pathMatches(x.path)
	}
	return f.nameMatches(x.name) && f.namespaceMatches(x.namespace, x.admitted)
}

// stringsOf is every string literal of the facts fs.
func stringsOf(fs []*facts) map[string]bool {
	out := map[string]bool{}
	for _, f := range fs {
		for _, vs := range f.lits.strs {
			for v := range vs {
				out[v] = true
			}
		}
	}
	return out
}

// onlyAddsConditions reports whether f, at the open-namespace point x,
// can only add the same condition to both sides without changing whether
// they differ: a permit of both sets pinned to namespaces no differing
// policy names. Its condition (on resource.namespace, ...) then never
// reads as one of the differing policies' conditions, so a request's
// decisions differ with f's groups exactly when they differ without them.
func (r *run) onlyAddsConditions(f *facts, x point) bool {
	pins := f.pins[dimNamespace]
	return x.namespace == "" && !f.differs() && len(pins) > 0 &&
		!slices.ContainsFunc(pins, func(pin string) bool { return pin == "" || r.dStrings[pin] })
}

// allVerbs reports whether f decides every verb alike: its action scope
// is any action (or k8s::Action::"*", every verb) and its conditions read
// neither the action nor the context.
func (f *facts) allVerbs() bool { return f.everyVerb }

// actionsAll reports whether p's action scope is any action, or
// k8s::Action::"*" (every verb).
func actionsAll(p *cedarlang.Policy) bool {
	switch s := p.AST.Action.(type) {
	case ast.ScopeTypeAll:
		return true
	case ast.ScopeTypeIn:
		return s.Entity == types.NewEntityUID(schemagen.ActionType, schemagen.AllVerbs)
	}
	return false
}

// admitsVerb reports whether f's action scope admits verb (an action it
// names, or k8s::Action::"*", every verb) and its conditions read neither
// the action nor the context.
func (f *facts) admitsVerb(verb string) bool {
	action := types.NewEntityUID(schemagen.ActionType, types.String(verb))
	every := types.NewEntityUID(schemagen.ActionType, schemagen.AllVerbs)
	var names []types.EntityUID
	switch s := f.p.AST.Action.(type) {
	case ast.ScopeTypeEq:
		names = []types.EntityUID{s.Entity}
	case ast.ScopeTypeIn:
		names = []types.EntityUID{s.Entity}
	case ast.ScopeTypeInSet:
		names = s.Entities
	default:
		return false
	}
	if _, isEq := f.p.AST.Action.(ast.ScopeTypeEq); isEq && names[0] == every {
		return false // the action "*" itself, not every verb
	}
	return slices.ContainsFunc(names, func(e types.EntityUID) bool { return e == action || e == every }) && !f.readsAct
}

// readsAction reports whether p's conditions read the action or the
// context.
func readsAction(p *cedarlang.Policy) bool {
	reads := false
	for _, c := range p.AST.Conditions {
		ast.Inspect(ast.NewNode(c.Body), func(n ast.IsNode) bool {
			reads = reads || isVarNode(n, "action") || isVarNode(n, "context")
			return !reads
		})
	}
	return reads
}

// forEveryVerb are the policies of fs that may change the decision of a
// request for every verb ("*"), which allows only where every verb of the
// target (verbs) is allowed and denies where one is denied. A side whose
// permits that do not decide every verb alike (allVerbs) together name
// fewer verbs cannot allow every verb with them: it allows only where a
// permit of every verb is satisfied, which then allows every verb on its
// own. Those permits are left out for that side; forbids never are.
func forEveryVerb(fs []*facts, verbs []string) []*facts {
	var keepSide [3]bool // by side: keep its permits that do not decide every verb alike
	for _, side := range []uint8{sideOld, sideNew} {
		named := map[string]bool{}
		for _, f := range fs {
			if f.side&side == 0 || f.p.Effect != types.Permit || f.allVerbs() {
				continue
			}
			if f.reach.Verbs == nil {
				keepSide[side] = true // verbs unknown: it may name them all
			}
			for _, v := range f.reach.Verbs {
				named[v] = true
			}
		}
		keepSide[side] = keepSide[side] || !slices.ContainsFunc(verbs, func(v string) bool { return !named[v] })
	}
	return keep(fs, func(f *facts) bool {
		return f.p.Effect != types.Permit || f.allVerbs() || (f.side&sideOld != 0 && keepSide[sideOld]) || (f.side&sideNew != 0 && keepSide[sideNew])
	})
}
