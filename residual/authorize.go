package residual

import (
	"slices"
	"sort"

	"github.com/cedar-policy/cedar-go/types"
	"github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/eval"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/schemagen"
)

// Residual is what remains of one policy after partial evaluation: a boolean
// expression over the values that were unknown.
type Residual struct {
	Policy *cedar.Policy
	Expr   ast.IsNode
	// EntityType is the resource entity the expression is evaluated against.
	EntityType types.EntityType
	// memo, when the residual was memoized, also keeps its encodings.
	memo *memoEntry
}

// Outcome is the authorization-time answer. When Conditional is false,
// Decision is final. Otherwise the answer depends on the deny and allow
// residuals, evaluated with the KEP's rules (any deny true or erroring -> Deny;
// else any allow true -> Allow; else NoOpinion).
type Outcome struct {
	Decision    cedar.Decision
	Conditional bool
	Deny        []Residual
	Allow       []Residual
	// Policies that decided an unconditional Allow or Deny.
	Policies []*cedar.Policy
	Errors   []string
	// partial is set when deciding needed partial evaluation (worth caching).
	partial bool
}

// Fold turns a conditional outcome into an unconditional one for a caller
// that cannot evaluate conditions: Deny if any deny condition exists, else
// NoOpinion.
func (o Outcome) Fold() Outcome {
	if !o.Conditional {
		return o
	}
	f := Outcome{Decision: cedar.NoOpinion, Errors: o.Errors}
	if len(o.Deny) > 0 {
		f.Decision = cedar.Deny
		for _, r := range o.Deny {
			f.Policies = append(f.Policies, r.Policy)
		}
	}
	return f
}

// Options say what the caller can take.
type Options struct {
	// Conditions: the caller takes a conditional outcome (it evaluates the
	// conditions in admission). Without it a conditional outcome is folded:
	// Deny if a deny condition exists, else NoOpinion.
	Conditions bool
}

// Authorizer decides requests against one schema and policy set.
type Authorizer struct {
	Schema   *schemagen.Schema
	Policies *cedar.PolicySet
	// Cache, if set, memoizes outcomes that needed partial evaluation.
	Cache *OutcomeCache
}

// Authorize decides req. Open values (an empty name or namespace, "*" groups
// and resources) are unknowns: a request is allowed only if it is allowed
// whatever they are, and denied if some value is denied. A "*" verb is decided
// for every verb: Deny if any is denied, Allow if all are allowed. For a
// request admission will see, the objects are unknowns too, whatever the
// caller takes: the outcome may be conditional, and is folded for a caller
// that cannot take conditions (so a forbid on the object still denies).
func (a *Authorizer) Authorize(req *cedar.Request, opts Options) Outcome {
	o := a.authorizeCached(req)
	if !opts.Conditions {
		return o.Fold()
	}
	return o
}

func (a *Authorizer) authorizeCached(req *cedar.Request) Outcome {
	if a.Cache == nil {
		return a.authorize(req)
	}
	key := cacheKey{policies: a.Policies, schema: a.Schema, request: requestKey(req)}
	if o, ok := a.Cache.get(key); ok {
		return o
	}
	o := a.authorize(req)
	if o.Conditional || o.partial {
		a.Cache.put(key, o)
	}
	return o
}

func (a *Authorizer) authorize(req *cedar.Request) Outcome {
	verbs := cedar.Verbs(a.Schema, req)
	if len(verbs) == 1 {
		return a.authorizeVerb(req, verbs[0])
	}
	all := everyCase{stopAtNoOpinion: !a.anyForbid(req, verbs)}
	for _, verb := range verbs {
		if all.add(a.authorizeVerb(req, verb)) {
			break
		}
	}
	return all.outcome()
}

// anyForbid reports whether a forbid is a candidate for req with any of verbs:
// without one, no case can be denied, and the first case that is not allowed
// settles the answer.
func (a *Authorizer) anyForbid(req *cedar.Request, verbs []string) bool {
	target := cedar.ResolveTarget(a.Schema, req)
	for _, verb := range verbs {
		for _, p := range a.Policies.Candidates(cedar.NewCandidateQuery(req, target, verb)) {
			if p.Effect == types.Forbid {
				return true
			}
		}
	}
	return false
}

// everyCase combines the outcomes of a request that stands for several
// (every verb for "*", every world of an optional open attribute): Deny if
// any case is denied, Allow if all are allowed, else NoOpinion. Each case is
// folded: nothing evaluates conditions for such a request.
type everyCase struct {
	// stopAtNoOpinion: no case can be denied, so the first one that is not
	// allowed settles the answer.
	stopAtNoOpinion    bool
	denied, notAllowed bool
	policies           []*cedar.Policy
	errors             []string
}

// add records one case's outcome and reports whether the answer is settled.
func (e *everyCase) add(o Outcome) bool {
	o = o.Fold()
	e.errors = append(e.errors, o.Errors...)
	switch {
	case o.Decision == cedar.Deny:
		e.denied, e.policies = true, o.Policies
		return true
	case o.Decision == cedar.NoOpinion:
		e.notAllowed, e.policies = true, nil
		return e.stopAtNoOpinion
	case !e.notAllowed:
		e.policies = append(e.policies, o.Policies...)
	}
	return false
}

func (e *everyCase) outcome() Outcome {
	// Deciding several cases is worth caching.
	out := Outcome{Decision: cedar.Allow, Policies: uniquePolicies(e.policies), Errors: uniqueStrings(e.errors), partial: true}
	switch {
	case e.denied:
		out.Decision = cedar.Deny
	case e.notAllowed:
		out.Decision = cedar.NoOpinion
	}
	return out
}

// Shapes of the admission data: which objects a request will carry.
type shape struct{ object, oldObject bool }

func (s shape) code() int {
	c := 0
	if s.object {
		c |= 1
	}
	if s.oldObject {
		c |= 2
	}
	return c
}

// AdmissionShapes lists the object shapes admission can see for a request, or
// nil when admission never sees it (reads, and anything not on a concrete,
// typed resource). update and patch may arrive as CREATE (no stored object).
func AdmissionShapes(t cedar.Target, req *cedar.Request, verb string) []shape {
	if t.Resource == nil || req.APIGroup == cedar.Wildcard || req.Resource == cedar.Wildcard {
		return nil
	}
	switch verb {
	case "create":
		if t.Resource.IsConnect() {
			return []shape{{object: true}}
		}
		return []shape{{object: true}}
	case "update", "patch":
		return []shape{{object: true, oldObject: true}, {object: true}}
	case "delete", "deletecollection":
		return []shape{{oldObject: true}}
	case "get":
		if t.Resource.IsConnect() {
			return []shape{{object: true}}
		}
	}
	return nil
}

type partialResult struct {
	expr ast.IsNode // simplified; a boolean value when decided
}

func (a *Authorizer) authorizeVerb(req *cedar.Request, verb string) Outcome {
	target := cedar.ResolveTarget(a.Schema, req)
	open := target.Open(req)
	var optional []string
	for _, attr := range []string{schemagen.AttrNamespace, schemagen.AttrName} {
		if open[attr] && target.OptionalWhenOpen(attr) {
			optional = append(optional, attr)
		}
	}
	if len(optional) == 0 {
		return a.authorizeWorld(req, verb, target, open, nil)
	}
	// Each optional open attribute may be absent or hold any value: decide
	// every combination ("world"); the request is allowed only if every world
	// allows it and denied if any denies it. Such targets are never typed, so
	// admission conditions do not apply and each world is folded.
	all := everyCase{stopAtNoOpinion: !a.anyForbid(req, []string{verb})}
	for mask := 0; mask < 1<<len(optional); mask++ {
		absent := map[string]bool{}
		for i, attr := range optional {
			if mask&(1<<i) != 0 {
				absent[attr] = true
			}
		}
		if all.add(a.authorizeWorld(req, verb, target, open, absent)) {
			break
		}
	}
	return all.outcome()
}

func (a *Authorizer) authorizeWorld(req *cedar.Request, verb string, target cedar.Target, open, absent map[string]bool) Outcome {
	principal := cedar.PrincipalEntity(req.User)
	action := schemagen.ActionUID(verb)
	resourceUID := target.EntityUID(req)
	candidates := a.Policies.Candidates(cedar.NewCandidateQuery(req, target, verb))
	if len(candidates) == 0 {
		return Outcome{}
	}
	shapes := AdmissionShapes(target, req, verb)

	if len(open) == 0 && len(shapes) == 0 {
		ents := &cedar.Entities{Principal: principal, Resource: types.Entity{UID: resourceUID, Attributes: types.NewRecord(target.Attributes(req, nil, nil))}}
		res := cedar.Evaluate(candidates, ents, principal.UID, action, resourceUID)
		return Outcome{Decision: res.Decision, Policies: res.Policies, Errors: res.Errors}
	}

	attrs := target.Attributes(req, open, func(attr string) types.Value {
		if absent[attr] {
			return nil
		}
		return eval.Variable(types.String(attr))
	})
	envFor := func(sh shape) eval.Env {
		m := make(types.RecordMap, len(attrs)+2)
		for k, v := range attrs {
			m[k] = v
		}
		if sh.object {
			m[schemagen.AttrObject] = eval.Variable(schemagen.AttrObject)
		}
		if sh.oldObject {
			m[schemagen.AttrOldObject] = eval.Variable(schemagen.AttrOldObject)
		}
		ents := &cedar.Entities{Principal: principal, Resource: types.Entity{UID: resourceUID, Attributes: types.NewRecord(m)}}
		return eval.Env{Entities: ents, Principal: principal.UID, Action: action, Resource: resourceUID, Context: cedar.ContextFor(action)}
	}
	admission := len(shapes) > 0
	if !admission {
		shapes = []shape{{}}
	}
	// Environments are built only when a residual is not memoized.
	envs := make([]*eval.Env, len(shapes))
	envAt := func(i int) func() eval.Env {
		return func() eval.Env {
			if envs[i] == nil {
				env := envFor(shapes[i])
				envs[i] = &env
			}
			return *envs[i]
		}
	}

	out := Outcome{partial: true}
	var allowTrue []*cedar.Policy
	var denyTrue []*cedar.Policy
	for _, p := range candidates {
		if concrete, ok := concreteExpr(p, open, absent, envAt(0)); ok {
			// Nothing this policy reads is unknown: evaluate it as compiled.
			if expr := concrete; p.Effect == types.Forbid {
				if isBool(expr, true) || isError(expr) {
					denyTrue = append(denyTrue, p)
					if isError(expr) {
						out.Errors = append(out.Errors, "policy "+p.ID+": "+errorText(expr))
					}
				}
			} else if isBool(expr, true) {
				allowTrue = append(allowTrue, p)
			} else if isError(expr) {
				out.Errors = append(out.Errors, "policy "+p.ID+": "+errorText(expr))
			}
			continue
		}
		expr, memo := a.partialExpr(envAt(0), shapes[0].code(), p, verb, target.EntityType, principal, attrs)
		if p.UsesObjects && len(shapes) == 2 {
			// The first shape has the stored object, the second does not
			// (update or patch that creates): split on its presence.
			other, _ := a.partialExpr(envAt(1), shapes[1].code(), p, verb, target.EntityType, principal, attrs)
			if !ast.Equal(ast.NewNode(expr), ast.NewNode(other)) {
				memo = nil
				expr = simplify(ast.NodeTypeIfThenElse{
					If:   ast.NodeTypeHas{StrOpNode: ast.StrOpNode{Arg: ast.NodeTypeVariable{Name: "resource"}, Value: schemagen.AttrOldObject}},
					Then: expr, Else: other,
				})
			}
		}
		if p.Effect == types.Forbid {
			switch {
			case isBool(expr, false):
			case isBool(expr, true) || isError(expr):
				// A forbid that holds, or that fails whatever the unknowns are,
				// denies (fail closed).
				denyTrue = append(denyTrue, p)
				if isError(expr) {
					out.Errors = append(out.Errors, "policy "+p.ID+": "+errorText(expr))
				}
			default:
				out.Deny = append(out.Deny, Residual{Policy: p, Expr: expr, EntityType: target.EntityType, memo: memo})
			}
			continue
		}
		switch {
		case isBool(expr, true):
			allowTrue = append(allowTrue, p)
		case !mayBeTrue(expr):
			if isError(expr) {
				out.Errors = append(out.Errors, "policy "+p.ID+": "+errorText(expr))
			}
		default:
			out.Allow = append(out.Allow, Residual{Policy: p, Expr: expr, EntityType: target.EntityType, memo: memo})
		}
	}
	sort.Strings(out.Errors)
	switch {
	case len(denyTrue) > 0:
		return Outcome{Decision: cedar.Deny, Policies: uniquePolicies(denyTrue), Errors: out.Errors, partial: true}
	case len(out.Deny) == 0 && len(allowTrue) > 0:
		return Outcome{Decision: cedar.Allow, Policies: uniquePolicies(allowTrue), Errors: out.Errors, partial: true}
	case len(out.Deny) == 0 && len(out.Allow) == 0:
		return Outcome{Decision: cedar.NoOpinion, Errors: out.Errors, partial: true}
	}
	out.Conditional = true
	if len(allowTrue) > 0 {
		// An unconditional permit: the deny conditions alone decide.
		out.Allow = []Residual{{Policy: allowTrue[0], Expr: ast.NodeValue{Value: types.True}, EntityType: target.EntityType}}
	}
	if !admission {
		// Nothing will evaluate conditions for this request: fold now.
		return out.Fold()
	}
	return out
}

// concreteExpr evaluates p with the compiled evaluator when it reads nothing
// that is unknown in this world (no object, no open attribute): true, false,
// or a partial error.
func concreteExpr(p *cedar.Policy, open, absent map[string]bool, env func() eval.Env) (ast.IsNode, bool) {
	if p.UsesObjects {
		return nil, false
	}
	in := inputsOf(p)
	if in.resourceWhole {
		return nil, false
	}
	for _, attr := range in.resourceAttrs {
		if open[attr] && !absent[attr] {
			return nil, false
		}
	}
	e := env()
	holds, err := cedar.EvaluatePolicy(p, e.Entities, e.Principal.(types.EntityUID), e.Action.(types.EntityUID), e.Resource.(types.EntityUID))
	if err != nil {
		return eval.PartialError(err), true
	}
	return ast.NodeValue{Value: types.Boolean(holds)}, true
}

// partialExpr is partialEval memoized (with a cache) by the request values
// p's residual depends on.
func (a *Authorizer) partialExpr(env func() eval.Env, shapeIdx int, p *cedar.Policy, verb string, target types.EntityType, principal types.Entity, resourceAttrs types.RecordMap) (ast.IsNode, *memoEntry) {
	if a.Cache == nil {
		return partialEval(env(), p), nil
	}
	k := memoEntryKey{policy: p, key: memoKey(p, inputsOf(p), shapeIdx, verb, target, principal, resourceAttrs)}
	if e, ok := a.Cache.residuals.get(k); ok {
		return e.expr, e
	}
	e := &memoEntry{expr: partialEval(env(), p)}
	a.Cache.residuals.put(k, e)
	return e.expr, e
}

// partialEval partially evaluates p and returns its simplified condition: a
// boolean value when decided, a partial error when it fails whatever the
// unknowns are, else the residual expression.
func partialEval(env eval.Env, p *cedar.Policy) ast.IsNode {
	rp, keep := eval.PartialPolicy(env, p.AST)
	if !keep {
		return ast.NodeValue{Value: types.False}
	}
	node := eval.PolicyToNode(rp).AsIsNode()
	return simplify(node)
}

func errorText(n ast.IsNode) string {
	for {
		switch v := n.(type) {
		case ast.NodeTypeAnd:
			n = v.Left
			continue
		case ast.NodeTypeOr:
			n = v.Left
			continue
		}
		break
	}
	if err, ok := eval.ToPartialError(n); ok {
		return err.Error()
	}
	return "evaluation error"
}

func uniquePolicies(ps []*cedar.Policy) []*cedar.Policy {
	sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
	return slices.CompactFunc(ps, func(a, b *cedar.Policy) bool { return a.ID == b.ID })
}

func uniqueStrings(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}
