package cedarlang

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// extract lists the constraints of p's top-level conjunction that the index
// may rely on (see the rules at the top of index.go).
func extract(p *ast.Policy, forbid bool) extraction {
	x := &extractor{guards: map[string]bool{}, forbid: forbid}
	x.principalScope(p.Principal)
	x.actionScope(p.Action)
	x.resourceScope(p.Resource)
	var conj []ast.IsNode
	for _, c := range p.Conditions {
		if c.Condition == ast.ConditionUnless {
			conj = appendConjuncts(conj, negate(c.Body))
		} else {
			conj = appendConjuncts(conj, c.Body)
		}
	}
	var pending uint16 // dims of earlier forbid conjuncts that fail when absent
	for _, n := range conj {
		if _, isHas := n.(ast.NodeTypeHas); isHas {
			// A top-level `has` guards the reads after it.
			x.noteGuard(n)
			continue
		}
		cs, ok, mayFail := x.atom(n)
		x.noteGuard(n)
		x.relation(n)
		var own uint16
		if ok && mayFail && forbid {
			for _, c := range cs {
				own |= 1 << c.dim
			}
		}
		if ok {
			for _, c := range cs {
				if forbid {
					c.needs = pending | own
				}
				x.add(c)
			}
		}
		if !forbid {
			continue
		}
		pending |= own | residualErrorDims(n)
		// A forbid relies on nothing past a conjunct that may fail for
		// another reason than an absent attribute.
		if !ok && !x.errorFree(n) {
			break
		}
	}
	if !forbid {
		x.applyRelations()
	}
	return extraction{cons: x.cons}
}

type extractor struct {
	cons   []constraint
	guards map[string]bool // "principal.namespace" after `principal has namespace`
	ptypes []string        // principal types fixed so far (nil: any)
	forbid bool
	// relations: pairs of dimensions a conjunct says are equal
	// (`principal.namespace == resource.namespace`).
	relations [][2]uint8
}

// applyRelations carries each literal constraint across the relations of a
// permit: with `principal.namespace == resource.namespace` and
// `resource.namespace == "team-7"`, the principal's namespace is "team-7"
// too. (Only for permits: a relation fails when an attribute is absent,
// which for a forbid denies.)
func (x *extractor) applyRelations() {
	for range 2 { // two rounds carry a value across two relations
		for _, r := range x.relations {
			for _, c := range x.cons {
				if c.dim == dAlt || c.prefix {
					continue
				}
				switch c.dim {
				case r[0]:
					x.add(constraint{dim: r[1], vals: c.vals})
				case r[1]:
					x.add(constraint{dim: r[0], vals: c.vals})
				}
			}
		}
	}
}

func (x *extractor) add(c constraint) {
	if c.dim == dPType {
		if x.ptypes == nil {
			x.ptypes = slices.Clone(c.vals)
		} else {
			x.ptypes = slices.DeleteFunc(x.ptypes, func(v string) bool { return !slices.Contains(c.vals, v) })
		}
	}
	x.cons = append(x.cons, c)
}

func (x *extractor) principalScope(s ast.IsPrincipalScopeNode) {
	switch v := s.(type) {
	case ast.ScopeTypeEq:
		x.addAll(principalIs(v.Entity))
	case ast.ScopeTypeIn:
		x.addAll(principalIn(v.Entity))
	case ast.ScopeTypeIs:
		x.add(constraint{dim: dPType, vals: []string{string(v.Type)}})
	case ast.ScopeTypeIsIn:
		x.add(constraint{dim: dPType, vals: []string{string(v.Type)}})
		x.addAll(principalIn(v.Entity))
	}
}

func (x *extractor) addAll(cs []constraint) {
	for _, c := range cs {
		x.add(c)
	}
}

// resourceScope adds what the resource scope fixes: a type, and for a
// non-resource URL entity its path (`resource == k8s::NonResourceURL::"/x"`,
// or `in` it: a resource has no ancestors).
func (x *extractor) resourceScope(s ast.IsResourceScopeNode) {
	switch v := s.(type) {
	case ast.ScopeTypeEq:
		x.addAll(resourceIs(v.Entity))
	case ast.ScopeTypeIn:
		x.addAll(resourceIs(v.Entity))
	default:
		if t, ok := ScopeResourceType(s); ok {
			x.add(constraint{dim: dRType, vals: []string{string(t)}})
		}
	}
}

// resourceIs: the resource is the entity e: its type, and a non-resource
// URL's id is its path (entities.Target.EntityUID).
func resourceIs(e types.EntityUID) []constraint {
	cs := one(dRType, string(e.Type))
	if e.Type == schemagen.NonResourceURLType {
		cs = append(cs, constraint{dim: dPath, vals: []string{string(e.ID)}})
	}
	return cs
}

func principalIs(e types.EntityUID) []constraint {
	return []constraint{{dim: dPType, vals: []string{string(e.Type)}}, {dim: dUser, vals: []string{string(e.ID)}}}
}

// principalIn: principals' only ancestors are groups, so `principal in X`
// matches a group's members when X is a group and otherwise only X itself.
func principalIn(e types.EntityUID) []constraint {
	if e.Type == schemagen.GroupType {
		return []constraint{{dim: dGroup, vals: []string{string(e.ID)}}}
	}
	return principalIs(e)
}

func (x *extractor) actionScope(s ast.IsActionScopeNode) {
	switch v := s.(type) {
	case ast.ScopeTypeEq:
		x.add(constraint{dim: dVerb, vals: []string{actionKey(v.Entity)}})
	case ast.ScopeTypeIn:
		if vs, ok := actionIn([]types.EntityUID{v.Entity}); ok {
			x.add(constraint{dim: dVerb, vals: vs})
		}
	case ast.ScopeTypeInSet:
		if vs, ok := actionIn(v.Entities); ok {
			x.add(constraint{dim: dVerb, vals: vs})
		}
	}
}

// actionIn: `action in A` is `action == A` unless A is an action group ("*",
// any verb, or impersonate-on:<mode>:*, whose members include verbs no schema
// lists): those are not indexed.
func actionIn(es []types.EntityUID) ([]string, bool) {
	out := make([]string, 0, len(es))
	for _, e := range es {
		if e.Type == schemagen.ActionType && schemagen.IsActionGroup(string(e.ID)) {
			return nil, false
		}
		out = append(out, actionKey(e))
	}
	return out, true
}

// actionKey is the verb of a k8s::Action; other entities get a key no request
// uses, since a request's action is always a k8s::Action.
func actionKey(e types.EntityUID) string {
	if e.Type != schemagen.ActionType {
		return "\x00" + string(e.Type) + "::" + string(e.ID)
	}
	return string(e.ID)
}

// appendConjuncts splits n at top-level `&&`, left to right (the order Cedar
// evaluates them in).
func appendConjuncts(out []ast.IsNode, n ast.IsNode) []ast.IsNode {
	if a, ok := n.(ast.NodeTypeAnd); ok {
		return appendConjuncts(appendConjuncts(out, a.Left), a.Right)
	}
	return append(out, n)
}

// negate is `!n`, pushed inward where that keeps Cedar's meaning, errors
// included: `!(a || b)` is `!a && !b`, `!!a` is `a`, `!(a != b)` is `a == b`.
func negate(n ast.IsNode) ast.IsNode {
	switch v := n.(type) {
	case ast.NodeTypeNot:
		return v.Arg
	case ast.NodeTypeNotEquals:
		return ast.NodeTypeEquals(v)
	case ast.NodeTypeOr:
		return ast.NodeTypeAnd{BinaryNode: ast.BinaryNode{Left: negate(v.Left), Right: negate(v.Right)}}
	}
	return ast.NodeTypeNot{UnaryNode: ast.UnaryNode{Arg: n}}
}

func isVar(n ast.IsNode, name string) bool {
	v, ok := n.(ast.NodeTypeVariable)
	return ok && string(v.Name) == name
}

func literalString(n ast.IsNode) (string, bool) {
	v, ok := n.(ast.NodeValue)
	if !ok {
		return "", false
	}
	s, ok := v.Value.(types.String)
	return string(s), ok
}

func literalEntity(n ast.IsNode) (types.EntityUID, bool) {
	v, ok := n.(ast.NodeValue)
	if !ok {
		return types.EntityUID{}, false
	}
	e, ok := v.Value.(types.EntityUID)
	return e, ok
}

// literalSet returns the elements of a set literal made of literals.
func literalSet(n ast.IsNode) ([]ast.IsNode, bool) {
	switch s := n.(type) {
	case ast.NodeTypeSet:
		for _, e := range s.Elements {
			if _, ok := e.(ast.NodeValue); !ok {
				return nil, false
			}
		}
		return s.Elements, true
	case ast.NodeValue:
		sv, ok := s.Value.(types.Set)
		if !ok {
			return nil, false
		}
		var out []ast.IsNode
		for e := range sv.All() {
			out = append(out, ast.NodeValue{Value: e})
		}
		return out, true
	}
	return nil, false
}

func literalStrings(n ast.IsNode) ([]string, bool) {
	els, ok := literalSet(n)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(els))
	for _, e := range els {
		s, ok := literalString(e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// atom extracts the constraints one conjunct implies. ok is false when it
// implies none the index knows; mayFail when evaluating it may fail (only
// because a read attribute is absent).
func (x *extractor) atom(n ast.IsNode) (cs []constraint, ok, mayFail bool) {
	switch v := n.(type) {
	case ast.NodeTypeEquals:
		if cs, ok, fail := x.atomEquals(v); ok {
			return cs, ok, fail
		}
		return x.atomTagEquals(v)
	case ast.NodeTypeHasTag:
		return x.atomHasTag(v)
	case ast.NodeTypeIn:
		return atomIn(v)
	case ast.NodeTypeIs:
		switch {
		case isVar(v.Left, "principal"):
			return one(dPType, string(v.EntityType)), true, false
		case isVar(v.Left, "resource"):
			return one(dRType, string(v.EntityType)), true, false
		}
	case ast.NodeTypeIsIn:
		if e, isEnt := literalEntity(v.Entity); isEnt && isVar(v.Left, "principal") {
			return append(one(dPType, string(v.EntityType)), principalIn(e)...), true, false
		}
	case ast.NodeTypeContains:
		if cs, ok, fail := x.atomContains(v); ok {
			return cs, ok, fail
		}
		return x.atomTagContains(v)
	case ast.NodeTypeContainsAny:
		if cs, ok, fail := atomContainsAny(v); ok {
			return cs, ok, fail
		}
		return x.atomTagContainsAny(v)
	case ast.NodeTypeContainsAll:
		if cs, ok, fail := atomContainsAll(v); ok {
			return cs, ok, fail
		}
		return x.atomTagContainsAll(v)
	case ast.NodeTypeOr:
		return x.atomOr(v)
	case ast.NodeTypeLike:
		return x.atomLike(v)
	}
	return nil, false, false
}

// atomLike is atom for `<attr> like "pattern"` on any scalar attribute the
// index knows, and on a label's value (atomTagLike).
func (x *extractor) atomLike(v ast.NodeTypeLike) (cs []constraint, ok, mayFail bool) {
	dim, fail, isAttr := x.attr(v.Arg)
	if !isAttr {
		return x.atomTagLike(v)
	}
	cs = likeConstraints(dim, "", false, v.Value)
	// Without any, nothing to key on (but the read may fail all the same).
	return cs, len(cs) > 0, fail
}

// likeConstraints are the keys of a value matching pattern p on dim, each
// written after head (a label's "k\x00"): the value itself for a pattern
// without a wildcard, else its literal prefix (with a head, even an empty
// one: the label is there), its literal suffix, or without either a gram of
// its longest literal.
func likeConstraints(dim uint8, head string, headed bool, p types.Pattern) []constraint {
	comps := likeComponents(p)
	if comps == nil {
		return nil
	}
	prefix, suffix, exact := likeAffixes(comps)
	if exact || len(comps) == 0 {
		return one(dim, head+prefix) // no wildcard: the value is the literal
	}
	var cs []constraint
	if (prefix != "" || headed) && len(head+prefix) <= maxAffix {
		cs = append(cs, constraint{dim: dim, vals: []string{head + prefix}, prefix: true})
	}
	if suffix != "" && len(suffix) <= maxAffix {
		cs = append(cs, constraint{dim: dim, vals: []string{suffix}, prefix: true, suffix: true})
	}
	if prefix == "" && suffix == "" {
		for _, gram := range likeInnerGrams(comps) {
			cs = append(cs, constraint{dim: dim, vals: []string{gram}, prefix: true, inner: true})
		}
	}
	return cs
}

// likeComponents is a pattern's components as cedar-go writes them in JSON:
// {"Literal": text} or "Wildcard", in order; nil when it cannot be read.
func likeComponents(p types.Pattern) []any {
	raw, err := p.MarshalJSON()
	if err != nil {
		return nil
	}
	var comps []any
	if json.Unmarshal(raw, &comps) != nil {
		return nil
	}
	return comps
}

// likeAffixes is the literal text a pattern (its likeComponents) starts
// with and the literal text after its last wildcard, and whether the
// pattern is only that text (no wildcard).
func likeAffixes(comps []any) (prefix, suffix string, exact bool) {
	if len(comps) == 0 {
		return "", "", false
	}
	suffix = likeSuffix(comps)
	first, isLiteral := comps[0].(map[string]any)
	if !isLiteral {
		return "", suffix, false // starts with a wildcard
	}
	lit, _ := first["Literal"].(string)
	return lit, suffix, len(comps) == 1
}

// maxAffix is the longest `like` prefix or suffix keyed: a bucket records
// the lengths it holds in 16 bits.
const maxAffix = 1<<16 - 1

// innerGramMax is the most bytes of an inner literal a `like` key holds.
const innerGramMax = 4

// maxInnerGrams bounds the grams a pattern is keyed on.
const maxInnerGrams = 16

// likeInnerGrams are what a `like` pattern (its likeComponents) with
// neither a literal prefix nor a literal suffix may be keyed on: the
// distinct windows of innerGramMax bytes (or fewer, at least 2) of its
// longest literal. A matching value holds that literal, so it holds each
// gram in some window: each is a constraint, and the index keys the one
// fewest policies share (chooseKeys); none when no literal is that long.
func likeInnerGrams(comps []any) []string {
	longest := ""
	for _, c := range comps {
		if lit, isLiteral := c.(map[string]any); isLiteral {
			if s, _ := lit["Literal"].(string); len(s) > len(longest) {
				longest = s
			}
		}
	}
	if len(longest) < 2 {
		return nil
	}
	n := min(len(longest), innerGramMax)
	var grams []string
	for i := len(longest) - n; i >= 0 && len(grams) < maxInnerGrams; i-- {
		if g := longest[i : i+n]; !slices.Contains(grams, g) {
			grams = append(grams, g)
		}
	}
	return grams
}

// one is a single constraint: dim takes one of vals.
func one(dim uint8, vals ...string) []constraint { return []constraint{{dim: dim, vals: vals}} }

// atomEquals is atom for `a == b`: a scope variable equal to an entity
// literal, or a recognized attribute equal to a string literal (either side).
func (x *extractor) atomEquals(v ast.NodeTypeEquals) (cs []constraint, ok, mayFail bool) {
	for _, lr := range [2][2]ast.IsNode{{v.Left, v.Right}, {v.Right, v.Left}} {
		field, lit := lr[0], lr[1]
		if e, isEnt := literalEntity(lit); isEnt {
			switch {
			case isVar(field, "principal"):
				return principalIs(e), true, false
			case isVar(field, "action"):
				return one(dVerb, actionKey(e)), true, false
			case isVar(field, "resource"):
				return resourceIs(e), true, false
			}
			continue
		}
		s, isStr := literalString(lit)
		if !isStr {
			continue
		}
		if dim, fail, isAttr := x.attr(field); isAttr {
			return one(dim, s), true, fail
		}
	}
	return nil, false, false
}

// relation records a top-level conjunct `a == b` between two recognized
// attributes (other than the verb) as a relation.
func (x *extractor) relation(n ast.IsNode) {
	eq, isEq := n.(ast.NodeTypeEquals)
	if !isEq {
		return
	}
	da, _, okA := x.attr(eq.Left)
	db, _, okB := x.attr(eq.Right)
	if okA && okB && da != db && da != dVerb && db != dVerb {
		x.relations = append(x.relations, [2]uint8{da, db})
	}
}

// atomIn is atom for `principal in ...` and `action in ...` on an entity
// literal or a set literal of them.
func atomIn(v ast.NodeTypeIn) (cs []constraint, ok, mayFail bool) {
	if e, isEnt := literalEntity(v.Right); isEnt {
		switch {
		case isVar(v.Left, "principal"):
			return principalIn(e), true, false
		case isVar(v.Left, "action"):
			if vs, ok := actionIn([]types.EntityUID{e}); ok {
				return one(dVerb, vs...), true, false
			}
		case isVar(v.Left, "resource"):
			return resourceIs(e), true, false // a resource has no ancestors
		}
		return nil, false, false
	}
	if isVar(v.Left, "principal") {
		if els, isSet := literalSet(v.Right); isSet {
			return principalInSet(els)
		}
		return nil, false, false
	}
	if isVar(v.Left, "action") {
		return actionInSet(v.Right)
	}
	return nil, false, false
}

// actionInSet is atom for `action in [...]`: extracted when every element
// is an entity literal and none is the any-verb action.
func actionInSet(set ast.IsNode) (cs []constraint, ok, mayFail bool) {
	els, isSet := literalSet(set)
	if !isSet {
		return nil, false, false
	}
	es := make([]types.EntityUID, 0, len(els))
	for _, el := range els {
		e, isEnt := literalEntity(el)
		if !isEnt {
			return nil, false, false
		}
		es = append(es, e)
	}
	if vs, ok := actionIn(es); ok {
		return one(dVerb, vs...), true, false
	}
	return nil, false, false
}

// atomContains is atom for ["a","b"].contains(<attr>) and
// principal.groups.contains("g").
func (x *extractor) atomContains(v ast.NodeTypeContains) (cs []constraint, ok, mayFail bool) {
	if vals, isSet := literalStrings(v.Left); isSet {
		if dim, fail, isAttr := x.attr(v.Right); isAttr {
			return one(dim, vals...), true, fail
		}
	}
	if isGroups(v.Left) {
		if s, isStr := literalString(v.Right); isStr {
			return one(dGroup, s), true, false
		}
	}
	return nil, false, false
}

// atomContainsAny is atom for principal.groups.containsAny([...]) and
// [...].containsAny(principal.groups).
func atomContainsAny(v ast.NodeTypeContainsAny) (cs []constraint, ok, mayFail bool) {
	for _, lr := range [2][2]ast.IsNode{{v.Left, v.Right}, {v.Right, v.Left}} {
		if isGroups(lr[0]) {
			if vals, isSet := literalStrings(lr[1]); isSet {
				return one(dGroup, vals...), true, false
			}
		}
	}
	return nil, false, false
}

// atomContainsAll is atom for principal.groups.containsAll([...]): each
// group is needed, so each is a constraint of its own.
func atomContainsAll(v ast.NodeTypeContainsAll) (cs []constraint, ok, mayFail bool) {
	if !isGroups(v.Left) {
		return nil, false, false
	}
	vals, isSet := literalStrings(v.Right)
	if !isSet || len(vals) == 0 {
		return nil, false, false
	}
	cs = make([]constraint, len(vals))
	for i, g := range vals {
		cs[i] = constraint{dim: dGroup, vals: []string{g}}
	}
	return cs, true, false
}

// atomOr is atom for `a || b`: the union of constraints on one dimension, or
// a dAlt across username and group (one alternative per dimension).
func (x *extractor) atomOr(v ast.NodeTypeOr) (cs []constraint, ok, mayFail bool) {
	l, lok, lfail := x.side(v.Left)
	r, rok, rfail := x.side(v.Right)
	if !lok || !rok {
		return nil, false, false
	}
	if len(l) == 1 && len(r) == 1 && l[0].dim == r[0].dim && l[0].dim != dAlt && l[0].sameKind(r[0]) {
		return []constraint{{dim: l[0].dim, prefix: l[0].prefix, suffix: l[0].suffix, inner: l[0].inner, vals: append(slices.Clone(l[0].vals), r[0].vals...)}}, true, lfail || rfail
	}
	la, lalt := alternative(l)
	ra, ralt := alternative(r)
	// A side that may fail (an absent attribute) fails the disjunction,
	// which for a permit is not matching; a forbid would deny.
	if (lfail || rfail) && x.forbid || !lalt || !ralt {
		return nil, false, false
	}
	alts := mergeAlternatives(append(la, ra...))
	if len(alts) == 1 {
		return alts, true, lfail || rfail
	}
	return []constraint{{dim: dAlt, alts: alts}}, true, lfail || rfail
}

// side is atom for one side of a disjunction, which may be a conjunction:
// whenever it holds, each of its conjuncts' constraints does, and a `has`
// in it guards the reads after it within the side. A forbid's side that
// may fail (one of its conjuncts may, guards aside) fails the forbid,
// which denies whatever its constraints say: then it implies none.
func (x *extractor) side(n ast.IsNode) (cs []constraint, ok, mayFail bool) {
	and, isAnd := n.(ast.NodeTypeAnd)
	if !isAnd {
		return x.atom(n)
	}
	saved := maps.Clone(x.guards)
	defer func() { x.guards = saved }()
	for _, c := range appendConjuncts(nil, and) {
		if x.forbid && !x.errorFree(c) {
			return nil, false, false
		}
		ccs, cok, cfail := x.atom(c)
		x.noteGuard(c)
		if cok {
			cs, ok, mayFail = append(cs, ccs...), true, mayFail || cfail
		}
	}
	return cs, ok, mayFail
}

// mergeAlternatives unites the alternatives on each dimension, in the order
// their dimensions first appear.
func mergeAlternatives(as []constraint) []constraint {
	var alts []constraint
	for _, a := range as {
		mergeable := func(b constraint) bool { return b.dim == a.dim && b.sameKind(a) && len(a.opts)+len(b.opts) == 0 }
		if i := slices.IndexFunc(alts, mergeable); i >= 0 {
			alts[i].vals = append(slices.Clone(alts[i].vals), a.vals...)
		} else {
			alts = append(alts, constraint{dim: a.dim, vals: a.vals, prefix: a.prefix, suffix: a.suffix, inner: a.inner, opts: a.opts})
		}
	}
	return alts
}

// principalInSet: `principal in [...]` is in one of them; extracted when
// they are all groups, or all entities of one other type (which a principal
// is in only by being one).
func principalInSet(els []ast.IsNode) (cs []constraint, ok, mayFail bool) {
	var groups, ids []string
	var typ types.EntityType
	for _, el := range els {
		e, isEnt := literalEntity(el)
		switch {
		case !isEnt:
			return nil, false, false
		case e.Type == schemagen.GroupType:
			groups = append(groups, string(e.ID))
		case typ != "" && e.Type != typ:
			return nil, false, false
		default:
			typ = e.Type
			ids = append(ids, string(e.ID))
		}
	}
	switch {
	case len(groups) > 0 && len(ids) == 0:
		return []constraint{{dim: dGroup, vals: groups}}, true, false
	case len(ids) > 0 && len(groups) == 0:
		return []constraint{{dim: dPType, vals: []string{string(typ)}}, {dim: dUser, vals: ids}}, true, false
	}
	return nil, false, false
}

// alternative is what one side of a disjunction implies on a dimension a
// policy can be keyed on: one alternative whose options are the side's
// constraints (each holds when the side does; the index keys the cheapest,
// resolveAlts), or without any a dAlt's alternatives. A verb is one (a key
// in the bucket of any verb); a resource type is not (it picks buckets),
// nor a principal type (too weak a key).
func alternative(cs []constraint) ([]constraint, bool) {
	var opts, alts []constraint
	for _, c := range cs {
		switch c.dim {
		case dAlt:
			if alts == nil {
				alts = c.alts
			}
		case dRType, dPType:
		default:
			opts = append(opts, c)
		}
	}
	switch {
	case len(opts) == 1:
		return opts, true
	case len(opts) > 1:
		a := opts[0]
		a.opts = opts
		return []constraint{a}, true
	}
	return alts, alts != nil
}

func isGroups(n ast.IsNode) bool {
	a, ok := n.(ast.NodeTypeAccess)
	return ok && isVar(a.Arg, "principal") && a.Value == schemagen.AttrGroups
}

// errorFree reports whether evaluating n certainly cannot fail (conservative:
// false when unsure). Only boolean-valued forms over inputs that are
// present (always, or after a top-level `has` guard), of the right type.
func (x *extractor) errorFree(n ast.IsNode) bool {
	switch v := n.(type) {
	case ast.NodeValue:
		_, ok := v.Value.(types.Boolean)
		return ok
	case ast.NodeTypeHas:
		return isVar(v.Arg, "principal") || isVar(v.Arg, "resource")
	case ast.NodeTypeIs:
		return isVar(v.Left, "principal") || isVar(v.Left, "resource")
	case ast.NodeTypeNot:
		return x.errorFree(v.Arg)
	case ast.NodeTypeAnd:
		return x.errorFree(v.Left) && x.errorFree(v.Right)
	case ast.NodeTypeOr:
		return x.errorFree(v.Left) && x.errorFree(v.Right)
	case ast.NodeTypeEquals:
		return x.valueErrorFree(v.Left) && x.valueErrorFree(v.Right)
	case ast.NodeTypeNotEquals:
		return x.valueErrorFree(v.Left) && x.valueErrorFree(v.Right)
	case ast.NodeTypeLike:
		return x.stringErrorFree(v.Arg)
	case ast.NodeTypeIsEmpty:
		return x.setErrorFree(v.Arg)
	case ast.NodeTypeContains:
		return x.setErrorFree(v.Left) && x.valueErrorFree(v.Right)
	case ast.NodeTypeContainsAll:
		return x.setErrorFree(v.Left) && x.setErrorFree(v.Right)
	case ast.NodeTypeContainsAny:
		return x.setErrorFree(v.Left) && x.setErrorFree(v.Right)
	case ast.NodeTypeHasTag:
		_, fail, isOwner := x.tagOwner(v.Left)
		_, isStr := literalString(v.Right)
		return isOwner && isStr && !fail
	default:
		// Recognized atoms that cannot fail: in, is on literals.
		_, ok, fail := x.atom(n)
		return ok && !fail
	}
}

// valueErrorFree: reading n cannot fail (literals, variables, attributes
// and tags that are present).
func (x *extractor) valueErrorFree(n ast.IsNode) bool {
	switch n.(type) {
	case ast.NodeValue, ast.NodeTypeVariable:
		return true
	}
	if _, isSet := literalSet(n); isSet || isGroups(n) {
		return true
	}
	if _, _, fail, isTag := x.tagRead(n); isTag {
		return !fail
	}
	_, fail, ok := x.attr(n)
	return ok && !fail
}

// stringErrorFree: n is a string and reading it cannot fail (an attribute
// the index knows, present; a namespace label's value, present; a literal).
func (x *extractor) stringErrorFree(n ast.IsNode) bool {
	if _, isStr := literalString(n); isStr {
		return true
	}
	if dim, _, fail, isTag := x.tagRead(n); isTag {
		return dim == dLabel && !fail
	}
	_, fail, ok := x.attr(n)
	return ok && !fail
}

// setErrorFree: n is a set and reading it cannot fail (a literal set, the
// principal's groups, a tag of the principal that it has).
func (x *extractor) setErrorFree(n ast.IsNode) bool {
	if _, isSet := literalSet(n); isSet || isGroups(n) {
		return true
	}
	dim, _, fail, isTag := x.tagRead(n)
	return isTag && dim == dExtra && !fail
}
