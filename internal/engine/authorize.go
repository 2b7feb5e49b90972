package engine

import (
	"context"
	"maps"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Residual is what remains of one policy after partial evaluation: a boolean
// expression over the values that were unknown.
type Residual struct {
	Policy *cedarlang.Policy
	Expr   ast.IsNode
	// EntityType is the resource entity the expression is evaluated against.
	EntityType types.EntityType
	// memo, when the residual was memoized, also keeps its encodings.
	memo *memoEntry
}

// Authorize implements Authorizer. A "*" verb is decided for every verb: Deny
// if any is denied, Allow if all are allowed. Decisions that needed partial
// evaluation are cached (they are the expensive ones).
func (e *Engine) Authorize(ctx context.Context, req *entities.Request) Decision {
	return e.AuthorizeWithStats(ctx, req, nil)
}

// AuthorizeWithStats is Authorize, and records in st (when not nil) how the
// decision was made: the decision cache's part and the number of candidate
// policies evaluated (stats.go).
func (e *Engine) AuthorizeWithStats(_ context.Context, req *entities.Request, st *Stats) Decision {
	if e.decisions == nil {
		d, _ := e.authorize(req, st)
		return d
	}
	nsKey, cacheable := e.namespaceKey(req)
	if !cacheable {
		d, _ := e.authorize(req, st)
		return d
	}
	key := requestKey(req) + nsKey
	if d, ok := e.decisions.get(key); ok {
		st.setCache(CacheHit)
		return d
	}
	st.setCache(CacheMiss)
	d, partial := e.authorize(req, st)
	if partial {
		e.decisions.put(key, d)
	}
	return d
}

// authorize decides req; partial reports whether that needed partial
// evaluation or several cases (worth caching).
func (e *Engine) authorize(req *entities.Request, st *Stats) (Decision, bool) {
	verbs := entities.Verbs(e.schema, req)
	if len(verbs) == 1 {
		return e.authorizeVerb(req, verbs[0], false, st)
	}
	forbid, audit := e.candidateFacts(req, verbs)
	d := decideCases(len(verbs), !forbid, audit, func(i int) Decision {
		d, _ := e.authorizeVerb(req, verbs[i], true, st)
		return d
	})
	return d, true
}

// everyCase combines the decisions of a request that stands for several
// (every verb for "*", every world of an optional open attribute): Deny if
// any case is denied, Allow if all are allowed, else NoOpinion. Each case is
// folded: nothing evaluates conditions for such a request.
type everyCase struct {
	// stopAtNoOpinion: no case can be denied, so the first one that is not
	// allowed settles the answer.
	stopAtNoOpinion    bool
	denied, notAllowed bool
	policies           []*cedarlang.Policy
	errors             []error
}

// add records one case's decision and reports whether the answer is settled.
func (c *everyCase) add(d Decision) bool {
	d = d.FailureDecision()
	c.errors = append(c.errors, d.Errors()...)
	switch {
	case d.IsDenied():
		c.denied, c.policies = true, d.Policies()
		return true
	case d.Type() == DecisionNoOpinion:
		c.notAllowed, c.policies = true, nil
		return c.stopAtNoOpinion
	case !c.notAllowed:
		c.policies = append(c.policies, d.Policies()...)
	}
	return false
}

func (c *everyCase) decision() Decision {
	switch {
	case c.denied:
		return Denied(c.policies, c.errors)
	case c.notAllowed:
		return NoOpinion(c.errors)
	}
	return Allowed(c.policies, c.errors)
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
func AdmissionShapes(t entities.Target, req *entities.Request, verb string) []shape {
	if t.Resource == nil || req.APIGroup == entities.Wildcard || req.Resource == entities.Wildcard {
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

// AdmissionWebhookSees reports whether a request that kcedar allows reaches
// kcedar's admission webhook (the ValidatingWebhookConfiguration verified
// under --admission-enforcement sends every CREATE, UPDATE, DELETE and
// CONNECT of every resource and subresource): it is a write or a connect on
// a concrete, typed resource (AdmissionShapes), and not of the kinds
// kube-apiserver never sends to admission webhooks. Everything else that
// kcedar allows (reads, impersonate, bind, escalate, approve, a "*" verb,
// wildcards) is acted on without admission, so a conditional allow of it
// must not be answered Allow.
func (e *Engine) AdmissionWebhookSees(req *entities.Request) bool {
	if !req.ResourceRequest || ExemptFromWebhookAdmission(req.APIGroup, req.Resource) {
		return false
	}
	return AdmissionShapes(entities.ResolveTarget(e.schema, req), req, req.Verb) != nil
}

// ExemptFromWebhookAdmission reports whether kube-apiserver never calls
// admission webhooks for a resource (and its subresources): the admission
// configuration kinds, so that no webhook can lock the cluster out of
// fixing its webhooks (k8s.io/apiserver, admission/plugin/webhook/
// predicates/rules, IsExemptAdmissionConfigurationResource), and the
// reviews that are never stored, so that no webhook can wedge the cluster
// out of its own authentication and authorization (k8s.io/kubernetes
// pkg/kubeapiserver/admission/exclusion, with the
// ExcludeAdmissionWebhookVirtualResources feature, on by default; with it
// off they are sent, and counting them exempt only folds more).
func ExemptFromWebhookAdmission(group, resource string) bool {
	switch group {
	case "admissionregistration.k8s.io":
		switch resource {
		case "validatingwebhookconfigurations", "mutatingwebhookconfigurations",
			"validatingadmissionpolicies", "validatingadmissionpolicybindings",
			"mutatingadmissionpolicies", "mutatingadmissionpolicybindings":
			return true
		}
	case "authentication.k8s.io":
		return resource == "selfsubjectreviews" || resource == "tokenreviews"
	case "authorization.k8s.io":
		switch resource {
		case "localsubjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews":
			return true
		}
	}
	return false
}

// authorizeVerb decides req for verb; folded: the caller folds the decision
// (it is one case of several), so conditions are of no use.
func (e *Engine) authorizeVerb(req *entities.Request, verb string, folded bool, st *Stats) (Decision, bool) {
	target := entities.ResolveTarget(e.schema, req)
	open := target.Open(req)
	var optional []string
	for _, attr := range []string{schemagen.AttrNamespace, schemagen.AttrName} {
		if open[attr] && target.OptionalWhenOpen(attr) {
			optional = append(optional, attr)
		}
	}
	if len(optional) == 0 {
		return e.authorizeWorld(req, verb, target, open, nil, folded, st)
	}
	// Each optional open attribute may be absent or hold any value: decide
	// every combination ("world"); the request is allowed only if every world
	// allows it and denied if any denies it. Such targets are never typed, so
	// admission conditions do not apply and each world is folded.
	forbid, audit := e.candidateFacts(req, []string{verb})
	d := decideCases(1<<len(optional), !forbid, audit, func(mask int) Decision {
		absent := map[string]bool{}
		for i, attr := range optional {
			if mask&(1<<i) != 0 {
				absent[attr] = true
			}
		}
		d, _ := e.authorizeWorld(req, verb, target, open, absent, true, st)
		return d
	})
	return d, true
}

// resultKind is what one policy's evaluation left for a request.
type resultKind int

const (
	notSatisfied resultKind = iota
	satisfied
	errored   // fails whatever the unknowns are
	remaining // a residual: depends on the unknowns
)

// policyResult is one policy's result for a request.
type policyResult struct {
	policy *cedarlang.Policy
	kind   resultKind
	expr   ast.IsNode // the residual, for remaining
	err    error      // for errored
	memo   *memoEntry
}

// classify is the one place that reads a policy's evaluation: a boolean, an
// error, or a residual expression (one-phase evaluation gives the first two,
// partial evaluation any of them).
func classify(p *cedarlang.Policy, expr ast.IsNode) policyResult {
	r := policyResult{policy: p, expr: expr}
	switch {
	case isBool(expr, true):
		r.kind = satisfied
	case isBool(expr, false):
		r.kind = notSatisfied
	case isError(expr):
		r.kind, r.err = errored, errorOf(expr)
	case p.Effect == types.Permit && !mayBeTrue(expr):
		// A permit that can only be false or fail can never allow.
		r.kind = notSatisfied
	default:
		r.kind = remaining
	}
	return r
}

// decide combines policy results by Cedar's rules, except that a forbid that
// fails to evaluate denies (Cedar skips erroring policies, which for a forbid
// fails open): a satisfied or erroring forbid denies; else, without forbid
// residuals, a satisfied permit allows; else the residuals are the
// conditions of a Conditional decision (with an unconditional permit, the
// deny conditions alone decide).
func decide(results []policyResult, entityType types.EntityType) Decision {
	var denyTrue, allowTrue []*cedarlang.Policy
	var deny, allow []Residual
	var errs []error
	for _, r := range results {
		if r.kind == errored {
			errs = append(errs, &PolicyError{PolicyID: r.policy.ID, Err: r.err})
		}
		forbid := r.policy.Effect == types.Forbid
		switch r.kind {
		case satisfied, errored:
			if forbid {
				denyTrue = append(denyTrue, r.policy)
			} else if r.kind == satisfied {
				allowTrue = append(allowTrue, r.policy)
			}
		case remaining:
			res := Residual{Policy: r.policy, Expr: r.expr, EntityType: entityType, memo: r.memo}
			if forbid {
				deny = append(deny, res)
			} else {
				allow = append(allow, res)
			}
		}
	}
	switch {
	case len(denyTrue) > 0:
		return Denied(denyTrue, errs)
	case len(deny) == 0 && len(allowTrue) > 0:
		return Allowed(allowTrue, errs)
	}
	if len(allowTrue) > 0 {
		allowTrue = uniquePolicies(allowTrue)
		allow = []Residual{{Policy: allowTrue[0], Expr: ast.NodeValue{Value: types.True}, EntityType: entityType}}
	}
	return Conditional(deny, allow, errs)
}

// authorizeWorld decides req for verb in one world of its open values
// (absent: the open attributes that are absent in this world) with the
// enforced candidates, and evaluates the audit candidates beside them into
// the decision's audit findings (audit.go). partial reports whether partial
// evaluation was needed. folded: the caller folds the decision.
func (e *Engine) authorizeWorld(req *entities.Request, verb string, target entities.Target, open, absent map[string]bool, folded bool, st *Stats) (d Decision, partial bool) {
	q := cedarlang.NewCandidateQuery(req, target, verb)
	// Without admission (or folded by the caller), a decision is folded:
	// only a permit satisfied outright allows, and a forbid's residual
	// denies.
	shapes := AdmissionShapes(target, req, verb)
	// A caller that counts only unconditional rights folds the decision
	// whatever admission would do with it, so it is folded here.
	folded = folded || len(shapes) == 0 || req.UnconditionalOnly
	q.SkipResidualOnly = folded
	ns := e.candidateLabels(&q, target, req, absent)
	cur := e.policies.Lookup(q)
	defer cur.Release()
	if cur.Empty() {
		return NoOpinion(nil), false
	}
	enforced, audit := e.splitLookup(cur)
	enforced.folded, enforced.ns = folded, ns
	if !folded && len(audit) == 0 {
		// (Audit findings compare against every enforced result.)
		enforced.budget = e.conditionBudget(target.EntityType)
	}
	results, admission, partial := e.evaluateWorld(req, verb, target, open, absent, shapes, enforced)
	st.addCandidates(len(results))
	d = decide(results, target.EntityType)
	if partial && d.IsConditional() && (!admission || req.UnconditionalOnly) {
		// Nothing will evaluate conditions for this request: fold now.
		d = d.FailureDecision()
	}
	// A denied decision stays denied whatever policy is added: no audit
	// policy can change it (auditFindings), so none is evaluated.
	if len(audit) > 0 && d.Type() != DecisionDeny {
		auditResults, _, auditPartial := e.evaluateWorld(req, verb, target, open, absent, shapes, candidates{fixed: audit, ns: ns})
		st.addCandidates(len(auditResults))
		d = d.withAudit(auditFindings(d, results, auditResults, target.EntityType, folded || !admission))
		partial = partial || auditPartial
	}
	return d, partial
}

// candidates are the policies one evaluation reads: every one of fixed,
// then, when permits is set, the enforced permits it yields in policy order
// until one is satisfied outright. After that no other permit can change
// the answer (decide allows, or with forbid residuals makes the allow
// condition "true"), so the cost does not grow with the number of satisfied
// permits, and the reason names the first of them.
type candidates struct {
	fixed   []*cedarlang.Policy
	permits *cedarlang.Cursor
	folded  bool // nothing will evaluate the decision's conditions
	// ns: the namespace object the index looked the candidates up with
	// (candidateLabels), which evaluation must then read too; nil: looked
	// up when a candidate may read it.
	ns *nsValue
	// budget: the conditions the encoded answer can carry (nil: no limit).
	budget *conditionBudget
}

// enforced reports whether cands are a decision's enforced candidates
// (fixed then holds its forbids), rather than policies each evaluated in
// full.
func (c candidates) enforced() bool { return c.permits != nil }

// evaluateWorld evaluates the candidates for req and verb in one world of
// its open values; shapes are the request's AdmissionShapes. A fully known
// request is evaluated one-phase; otherwise each policy is partially
// evaluated and what remains is its residual. admission reports whether
// admission will see the request (conditions can be evaluated), partial
// whether partial evaluation was needed.
func (e *Engine) evaluateWorld(req *entities.Request, verb string, target entities.Target, open, absent map[string]bool, shapes []shape, cands candidates) (results []policyResult, admission, partial bool) {
	if len(cands.fixed) == 0 && !cands.enforced() {
		return nil, len(shapes) > 0, false
	}
	action := schemagen.ActionUID(verb)
	resourceUID := target.EntityUID(req)
	var ns nsValue
	switch {
	case !e.mayReadNamespace(cands):
	case cands.ns != nil:
		ns = *cands.ns
	default:
		ns = e.namespaceValue(target, req, absent)
	}
	if ns.applies && !ns.known {
		open = maps.Clone(open)
		open[schemagen.AttrNamespaceObject] = true
	}
	sel := selectorConstraints(req, verb, target)
	if len(open) == 0 && len(shapes) == 0 && sel == nil {
		return e.evaluateKnown(req, action, resourceUID, target, ns, cands), false, false
	}
	w := &world{e: e, verb: verb, target: target, open: open, absent: absent, principal: renderedPrincipal{Entity: e.principalEntity(req.User)}, action: action,
		resourceUID: resourceUID, shapes: shapes, admission: len(shapes) > 0, ns: ns, sel: sel}
	w.prepare(req)
	return evaluateCandidates(cands, cands.folded || !w.admission, w.evaluate), w.admission, true
}

// evaluateKnown evaluates the candidates of a fully known request one-phase.
// A policy whose sure test decides the request (Policy.Surely: the shapes
// most policies take) is decided without evaluating it; the others are
// evaluated by cedar-go, and the request is made Cedar data (the principal,
// the resource's record) only for them.
func (e *Engine) evaluateKnown(req *entities.Request, action, resourceUID types.EntityUID, target entities.Target, ns nsValue, cands candidates) []policyResult {
	known := target.Attributes(req, nil, nil)
	if ns.known {
		known[schemagen.AttrNamespaceObject] = ns.rec
	}
	facts := cedarlang.FactsOf(req, action, resourceUID, known)
	var principal *types.Entity // fetched once, when first needed
	var ents *entities.Entities
	return evaluateCandidates(cands, true, func(p *cedarlang.Policy) policyResult {
		if facts.PrincipalAttributes == nil && p.SureReadsPrincipal() {
			facts.PrincipalAttributes = &e.principalOnce(&principal, req.User).Attributes
		}
		switch p.Surely(&facts) {
		case cedarlang.SurelySatisfied:
			return classify(p, ast.NodeValue{Value: types.True})
		case cedarlang.SurelyNotSatisfied:
			return classify(p, ast.NodeValue{Value: types.False})
		}
		if ents == nil {
			ents = &entities.Entities{Principal: *e.principalOnce(&principal, req.User), Resource: types.Entity{UID: resourceUID, Attributes: types.NewRecord(known)}, Maps: ns.maps}
		}
		return classify(p, evaluateCompiled(p, ents, ents.Principal.UID, action, resourceUID))
	})
}

// principalOnce is *p, u's principal entity fetched on first use.
func (e *Engine) principalOnce(p **types.Entity, u entities.UserInfo) *types.Entity {
	if *p == nil {
		pe := e.principalEntity(u)
		*p = &pe
	}
	return *p
}

// evaluateCandidates evaluates cands with eval: every fixed policy, then
// the permits until one is satisfied. With folded (nothing will evaluate
// conditions: a forbid's residual denies as surely as a satisfied forbid),
// a decision's forbids are evaluated until the first that denies, which
// settles the answer: no permit is read, and the reason names that forbid.
//
// With a budget (and not folded), the forbids are evaluated until one deny
// condition too many (Encode then denies), and once the allow conditions
// fill what is left, a permit's residual is not kept (Encode would drop
// it) and only the permits that may be satisfied outright are read: one of
// those still changes the answer.
func evaluateCandidates(cands candidates, folded bool, eval func(*cedarlang.Policy) policyResult) []policyResult {
	results := make([]policyResult, 0, len(cands.fixed)+1)
	budget := cands.budget
	if folded {
		budget = nil
	}
	for _, p := range cands.fixed {
		r := eval(p)
		results = append(results, r)
		if folded && cands.enforced() && r.kind != notSatisfied {
			return results
		}
		if budget.forbidOverflows(r) {
			return results
		}
	}
	if !cands.enforced() {
		return results
	}
	if budget.full() {
		cands.permits.SkipResidualOnly()
	}
	for p := cands.permits.Next(); p != nil; p = cands.permits.Next() {
		r := eval(p)
		if r.kind == remaining && budget.full() {
			continue
		}
		results = append(results, r)
		switch r.kind {
		case satisfied:
			return results
		case remaining:
			if budget.takeAllow(r); budget.full() {
				cands.permits.SkipResidualOnly()
			}
		}
	}
	return results
}

// world is one request in one world of its open values, for partial
// evaluation: what is known, what is unknown (open attributes, the objects
// of each admission shape, an unknown namespace object), and the
// environments the candidates are evaluated in, built only when needed.
type world struct {
	e                   *Engine
	verb                string
	target              entities.Target
	open, absent        map[string]bool
	principal           renderedPrincipal // rendered once for memo keys
	action, resourceUID types.EntityUID
	shapes              []shape
	admission           bool
	ns                  nsValue
	sel                 *labelConstraints
	// attrs are the resource's attributes; attrsNoNS the same in the world
	// where an unknown namespaceObject is absent.
	attrs, attrsNoNS types.RecordMap
	// envs: per shape, the environment with and without the namespace object.
	envs []*eval.Env
}

// prepare computes the resource attributes (open ones as variables) and the
// shapes to evaluate in.
func (w *world) prepare(req *entities.Request) {
	w.attrs = w.target.Attributes(req, w.open, func(attr string) types.Value {
		if w.absent[attr] {
			return nil
		}
		return eval.Variable(types.String(attr))
	})
	w.attrsNoNS = w.attrs
	switch {
	case w.ns.known:
		w.attrs[schemagen.AttrNamespaceObject] = w.ns.rec
	case w.ns.applies:
		w.attrsNoNS = maps.Clone(w.attrs)
		w.attrs[schemagen.AttrNamespaceObject] = eval.Variable(schemagen.AttrNamespaceObject)
	}
	if !w.admission {
		w.shapes = []shape{{}}
		if w.sel != nil {
			// The listed objects: unknown, constrained by the selector.
			w.shapes = []shape{{object: true}}
		}
	}
	w.envs = make([]*eval.Env, 2*len(w.shapes))
}

// envFor builds the environment of shape sh, with or without the namespace
// object.
func (w *world) envFor(sh shape, nsAbsent bool) eval.Env {
	base := w.attrs
	if nsAbsent {
		base = w.attrsNoNS
	}
	m := make(types.RecordMap, len(base)+2)
	for k, v := range base {
		m[k] = v
	}
	if sh.object {
		m[schemagen.AttrObject] = eval.Variable(schemagen.AttrObject)
	}
	if sh.oldObject {
		m[schemagen.AttrOldObject] = eval.Variable(schemagen.AttrOldObject)
	}
	ents := &entities.Entities{Principal: w.principal.Entity, Resource: types.Entity{UID: w.resourceUID, Attributes: types.NewRecord(m)}, Maps: w.ns.maps}
	return eval.Env{Entities: ents, Principal: w.principal.UID, Action: w.action, Resource: w.resourceUID, Context: entities.ContextFor(w.action)}
}

// envAt is the environment of shape i, built once on first use (only when a
// residual is not memoized).
func (w *world) envAt(i int, nsAbsent bool) func() eval.Env {
	j := 2 * i
	if nsAbsent {
		j++
	}
	return func() eval.Env {
		if w.envs[j] == nil {
			env := w.envFor(w.shapes[i], nsAbsent)
			w.envs[j] = &env
		}
		return *w.envs[j]
	}
}

// evaluate is p's result in this world: compiled evaluation when it reads
// nothing unknown, else its residual, split where the worlds differ (the
// stored object present or not, the namespace present or not).
func (w *world) evaluate(p *cedarlang.Policy) policyResult {
	in := w.e.inputsOf(p)
	if !readsUnknown(p, in, w.open, w.absent) {
		// Nothing this policy reads is unknown: evaluate it as compiled.
		env := w.envAt(0, false)()
		return classify(p, evaluateCompiled(p, env.Entities, w.principal.UID, w.action, w.resourceUID))
	}
	expr, memo := w.residual(p, in, 0)
	if p.UsesObjects && len(w.shapes) == 2 {
		// The first shape has the stored object, the second does not
		// (update or patch that creates): split on its presence.
		other, _ := w.residual(p, in, 1)
		if !ast.Equal(ast.NewNode(expr), ast.NewNode(other)) {
			memo = nil
			expr = splitOnPresence(schemagen.AttrOldObject, expr, other)
		}
	}
	if w.sel != nil && p.UsesObjects {
		expr, memo = w.sel.decide(p, expr, w.envAt(0, false)(), unknownAttrs(w.attrs)), nil
	}
	r := classify(p, expr)
	r.memo = memo
	return r
}

// residual is p's residual in shape i; an unknown namespace may also not
// exist, so where the two differ it is split on the namespace's presence.
func (w *world) residual(p *cedarlang.Policy, in *policyInputs, i int) (ast.IsNode, *memoEntry) {
	expr, memo := w.e.partialExpr(w.envAt(i, false), w.shapes[i].code(), p, in, w.verb, w.target.EntityType, &w.principal, w.attrs)
	if !(w.ns.applies && !w.ns.known && readsNamespace(in)) {
		return expr, memo
	}
	other, _ := w.e.partialExpr(w.envAt(i, true), w.shapes[i].code(), p, in, w.verb, w.target.EntityType, &w.principal, w.attrsNoNS)
	if ast.Equal(ast.NewNode(expr), ast.NewNode(other)) {
		return expr, memo
	}
	return splitOnPresence(schemagen.AttrNamespaceObject, expr, other), nil
}

// splitOnPresence is "if resource has attr then present else absent".
func splitOnPresence(attr string, present, absent ast.IsNode) ast.IsNode {
	return simplify(ast.NodeTypeIfThenElse{
		If:   ast.NodeTypeHas{StrOpNode: ast.StrOpNode{Arg: ast.NodeTypeVariable{Name: "resource"}, Value: types.String(attr)}},
		Then: present, Else: absent,
	})
}

// readsUnknown reports whether p reads something unknown in this world: the
// objects, or an open attribute that is not absent.
func readsUnknown(p *cedarlang.Policy, in *policyInputs, open, absent map[string]bool) bool {
	if p.UsesObjects || in.resourceWhole {
		return true
	}
	for _, attr := range in.resourceAttrs {
		if open[attr] && !absent[attr] {
			return true
		}
	}
	return false
}

// evaluateCompiled evaluates p on known values with the compiled evaluator:
// true, false, or a partial error.
func evaluateCompiled(p *cedarlang.Policy, entities types.EntityGetter, principal, action, resource types.EntityUID) ast.IsNode {
	holds, err := evaluatePolicy(p, entities, principal, action, resource)
	if err != nil {
		return eval.PartialError(err)
	}
	return ast.NodeValue{Value: types.Boolean(holds)}
}

// partialExpr is partialEval memoized by the request values p's residual
// depends on.
func (e *Engine) partialExpr(env func() eval.Env, shapeIdx int, p *cedarlang.Policy, in *policyInputs, verb string, target types.EntityType, principal *renderedPrincipal, resourceAttrs types.RecordMap) (ast.IsNode, *memoEntry) {
	if e.residuals == nil {
		return partialEval(env(), in.partialAST), nil
	}
	k := memoEntryKey{policy: p, key: memoKey(in, shapeIdx, verb, target, principal, resourceAttrs)}
	if m, ok := e.residuals.get(k); ok {
		return m.expr, m
	}
	m := &memoEntry{expr: partialEval(env(), in.partialAST)}
	e.residuals.put(k, m)
	return m.expr, m
}

// partialEval partially evaluates p and returns its simplified condition: a
// boolean value when decided, a partial error when it fails whatever the
// unknowns are, else the residual expression.
func partialEval(env eval.Env, p *ast.Policy) ast.IsNode {
	rp, keep := eval.PartialPolicy(env, p)
	if !keep {
		return ast.NodeValue{Value: types.False}
	}
	node := eval.PolicyToNode(rp).AsIsNode()
	return simplify(node)
}

// errorOf is the error of an expression that always fails.
func errorOf(n ast.IsNode) error {
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
		return err
	}
	return errorf("evaluation error")
}
