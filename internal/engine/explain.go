package engine

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	cedarast "github.com/cedar-policy/cedar-go/ast"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Explanation is why one request is decided as it is (`kcedar why`): the
// decision as Report renders it, the policies that decided it, and the
// policies that nearly applied with the part of each that did not hold.
type Explanation struct {
	Request string `json:"request"`
	Report
	// ServedAs is what kcedar serve answers kube-apiserver in the mode the
	// server runs in (set by the caller, which knows the mode: the engine
	// decides the same in every mode). Empty: not said.
	ServedAs string `json:"servedAs,omitempty"`
	// Deciding are the policies that determine the decision: for a Deny
	// every forbid that holds or fails to evaluate (or, without conditional
	// authorization, whose condition remains); for an Allow every permit
	// that holds; for a Conditional decision every policy whose condition
	// remains, and the permits that hold; none for NoOpinion.
	Deciding []PolicyTrace `json:"deciding"`
	// NearMisses are the other policies whose scope matched at least two
	// of principal, action and resource, closest first.
	NearMisses []PolicyTrace `json:"nearMisses,omitempty"`
}

// PolicyTrace is one policy evaluated for the request, part by part.
type PolicyTrace struct {
	ID     string `json:"id"`
	Effect string `json:"effect"` // permit or forbid
	Source string `json:"source"` // file (or object):line:column
	// Outcome is holds, does not hold, error, or conditional (its
	// condition depends on what is unknown: the object, an open name...).
	Outcome  string      `json:"outcome"`
	Error    string      `json:"error,omitempty"`
	Residual string      `json:"residual,omitempty"`
	Parts    []TracePart `json:"parts"`
}

// TracePart is one scope constraint or when/unless clause, evaluated alone.
type TracePart struct {
	Kind   string `json:"kind"` // principal, action, resource, when, unless
	Text   string `json:"text"`
	Result string `json:"result"` // true, false, error, unknown
	// Residual is what remains of an unknown part; Error an error's message.
	Residual string `json:"residual,omitempty"`
	Error    string `json:"error,omitempty"`
	// Values are the attributes a clause reads, as the request has them.
	Values []string `json:"values,omitempty"`
	// Failing is, for a part that stops the policy from applying, the
	// sub-expression that stops it, when it is smaller than the part (see
	// failingSub): the conjunct of a when clause that is false or fails
	// after conjuncts that hold, the disjunct of an unless clause that
	// holds or fails after disjuncts that do not, the type or the group of
	// an `is ... in` scope.
	Failing *SubExpression `json:"failing,omitempty"`
}

// SubExpression is a part of a clause evaluated alone.
type SubExpression struct {
	Text   string `json:"text"`
	Result string `json:"result"` // true, false or error
	Error  string `json:"error,omitempty"`
	// Values are the attributes (and the types an `is` test reads) it
	// reads, as the request has them.
	Values []string `json:"values,omitempty"`
}

// Outcomes of a PolicyTrace.
const (
	OutcomeHolds       = "holds"
	OutcomeDoesNotHold = "does not hold"
	OutcomeError       = "error"
	OutcomeConditional = "conditional"
)

// ErrNotExplained is returned for requests Explain does not explain.
var ErrNotExplained = errors.New("not explained")

// Explain decides req as Authorize does and explains the decision: every
// enforced policy of the set is evaluated for the request as the engine
// evaluates its candidates (partially, where something is unknown), each
// scope constraint and clause alone beside it. It explains one verb in one
// world: a "*" verb and a request on k8s::Resource with an open name or
// namespace (which may be absent) are ErrNotExplained. report renders the
// decision as the server answers it (conditions.Engine.Report, which
// encodes the conditions).
func (e *Engine) Explain(req *entities.Request, report func() Report) (Explanation, error) {
	verbs := entities.Verbs(e.schema, req)
	if len(verbs) != 1 {
		return Explanation{}, fmt.Errorf("%w: ask about one verb, not %q", ErrNotExplained, req.Verb)
	}
	verb := verbs[0]
	target := entities.ResolveTarget(e.schema, req)
	open := target.Open(req)
	for _, attr := range []string{schemagen.AttrNamespace, schemagen.AttrName} {
		if open[attr] && target.OptionalWhenOpen(attr) {
			return Explanation{}, fmt.Errorf("%w: %s is open on %s and may be absent: give it", ErrNotExplained, attr, target.EntityType)
		}
	}
	ex := Explanation{Request: req.String(), Report: report(), Deciding: []PolicyTrace{}}
	var all []*cedarlang.Policy
	for _, p := range e.policies.Policies {
		if !p.IsAudit() {
			all = append(all, p)
		}
	}
	shapes := AdmissionShapes(target, req, verb)
	results, admission, partial := e.evaluateWorld(req, verb, target, open, nil, shapes, candidates{fixed: all})
	folded := len(shapes) == 0 || (partial && !admission)
	env := e.explainEnv(req, verb, target, open, shapes)
	deciding := decidingPolicies(results, folded)
	for _, r := range results {
		switch {
		case deciding[r.policy]:
			ex.Deciding = append(ex.Deciding, traceOf(r, env))
		case r.kind == notSatisfied:
			// The scope first: clauses are evaluated for near misses only.
			if scope := scopeParts(r.policy.AST, env); countTrue(scope) >= 2 {
				ex.NearMisses = append(ex.NearMisses, traceOf(r, env))
			}
		}
	}
	sortTraces(ex.Deciding)
	if ex.Decision == DecisionDeny.String() || ex.Decision == DecisionAllow.String() {
		// Authorize stops at the first forbid that denies (the first permit
		// that allows); every one that holds decides.
		ex.Policies = ex.DecidingIDs()
	}
	sort.SliceStable(ex.NearMisses, func(i, j int) bool {
		return ex.NearMisses[i].progress() > ex.NearMisses[j].progress()
	})
	return ex, nil
}

// decidingPolicies are the policies that determine the decision decide
// makes of results (folded: no one will evaluate conditions, so a forbid's
// residual denies and a permit's residual cannot allow).
func decidingPolicies(results []policyResult, folded bool) map[*cedarlang.Policy]bool {
	byKind := map[string][]*cedarlang.Policy{}
	for _, r := range results {
		forbid := r.policy.Effect == types.Forbid
		switch {
		case forbid && (r.kind == satisfied || r.kind == errored):
			byKind["deny"] = append(byKind["deny"], r.policy)
		case forbid && r.kind == remaining:
			byKind["denyResidual"] = append(byKind["denyResidual"], r.policy)
		case !forbid && r.kind == satisfied:
			byKind["allow"] = append(byKind["allow"], r.policy)
		case !forbid && r.kind == remaining:
			byKind["allowResidual"] = append(byKind["allowResidual"], r.policy)
		}
	}
	var out []*cedarlang.Policy
	switch {
	case len(byKind["deny"]) > 0:
		out = byKind["deny"]
	case len(byKind["denyResidual"]) == 0 && len(byKind["allow"]) > 0:
		out = byKind["allow"]
	case folded:
		out = byKind["denyResidual"] // a Deny, or NoOpinion when empty
	default:
		out = slices.Concat(byKind["denyResidual"], byKind["allowResidual"], byKind["allow"])
		if len(byKind["allow"]) > 0 {
			out = slices.Concat(byKind["denyResidual"], byKind["allow"])
		}
	}
	set := make(map[*cedarlang.Policy]bool, len(out))
	for _, p := range out {
		set[p] = true
	}
	return set
}

// DecidingIDs are the ids of the deciding policies, sorted.
func (x Explanation) DecidingIDs() []string {
	ids := make([]string, len(x.Deciding))
	for i, t := range x.Deciding {
		ids[i] = t.ID
	}
	sort.Strings(ids)
	return ids
}

// explainEnv is the environment the parts of a policy are evaluated in:
// the request's entities as evaluateWorld builds them, with what is
// unknown (open attributes, the objects admission will see, an unknown
// namespace object) as variables.
func (e *Engine) explainEnv(req *entities.Request, verb string, target entities.Target, open map[string]bool, shapes []shape) eval.Env {
	ns := e.namespaceValue(target, req, nil)
	attrs := target.Attributes(req, open, func(attr string) types.Value { return eval.Variable(types.String(attr)) })
	switch {
	case ns.known:
		attrs[schemagen.AttrNamespaceObject] = ns.rec
	case ns.applies:
		attrs[schemagen.AttrNamespaceObject] = eval.Variable(schemagen.AttrNamespaceObject)
	}
	sh := shape{object: selectorConstraints(req, verb, target) != nil}
	if len(shapes) > 0 {
		sh = shapes[0]
	}
	if sh.object {
		attrs[schemagen.AttrObject] = eval.Variable(schemagen.AttrObject)
	}
	if sh.oldObject {
		attrs[schemagen.AttrOldObject] = eval.Variable(schemagen.AttrOldObject)
	}
	principal := e.principalEntity(req.User)
	uid := target.EntityUID(req)
	action := schemagen.ActionUID(verb)
	ents := &entities.Entities{Principal: principal, Resource: types.Entity{UID: uid, Attributes: types.NewRecord(attrs)}, Maps: ns.maps}
	return eval.Env{Entities: ents, Principal: principal.UID, Action: action, Resource: uid, Context: entities.ContextFor(action)}
}

// traceOf renders r's policy part by part in env.
func traceOf(r policyResult, env eval.Env) PolicyTrace {
	p := r.policy
	t := PolicyTrace{ID: p.ID, Effect: "permit", Source: p.Source, Parts: policyParts(p.AST, env)}
	if p.Effect == types.Forbid {
		t.Effect = "forbid"
	}
	switch r.kind {
	case satisfied:
		t.Outcome = OutcomeHolds
	case notSatisfied:
		t.Outcome = OutcomeDoesNotHold
	case errored:
		t.Outcome, t.Error = OutcomeError, r.err.Error()
	case remaining:
		t.Outcome = OutcomeConditional
		t.Residual, _ = ExprText(r.expr)
	}
	return t
}

// policyParts evaluates each scope constraint and each clause of p alone.
func policyParts(p *ast.Policy, env eval.Env) []TracePart {
	parts := scopeParts(p, env)
	for _, c := range p.Conditions {
		sub := ast.Permit().When(ast.NewNode(c.Body))
		part := evaluatePart(env, sub)
		part.Kind = "when"
		if c.Condition == ast.ConditionUnless {
			part.Kind = "unless"
		}
		body, _ := ExprText(c.Body)
		part.Text = part.Kind + " { " + body + " }"
		part.Values = readValues(body, env)
		if !part.lets() && part.Result != "unknown" {
			part.Failing = failingPart(env, c.Body)
		}
		parts = append(parts, part)
	}
	return parts
}

// scopeParts evaluates each scope constraint of p alone.
func scopeParts(p *ast.Policy, env eval.Env) []TracePart {
	all := ast.Permit()
	scopes := []struct {
		kind string
		sub  ast.Policy
	}{
		{"principal", ast.Policy{Effect: ast.EffectPermit, Principal: p.Principal, Action: all.Action, Resource: all.Resource}},
		{"action", ast.Policy{Effect: ast.EffectPermit, Principal: all.Principal, Action: p.Action, Resource: all.Resource}},
		{"resource", ast.Policy{Effect: ast.EffectPermit, Principal: all.Principal, Action: all.Action, Resource: p.Resource}},
	}
	parts := make([]TracePart, 0, 3+len(p.Conditions))
	for _, s := range scopes {
		part := evaluatePart(env, &s.sub)
		part.Kind, part.Text = s.kind, scopeText(&s.sub, s.kind)
		if isIn, ok := s.sub.Principal.(ast.ScopeTypeIsIn); ok && s.kind == "principal" && part.Result != "true" && part.Result != "unknown" {
			part.Failing = failingPart(env, scopeIsIn("principal", isIn))
		}
		if isIn, ok := s.sub.Resource.(ast.ScopeTypeIsIn); ok && s.kind == "resource" && part.Result != "true" && part.Result != "unknown" {
			part.Failing = failingPart(env, scopeIsIn("resource", isIn))
		}
		parts = append(parts, part)
	}
	return parts
}

// evaluatePart partially evaluates a one-part policy: true, false, error or
// unknown (with its residual).
func evaluatePart(env eval.Env, p *ast.Policy) TracePart {
	n := partialEval(env, p)
	switch {
	case isBool(n, true):
		return TracePart{Result: "true"}
	case isBool(n, false):
		return TracePart{Result: "false"}
	case isError(n):
		return TracePart{Result: "error", Error: errorOf(n).Error()}
	}
	text, _ := ExprText(n)
	return TracePart{Result: "unknown", Residual: text}
}

// scopeIsIn is an `is T in E` scope constraint as the expression
// `v is T && v in E`: the type test first, as Cedar evaluates it.
func scopeIsIn(v string, s ast.ScopeTypeIsIn) ast.IsNode {
	variable := ast.NodeTypeVariable{Name: types.String(v)}
	return ast.NodeTypeAnd{BinaryNode: ast.BinaryNode{
		Left:  ast.NodeTypeIs{Left: variable, EntityType: s.Type},
		Right: ast.NodeTypeIn{BinaryNode: ast.BinaryNode{Left: variable, Right: ast.NodeValue{Value: s.Entity}}},
	}}
}

// failingPart is the sub-expression of body (a clause or a scope
// constraint that stops its policy) that stops it, evaluated alone, or nil
// when body itself is the smallest (see failingSub).
func failingPart(env eval.Env, body ast.IsNode) *SubExpression {
	sub := failingSub(env, body)
	if sub == nil {
		return nil
	}
	text, err := ExprText(sub)
	if err != nil {
		return nil
	}
	r := evaluatePart(env, ast.Permit().When(ast.NewNode(sub)))
	return &SubExpression{Text: text, Result: r.Result, Error: r.Error, Values: append(typeValues(text, env), readValues(text, env)...)}
}

// failingSub descends into n, whose value stops its policy (false for a
// when clause, true for an unless clause) or is an error, to the part that
// decides it, as Cedar evaluates && and || (left to right, stopping at the
// first operand that decides): in a conjunction that is false or fails,
// the first conjunct that is not true; in a disjunction that is true or
// fails, the first disjunct that is not false; and so on down. It stops
// (returning what it reached, or nil for n itself) at any other
// expression, and where an operand before the deciding one is unknown
// (open, or the object of a write): the parts cannot then be told apart.
func failingSub(env eval.Env, n ast.IsNode) ast.IsNode {
	var found ast.IsNode
	for {
		var operands []ast.IsNode
		var passes string // the value of an operand that lets evaluation go on
		switch v := n.(type) {
		case ast.NodeTypeAnd:
			operands, passes = flatten(v, true), "true"
		case ast.NodeTypeOr:
			operands, passes = flatten(v, false), "false"
		default:
			return found
		}
		result := evaluatePart(env, ast.Permit().When(ast.NewNode(n))).Result
		if result == passes || result == "unknown" {
			return found // n does not decide (an unknown whole cannot be pinned)
		}
		next := decidingOperand(env, operands, passes)
		if next == nil {
			return found
		}
		n, found = next, next
	}
}

// decidingOperand is the first operand whose value is not passes, when
// every operand before it has that value (nil otherwise).
func decidingOperand(env eval.Env, operands []ast.IsNode, passes string) ast.IsNode {
	for _, o := range operands {
		switch evaluatePart(env, ast.Permit().When(ast.NewNode(o))).Result {
		case passes:
			continue
		case "unknown":
			return nil
		}
		return o
	}
	return nil
}

// flatten lists the operands of a chain of && (and) or || (or), left to
// right, however it is parenthesized: Cedar evaluates them in that order.
func flatten(n ast.IsNode, and bool) []ast.IsNode {
	switch v := n.(type) {
	case ast.NodeTypeAnd:
		if and {
			return append(flatten(v.Left, and), flatten(v.Right, and)...)
		}
	case ast.NodeTypeOr:
		if !and {
			return append(flatten(v.Left, and), flatten(v.Right, and)...)
		}
	}
	return []ast.IsNode{n}
}

// isTest matches the type tests of principal and resource in a text.
var isTest = regexp.MustCompile(`\b(principal|resource) is\b`)

// typeValues are the types the type tests of text read: "resource's type
// is core::pods".
func typeValues(text string, env eval.Env) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range isTest.FindAllStringSubmatch(text, -1) {
		v := env.Principal
		if m[1] == "resource" {
			v = env.Resource
		}
		uid, ok := v.(types.EntityUID)
		if !ok || seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		out = append(out, m[1]+"'s type is "+string(uid.Type))
	}
	return out
}

// scopeText is the Cedar text of the one scope constraint of p.
func scopeText(p *ast.Policy, kind string) string {
	text := string((*cedarast.Policy)(p).MarshalCedar())
	text = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(text), "permit ("), ");")
	text = strings.TrimSuffix(strings.TrimSpace(text), ")")
	for _, part := range splitScope(text) {
		if strings.HasPrefix(part, kind) {
			return part
		}
	}
	return kind
}

// splitScope splits "principal ..., action ..., resource ..." at the
// commas outside brackets and strings.
func splitScope(s string) []string {
	var parts []string
	depth, inString, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '(':
			depth++
		case c == ']' || c == ')':
			depth--
		case c == ',' && depth == 0:
			parts = append(parts, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(parts, strings.TrimSpace(s[start:]))
}

// attributePath matches the attribute paths a clause reads.
var attributePath = regexp.MustCompile(`\b(principal|resource|context)(\.[A-Za-z_][A-Za-z0-9_]*)+`)

// maxValues bounds the values shown per clause.
const maxValues = 4

// readValues evaluates the attribute paths text reads in env: `path is
// value`, `path is absent`, or `path is unknown` (open, or in the object).
func readValues(text string, env eval.Env) []string {
	var out []string
	seen := map[string]bool{}
	for _, path := range attributePath.FindAllString(text, -1) {
		if seen[path] || len(out) == maxValues {
			continue
		}
		seen[path] = true
		expr, err := ParseExpr(path)
		if err != nil {
			continue
		}
		n := partialEval(env, ast.Permit().When(ast.NewNode(ast.NodeTypeEquals{BinaryNode: ast.BinaryNode{Left: expr, Right: expr}})))
		switch {
		case isError(n):
			out = append(out, path+" is absent")
			continue
		case !isBool(n, true):
			out = append(out, path+" is unknown")
			continue
		}
		v, err := eval.Eval(expr, env)
		if err != nil {
			continue
		}
		out = append(out, path+" is "+valueText(v))
	}
	return out
}

// valueText is a value as Cedar writes it, cut short.
func valueText(v types.Value) string {
	text := string(v.MarshalCedar())
	if len(text) > 80 {
		text = text[:77] + "..."
	}
	return text
}

// countTrue counts the parts that are true.
func countTrue(parts []TracePart) int {
	n := 0
	for _, p := range parts {
		if p.Result == "true" {
			n++
		}
	}
	return n
}

// progress counts the parts that hold (a clause "holds" when it lets the
// policy apply) before the first that does not.
func (t PolicyTrace) progress() int {
	for i, p := range t.Parts {
		if !p.lets() {
			return i
		}
	}
	return len(t.Parts)
}

// lets reports whether the part lets the policy apply: a scope or when
// clause that is true, an unless clause that is false.
func (p TracePart) lets() bool {
	if p.Kind == "unless" {
		return p.Result == "false"
	}
	return p.Result == "true"
}

// FailedPart is the first part that stops the policy from applying, if any.
func (t PolicyTrace) FailedPart() (TracePart, bool) {
	for _, p := range t.Parts {
		if !p.lets() && p.Result != "unknown" {
			return p, true
		}
	}
	return TracePart{}, false
}

func sortTraces(ts []PolicyTrace) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
}
