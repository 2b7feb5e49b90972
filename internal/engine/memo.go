package engine

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// policyInputs are the parts of a request a policy's residual depends on.
// Two requests that agree on them get the same residual, so residuals are
// memoized under exactly these values (plus the object shape).
type policyInputs struct {
	// partialAST is the policy with its when/unless clauses joined into one
	// when clause (A && B && !C), which is what Cedar evaluates: cedar-go's
	// PartialPolicy drops a policy as soon as one clause is false, even when
	// an earlier clause was left unknown and could fail, which for a forbid
	// would fold an error (a Deny) away.
	partialAST        *ast.Policy
	principalIdentity bool     // the principal's uid and groups (scope, ==, in, is)
	principalTags     bool     // user extra
	principalAttrs    []string // principal.<attr>
	action            bool     // the verb (scope or body)
	resourceWhole     bool     // resource used as a value: every attribute
	resourceAttrs     []string // resource.<attr>, other than the objects
}

// inputsOf analyses p once per engine.
func (e *Engine) inputsOf(p *cedarlang.Policy) *policyInputs {
	if v, ok := e.inputs.Load(p); ok {
		return v.(*policyInputs)
	}
	v, _ := e.inputs.LoadOrStore(p, analyzeInputs(p))
	return v.(*policyInputs)
}

// analyzeInputs finds what p's residual depends on.
func analyzeInputs(p *cedarlang.Policy) *policyInputs {
	in := readInputs(p)
	in.partialAST = joinConditions(p.AST)
	return in
}

// readInputs is analyzeInputs without the partial-evaluation AST: what p
// reads, cheap enough to find for every policy of a set at load.
func readInputs(p *cedarlang.Policy) *policyInputs {
	in := &policyInputs{}
	if _, all := p.AST.Principal.(ast.ScopeTypeAll); !all {
		in.principalIdentity = true
	}
	if _, all := p.AST.Action.(ast.ScopeTypeAll); !all {
		in.action = true
	}
	pa, ra := map[string]bool{}, map[string]bool{}
	for _, c := range p.AST.Conditions {
		collectInputs(c.Body, in, pa, ra)
	}
	for a := range pa {
		in.principalAttrs = append(in.principalAttrs, a)
	}
	for a := range ra {
		in.resourceAttrs = append(in.resourceAttrs, a)
	}
	slices.Sort(in.principalAttrs)
	slices.Sort(in.resourceAttrs)
	return in
}

// joinConditions returns p with its conditions joined into one when clause,
// in order: `when {A} when {B} unless {C}` becomes `when {A && B && !C}`.
// Cedar evaluates a policy's clauses left to right and stops at the first
// that is not satisfied, exactly as && does, errors included.
func joinConditions(p *ast.Policy) *ast.Policy {
	if len(p.Conditions) == 0 || len(p.Conditions) == 1 && p.Conditions[0].Condition == ast.ConditionWhen {
		return p
	}
	var body ast.IsNode
	for _, c := range p.Conditions {
		n := c.Body
		if c.Condition == ast.ConditionUnless {
			n = ast.NodeTypeNot{UnaryNode: ast.UnaryNode{Arg: n}}
		}
		if body == nil {
			body = n
		} else {
			body = ast.NodeTypeAnd{BinaryNode: ast.BinaryNode{Left: body, Right: n}}
		}
	}
	q := *p
	q.Conditions = []ast.ConditionType{{Condition: ast.ConditionWhen, Body: body}}
	return &q
}

// collectInputs finds how n uses principal, action and resource.
func collectInputs(n ast.IsNode, in *policyInputs, pa, ra map[string]bool) {
	attrOf := func(arg ast.IsNode, attr types.String) bool {
		v, ok := arg.(ast.NodeTypeVariable)
		if !ok {
			return false
		}
		switch v.Name {
		case "principal":
			pa[string(attr)] = true
		case "resource":
			if attr != schemagen.AttrObject && attr != schemagen.AttrOldObject {
				ra[string(attr)] = true
			}
		default:
			return false
		}
		return true
	}
	switch v := n.(type) {
	case ast.NodeTypeIs:
		// `resource is T` reads only the resource's type, which is always
		// known (and part of every memo key); `principal is T` only the
		// principal's identity.
		if rv, ok := v.Left.(ast.NodeTypeVariable); ok {
			switch rv.Name {
			case "resource":
				return
			case "principal":
				in.principalIdentity = true
				return
			}
		}
	case ast.NodeTypeAccess:
		if attrOf(v.Arg, v.Value) {
			return
		}
	case ast.NodeTypeHas:
		if attrOf(v.Arg, v.Value) {
			return
		}
	case ast.NodeTypeHasTag:
		if pv, ok := v.Left.(ast.NodeTypeVariable); ok && pv.Name == "principal" {
			in.principalTags = true
			collectInputs(v.Right, in, pa, ra)
			return
		}
	case ast.NodeTypeGetTag:
		if pv, ok := v.Left.(ast.NodeTypeVariable); ok && pv.Name == "principal" {
			in.principalTags = true
			collectInputs(v.Right, in, pa, ra)
			return
		}
	case ast.NodeValue:
		// An entity literal other than a group or an action may be the
		// principal or the resource of some requests (an attribute read on it
		// fails for the others): its result depends on who and what.
		if uid, ok := v.Value.(types.EntityUID); ok && uid.Type != schemagen.GroupType && uid.Type != schemagen.ActionType {
			in.principalIdentity, in.principalTags, in.resourceWhole = true, true, true
			pa["*"] = true
		}
		return
	case ast.NodeTypeVariable:
		switch v.Name {
		case "principal":
			in.principalIdentity, in.principalTags = true, true
			pa["*"] = true
		case "action", "context": // the context holds the verb
			in.action = true
		case "resource":
			in.resourceWhole = true
		}
		return
	}
	for _, c := range children(n) {
		collectInputs(c, in, pa, ra)
	}
}

// children lists the direct subexpressions of n.
func children(n ast.IsNode) []ast.IsNode {
	var out []ast.IsNode
	rewrite(n, func(c ast.IsNode) (ast.IsNode, bool) {
		if c == nil {
			return c, true
		}
		if len(out) == 0 && out == nil {
			out = []ast.IsNode{}
			return nil, false // the root: descend one level
		}
		out = append(out, c)
		return c, true
	})
	return out
}

// memoKey renders the values of p's inputs in env (shape included).
func memoKey(in *policyInputs, shape int, verb string, target types.EntityType, principal *renderedPrincipal, resourceAttrs types.RecordMap) string {
	var b strings.Builder
	w := func(s string) {
		b.WriteString(s)
		b.WriteByte(0)
	}
	w(string(rune('0' + shape)))
	w(string(target))
	if in.action {
		w(verb)
	}
	if in.principalIdentity {
		w(string(principal.UID.Type))
		w(string(principal.UID.ID))
		for g := range principal.Parents.All() {
			w(string(g.ID))
		}
	}
	if in.principalTags {
		w(principal.tagsText())
	}
	for _, a := range in.principalAttrs {
		if a == "*" {
			w(principal.attrsText())
			continue
		}
		w(valueKey(principal.Attributes.Get(types.String(a))))
	}
	if in.resourceWhole {
		for _, k := range slices.Sorted(maps.Keys(resourceAttrs)) {
			w(string(k))
			w(valueKey(resourceAttrs[k], true))
		}
	}
	for _, a := range in.resourceAttrs {
		v, ok := resourceAttrs[types.String(a)]
		w(valueKey(v, ok))
	}
	return b.String()
}

// renderedPrincipal is a request's principal, its records rendered at most
// once for the memo keys of all the policies one request evaluates.
type renderedPrincipal struct {
	types.Entity
	attrs, tags     string
	hasAttrs, hasTg bool
}

func (r *renderedPrincipal) attrsText() string {
	if !r.hasAttrs {
		r.attrs, r.hasAttrs = r.Attributes.String(), true
	}
	return r.attrs
}

func (r *renderedPrincipal) tagsText() string {
	if !r.hasTg {
		r.tags, r.hasTg = r.Tags.String(), true
	}
	return r.tags
}

func valueKey(v types.Value, ok bool) string {
	if !ok {
		return "\x01absent"
	}
	if name, isVar := eval.ToVariable(v); isVar {
		return "\x01var:" + string(name)
	}
	if s, isString := v.(types.String); isString {
		return "s" + string(s)
	}
	return v.String()
}

// memoEntry is a memoized residual and what was derived from it (Derived).
type memoEntry struct {
	expr ast.IsNode
	mu   sync.Mutex
	// derived values by entity type and key
	derived map[string]any
}

type memoEntryKey struct {
	policy *cedarlang.Policy
	key    string
}
