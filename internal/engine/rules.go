package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// What can: the rules a principal may use, shaped like a
// SelfSubjectRulesReview's status plus conditions. Every verb of the schema
// is asked for every resource of the schema, for every resource and group
// ("*", which k8s::Resource policies decide) and for every non-resource path
// the policies name, with the name left open and partial evaluation over
// it: the list is complete for kcedar's policies (Incomplete is false).

// RuleConditions are what a conditional rule still needs: it applies when no
// deny condition holds and some allow condition does (KEP-5681's rules).
type RuleConditions struct {
	Deny  []string `json:"deny,omitempty"`
	Allow []string `json:"allow,omitempty"`
}

// ResourceRule is a SelfSubjectRulesReview resource rule, with the policies
// it comes from and, when it is not unconditional, its conditions.
type ResourceRule struct {
	Verbs         []string        `json:"verbs"`
	APIGroups     []string        `json:"apiGroups"`
	Resources     []string        `json:"resources"`
	ResourceNames []string        `json:"resourceNames,omitempty"`
	Conditions    *RuleConditions `json:"conditions,omitempty"`
	Policies      []string        `json:"policies"`
}

// NonResourceRule is a SelfSubjectRulesReview non-resource rule.
type NonResourceRule struct {
	Verbs           []string        `json:"verbs"`
	NonResourceURLs []string        `json:"nonResourceURLs"`
	Conditions      *RuleConditions `json:"conditions,omitempty"`
	Policies        []string        `json:"policies"`
}

// RulesReview is what a principal may do in a namespace (all namespaces
// when empty).
type RulesReview struct {
	ResourceRules    []ResourceRule    `json:"resourceRules"`
	NonResourceRules []NonResourceRule `json:"nonResourceRules"`
	// Denied are the rules the principal's forbids deny: for every name, or
	// when their conditions hold. A request they match is denied even if a
	// rule above allows it.
	Denied []DeniedRule `json:"denied,omitempty"`
	// Incomplete is false: every resource and verb of the schema is asked.
	Incomplete      bool   `json:"incomplete"`
	EvaluationError string `json:"evaluationError,omitempty"`
}

// WhatCan lists the rules user may use in namespace ("" for every
// namespace; cluster-scoped resources are always asked). Every verb x
// resource of the schema is asked, then k8s::Resource for every group and
// resource; a cancelled ctx stops it with ctx's error.
func (e *Engine) WhatCan(ctx context.Context, user entities.UserInfo, namespace string) (RulesReview, error) {
	e = e.uncached()
	c := &rulesCollector{ctx: ctx, e: e, principal: entities.PrincipalEntity(user), merged: map[ruleKey]*ResourceRule{}, denied: deniedRules{merged: map[deniedKey]*DeniedRule{}}}
	keys := e.schema.SortedResourceKeys()
	for _, verb := range e.schema.Verbs {
		if err := ctx.Err(); err != nil {
			return RulesReview{}, err
		}
		for _, k := range keys {
			if r := e.schema.Resources[k]; !r.AnySubresource { // free-form subresources: asked as k8s::Resource below
				c.ask(resourceRequest(user, verb, r, namespace), resourceRuleName(k))
			}
		}
		// Every group and resource: k8s::Resource policies.
		c.ask(&entities.Request{User: user, ResourceRequest: true, Verb: verb, APIGroup: entities.Wildcard, Resource: entities.Wildcard, Namespace: namespace}, entities.Wildcard)
	}
	rv := RulesReview{ResourceRules: c.groupRules(), NonResourceRules: e.nonResourceRules(user, c)}
	rv.Denied = c.denied.rules()
	if len(c.errs) > 0 {
		slices.Sort(c.errs)
		rv.EvaluationError = strings.Join(slices.Compact(c.errs), "; ")
	}
	return rv, nil
}

// resourceRequest is user's request of verb on r, in namespace if r is
// namespaced.
func resourceRequest(user entities.UserInfo, verb string, r *schemagen.Resource, namespace string) *entities.Request {
	req := &entities.Request{User: user, ResourceRequest: true, Verb: verb, APIGroup: r.Key.Group, Resource: r.Key.Resource, Subresource: r.Key.Subresource}
	if r.Namespaced {
		req.Namespace = namespace
	}
	return req
}

// resourceRuleName is how a rule names a resource: "pods", "pods/exec".
func resourceRuleName(k schemagen.ResourceKey) string {
	if k.Subresource != "" {
		return k.Resource + "/" + k.Subresource
	}
	return k.Resource
}

// ruleKey identifies the rules that merge: same group, resource, names,
// conditions and policies.
type ruleKey struct{ group, resource, names, conds, policies string }

// rulesCollector gathers the rules of one WhatCan, merging verbs.
type rulesCollector struct {
	ctx       context.Context
	e         *Engine
	principal types.Entity
	errs      []string
	merged    map[ruleKey]*ResourceRule
	order     []ruleKey
	denied    deniedRules
}

// add records that verb on group/resource is allowed (for names, under
// conditions) by policies.
func (c *rulesCollector) add(verb, group, resource string, names []string, conds *RuleConditions, policies []*cedarlang.Policy) {
	ids := policyIDs(policies)
	k := ruleKey{group, resource, strings.Join(names, "\x00"), fmt.Sprint(conds), strings.Join(ids, "\x00")}
	if r, ok := c.merged[k]; ok {
		r.Verbs = append(r.Verbs, verb)
		return
	}
	c.merged[k] = &ResourceRule{Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource}, ResourceNames: names, Conditions: conds, Policies: ids}
	c.order = append(c.order, k)
}

// ask decides req and records the rule it gives, if any: allowed for every
// name, else what remains with the name open (names, or conditions).
func (c *rulesCollector) ask(req *entities.Request, resourceName string) {
	e := c.e
	target := entities.ResolveTarget(e.schema, req)
	cur := e.policies.Lookup(cedarlang.NewCandidateQuery(req, target, req.Verb))
	enforced := e.hasEnforcedCandidates(cur)
	cur.Release()
	if !enforced {
		return
	}
	d := e.Authorize(c.ctx, req)
	for _, err := range d.Errors() {
		c.errs = append(c.errs, err.Error())
	}
	if d.IsAllowed() {
		c.add(req.Verb, req.APIGroup, resourceName, nil, nil, d.Policies())
		return
	}
	// Not allowed for every name (or conditional on the objects, or denied
	// for some name): what remains with the name open, unfolded.
	od := e.openDecision(req, c.principal, target)
	c.denied.record(req.Verb, req.APIGroup, resourceName, "", od)
	if !od.IsConditional() {
		return
	}
	if names, ok := namesOnly(od); ok {
		c.add(req.Verb, req.APIGroup, resourceName, names, nil, od.Policies())
		return
	}
	conds := &RuleConditions{}
	for _, r := range od.DenyConditions() {
		conds.Deny = append(conds.Deny, conditionText(r.Expr))
	}
	for _, r := range od.AllowConditions() {
		conds.Allow = append(conds.Allow, conditionText(r.Expr))
	}
	if len(conds.Allow) > 0 {
		c.add(req.Verb, req.APIGroup, resourceName, nil, conds, od.Policies())
	}
}

// DeniedRule is what the principal's forbids deny: Verbs on Resources of
// APIGroups (or on NonResourceURLs), for every name, or, when When is set,
// only when one of its conditions holds. Policies are the forbids.
type DeniedRule struct {
	Verbs           []string `json:"verbs"`
	APIGroups       []string `json:"apiGroups,omitempty"`
	Resources       []string `json:"resources,omitempty"`
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
	When            []string `json:"when,omitempty"`
	Policies        []string `json:"policies"`
}

// deniedKey identifies the denied rules that merge their verbs.
type deniedKey struct{ group, resource, url, when, policies string }

// deniedRules gathers the denied rules of one WhatCan.
type deniedRules struct {
	merged map[deniedKey]*DeniedRule
	order  []deniedKey
}

// record notes what the forbids of d (the decision of verb on group/resource,
// or on the non-resource url, with the name or path open) deny: all of it
// when d is a Deny, else what its deny conditions say.
func (c *deniedRules) record(verb, group, resource, url string, d Decision) {
	var when []string
	var policies []*cedarlang.Policy
	switch {
	case d.IsDenied():
		policies = d.Policies()
	case d.IsConditional():
		for _, r := range d.DenyConditions() {
			when = append(when, conditionText(r.Expr))
			policies = append(policies, r.Policy)
		}
	}
	if len(policies) == 0 {
		return
	}
	ids := policyIDs(policies)
	k := deniedKey{group, resource, url, strings.Join(when, "\x00"), strings.Join(ids, "\x00")}
	if r, ok := c.merged[k]; ok {
		r.Verbs = append(r.Verbs, verb)
		return
	}
	r := &DeniedRule{Verbs: []string{verb}, When: when, Policies: ids}
	if url != "" {
		r.NonResourceURLs = []string{url}
	} else {
		r.APIGroups, r.Resources = []string{group}, []string{resource}
	}
	c.merged[k] = r
	c.order = append(c.order, k)
}

// rules writes the denied rules as groupRules writes the allowed ones: the
// resources of a group that share verbs, conditions and policies together.
func (c *deniedRules) rules() []DeniedRule {
	type groupKey struct{ group, url, verbs, when, policies string }
	byGroup := map[groupKey]int{}
	var rules []DeniedRule
	for _, k := range c.order {
		r := c.merged[k]
		slices.Sort(r.Verbs)
		gk := groupKey{k.group, k.url, strings.Join(r.Verbs, "\x00"), k.when, k.policies}
		if i, ok := byGroup[gk]; ok && k.url == "" {
			rules[i].Resources = append(rules[i].Resources, r.Resources...)
			continue
		}
		byGroup[gk] = len(rules)
		rules = append(rules, *r)
	}
	return rules
}

// groupRules writes the rules as RBAC does: one rule per group for the
// resources that share verbs, names, conditions and policies.
func (c *rulesCollector) groupRules() []ResourceRule {
	type groupKey struct{ group, verbs, names, conds, policies string }
	byGroup := map[groupKey]int{}
	rules := []ResourceRule{}
	for _, k := range c.order {
		r := c.merged[k]
		slices.Sort(r.Verbs)
		gk := groupKey{k.group, strings.Join(r.Verbs, "\x00"), k.names, k.conds, k.policies}
		if i, ok := byGroup[gk]; ok {
			rules[i].Resources = append(rules[i].Resources, r.Resources...)
			continue
		}
		byGroup[gk] = len(rules)
		rules = append(rules, *r)
	}
	return rules
}

// openDecision is req's decision with its open values left as residuals
// (not folded, as Authorize folds a request admission never sees).
func (e *Engine) openDecision(req *entities.Request, principal types.Entity, target entities.Target) Decision {
	open := target.Open(req)
	c := accessCase{verb: req.Verb, target: target, resourceID: target.EntityUID(req)}
	c.attrs = target.Attributes(req, open, func(attr string) types.Value { return eval.Variable(types.String(attr)) })
	c.shapes = AdmissionShapes(target, req, req.Verb)
	if len(c.shapes) == 0 {
		c.shapes = []shape{{}}
	}
	var results []policyResult
	for _, p := range e.enforcedOnly(e.policies.Candidates(cedarlang.NewCandidateQuery(req, target, req.Verb))) {
		results = append(results, classify(p, c.residual(e.inputsOf(p).partialAST, p.UsesObjects, principal.UID, principal)))
	}
	return decide(results, target.EntityType)
}

// namesOnly: a conditional decision without deny conditions whose allow
// conditions each only name the resource (`resource.name == "x"`,
// `["x", "y"].contains(resource.name)`) is a rule on resourceNames.
func namesOnly(d Decision) ([]string, bool) {
	if len(d.DenyConditions()) > 0 {
		return nil, false
	}
	var names []string
	for _, r := range d.AllowConditions() {
		ns, ok := nameLiterals(r.Expr)
		if !ok {
			return nil, false
		}
		names = append(names, ns...)
	}
	slices.Sort(names)
	return slices.Compact(names), len(names) > 0
}

func isResourceName(n ast.IsNode) bool {
	a, ok := n.(ast.NodeTypeAccess)
	if !ok || a.Value != schemagen.AttrName {
		return false
	}
	v, ok := a.Arg.(ast.NodeTypeVariable)
	return ok && v.Name == "resource"
}

func nameLiterals(n ast.IsNode) ([]string, bool) {
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
		if isResourceName(v.Left) {
			s, ok := str(v.Right)
			return []string{s}, ok
		}
		if isResourceName(v.Right) {
			s, ok := str(v.Left)
			return []string{s}, ok
		}
	case ast.NodeTypeOr:
		l, ok := nameLiterals(v.Left)
		if !ok {
			return nil, false
		}
		r, ok := nameLiterals(v.Right)
		return append(l, r...), ok
	case ast.NodeTypeContains:
		if !isResourceName(v.Right) {
			return nil, false
		}
		var out []string
		switch set := v.Left.(type) {
		case ast.NodeValue:
			sv, ok := set.Value.(types.Set)
			if !ok {
				return nil, false
			}
			for el := range sv.All() {
				s, ok := el.(types.String)
				if !ok {
					return nil, false
				}
				out = append(out, string(s))
			}
		case ast.NodeTypeSet:
			for _, el := range set.Elements {
				s, ok := str(el)
				if !ok {
					return nil, false
				}
				out = append(out, s)
			}
		default:
			return nil, false
		}
		return out, len(out) > 0
	}
	return nil, false
}

func conditionText(n ast.IsNode) string {
	t, err := ExprText(n)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return t
}

func policyIDs(ps []*cedarlang.Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// nonResourceRules asks every non-resource verb with the path open: paths
// named by `resource.path == "/x"` become nonResourceURLs, `like "/x*"`
// patterns too (RBAC writes a trailing *), anything else a condition.
func (e *Engine) nonResourceRules(user entities.UserInfo, rc *rulesCollector) []NonResourceRule {
	principal := rc.principal
	out := []NonResourceRule{}
	type key struct{ urls, conds, policies string }
	merged := map[key]*NonResourceRule{}
	var order []key
	target := entities.Target{EntityType: schemagen.NonResourceURLType}
	for _, verb := range schemagen.NonResourceActions() {
		cands := e.enforcedOnly(e.policies.Candidates(cedarlang.NewCandidateQuery(&entities.Request{User: user, Verb: verb}, target, verb)))
		if len(cands) == 0 {
			continue
		}
		c := accessCase{verb: verb, target: target, resourceID: types.NewEntityUID(target.EntityType, "")}
		c.attrs = types.RecordMap{schemagen.AttrPath: eval.Variable(schemagen.AttrPath)}
		c.shapes = []shape{{}}
		var results []policyResult
		for _, p := range cands {
			results = append(results, classify(p, c.residual(e.inputsOf(p).partialAST, false, principal.UID, principal)))
		}
		d := decide(results, target.EntityType)
		for _, err := range d.Errors() {
			rc.errs = append(rc.errs, err.Error())
		}
		rc.denied.record(verb, "", "", "*", d)
		var urls []string
		var conds *RuleConditions
		switch {
		case d.IsAllowed():
			urls = []string{"*"}
		case d.IsConditional():
			if len(d.DenyConditions()) == 0 {
				ok := true
				for _, r := range d.AllowConditions() {
					u, isURL := pathLiterals(r.Expr)
					if !isURL {
						ok = false
						break
					}
					urls = append(urls, u...)
				}
				if ok {
					break
				}
				urls = nil
			}
			conds = &RuleConditions{}
			for _, r := range d.DenyConditions() {
				conds.Deny = append(conds.Deny, conditionText(r.Expr))
			}
			for _, r := range d.AllowConditions() {
				conds.Allow = append(conds.Allow, conditionText(r.Expr))
			}
			if len(conds.Allow) == 0 {
				continue
			}
			urls = []string{"*"}
		default:
			continue
		}
		slices.Sort(urls)
		urls = slices.Compact(urls)
		ids := policyIDs(d.Policies())
		k := key{strings.Join(urls, "\x00"), fmt.Sprint(conds), strings.Join(ids, "\x00")}
		if r, ok := merged[k]; ok {
			r.Verbs = append(r.Verbs, verb)
			continue
		}
		merged[k] = &NonResourceRule{Verbs: []string{verb}, NonResourceURLs: urls, Conditions: conds, Policies: ids}
		order = append(order, k)
	}
	for _, k := range order {
		out = append(out, *merged[k])
	}
	return out
}

// pathLiterals reads `resource.path == "/x"` or `resource.path like "/x*"`
// (a pattern whose only wildcard is a trailing *), or a disjunction of them.
func pathLiterals(n ast.IsNode) ([]string, bool) {
	if or, ok := n.(ast.NodeTypeOr); ok {
		l, ok := pathLiterals(or.Left)
		if !ok {
			return nil, false
		}
		r, ok := pathLiterals(or.Right)
		return append(l, r...), ok
	}
	u, ok := pathLiteral(n)
	return []string{u}, ok
}

func pathLiteral(n ast.IsNode) (string, bool) {
	isPath := func(n ast.IsNode) bool {
		a, ok := n.(ast.NodeTypeAccess)
		if !ok || a.Value != schemagen.AttrPath {
			return false
		}
		v, ok := a.Arg.(ast.NodeTypeVariable)
		return ok && v.Name == "resource"
	}
	switch v := n.(type) {
	case ast.NodeTypeEquals:
		if isPath(v.Left) {
			if lit, ok := v.Right.(ast.NodeValue); ok {
				if s, ok := lit.Value.(types.String); ok && !strings.Contains(string(s), "*") {
					return string(s), true
				}
			}
		}
	case ast.NodeTypeLike:
		if isPath(v.Arg) {
			text := strings.Trim(string(v.Value.MarshalCedar()), `"`)
			if strings.HasSuffix(text, "*") && !strings.Contains(strings.TrimSuffix(text, "*"), "*") && !strings.Contains(text, `\`) {
				return text, true
			}
		}
	}
	return "", false
}
