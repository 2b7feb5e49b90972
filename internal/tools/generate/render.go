package generate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// verbClass is how a policy names its verbs: in the action scope, as a
// condition on the action (declared verbs the target's type does not list
// for every principal), or on context.verb (verbs the schema does not
// declare).
type verbClass int

const (
	verbScope verbClass = iota
	verbActionCond
	verbCustom
)

// classOf is the class of verb on t, as kcedar rbac convert chooses it.
func classOf(s *schemagen.Schema, t target, verb string) verbClass {
	if !slices.Contains(s.Verbs, verb) {
		return verbCustom
	}
	applies := schemagen.AppliesToEveryPrincipal(verb)
	switch t.entity {
	case string(schemagen.NonResourceURLType):
		applies = applies && schemagen.IsNonResourceAction(verb)
	case string(schemagen.ResourceType):
	default:
		r, ok := s.Lookup(t.group, t.resource, t.subres)
		applies = applies && ok && slices.Contains(r.Verbs, verb)
	}
	if applies {
		return verbScope
	}
	return verbActionCond
}

// slug is the target in policy ids: the resource, with its group after a
// dot and its subresource after a dash (deployments.apps-scale), or
// nonresource.
func (t target) slug() string {
	if t.entity == string(schemagen.NonResourceURLType) {
		return "nonresource"
	}
	s := t.resource
	if t.group != "" {
		s += "." + t.group
	}
	if t.subres != "" {
		s += "-" + t.subres
	}
	return s
}

// describe is the target in comments.
func (t target) describe() string {
	if t.entity == string(schemagen.NonResourceURLType) {
		return "non-resource URLs"
	}
	s := t.resource
	if t.group != "" {
		s += "." + t.group
	}
	if t.subres != "" {
		s += "/" + t.subres
	}
	return s
}

// assignIDs gives every policy a stable id: generated/<subject>/<target>-<verbs>,
// with -2, -3... after the first of the same id (in the policies' order),
// and further numbers past any id already given (names can make one
// policy's id another's with a number).
func assignIDs(ps []*policy) {
	seen := map[string]int{}
	used := map[string]bool{}
	for _, p := range ps {
		base := "generated/" + p.subject.slug() + "/" + p.target.slug() + "-" + strings.Join(p.verbs, "-")
		seen[base]++
		n := seen[base]
		id := base
		if n > 1 {
			id = base + "-" + strconv.Itoa(n)
		}
		for used[id] {
			n++
			id = base + "-" + strconv.Itoa(n)
		}
		seen[base], used[id], p.id = n, true, id
	}
}

// build is the policy to write: its comments (who, what and the
// evidence), @id, with audit @enforcement("audit"), scope and conditions.
func (p *policy) build(s *schemagen.Schema, audit bool) *cedarlex.Policy {
	ann := []cedarlex.Annotation{{Key: "id", Value: p.id}}
	if audit {
		ann = append(ann, cedarlex.Annotation{Key: cedarlang.AnnotationEnforcement, Value: cedarlang.Audit.String()})
	}
	comments := []string{
		fmt.Sprintf("%s: %s %s%s%s", p.subject.describe(), strings.Join(p.verbs, ", "), p.target.describe(), p.whereText(), p.namesText()),
	}
	if g := p.names.generalizedText(); g != "" {
		comments = append(comments, g)
	}
	return &cedarlex.Policy{
		Comments:    append(comments, "evidence: "+p.ev.describe()),
		Annotations: ann,
		Principal:   p.subject.scope(),
		Action:      p.actionScope(),
		Resource:    cedarlex.ScopeIs(types.EntityType(p.entity)),
		When:        p.conditions(s),
	}
}

// describe is the evidence in a comment.
func (e *evidence) describe() string {
	noun := "requests"
	if e.count == 1 {
		noun = "request"
	}
	if e.first.IsZero() {
		return fmt.Sprintf("%d %s (times not logged)", e.count, noun)
	}
	return fmt.Sprintf("%d %s, first seen %s, last seen %s", e.count, noun,
		e.first.UTC().Format(time.RFC3339), e.last.UTC().Format(time.RFC3339))
}

// whereText is the namespaces in a comment.
func (p *policy) whereText() string {
	if p.entity == string(schemagen.NonResourceURLType) {
		return " " + strings.Join(p.paths(), ", ")
	}
	if p.allNamespaces() {
		return ""
	}
	return " in " + strings.Join(p.namespaces, ", ")
}

// namesText is the name rule in a comment.
func (p *policy) namesText() string {
	switch {
	case p.entity == string(schemagen.NonResourceURLType):
		return ""
	case p.names.any && p.names.strict:
		return ", naming no object"
	case p.names.any:
		return ""
	case len(p.names.names)+len(p.names.patterns) == 0:
		return ", naming no object"
	}
	named := slices.Clone(p.names.names)
	for _, pat := range p.names.patterns {
		named = append(named, pat.text())
	}
	return ", named " + strings.Join(named, ", ")
}

// generalizedText is the comment on the rule's generalized names: each
// pattern, why, and a name it stands for ("" without patterns).
func (r nameRule) generalizedText() string {
	if len(r.patterns) == 0 {
		return ""
	}
	parts := make([]string, len(r.patterns))
	for i, p := range r.patterns {
		parts[i] = fmt.Sprintf("%s (%s, e.g. %s)", p.text(), p.why, p.example)
	}
	return "names generalized (--generalize-names=none keeps them as requested): " + strings.Join(parts, "; ")
}

// paths are a non-resource policy's paths: its namespaces field holds them
// (non-resource requests have no namespace).
func (p *policy) paths() []string { return []string{p.path} }

// allNamespaces reports whether the policy has no namespace condition.
func (p *policy) allNamespaces() bool {
	return len(p.namespaces) == 0 || slices.Contains(p.namespaces, "")
}

// actionScope is the policy's action scope.
func (p *policy) actionScope() cedarlex.Scope {
	if p.class != verbScope {
		return cedarlex.Scope{}
	}
	uids := actionUIDs(p.verbs)
	if len(uids) == 1 {
		return cedarlex.ScopeEq(uids[0])
	}
	return cedarlex.ScopeInSet(uids)
}

// actionUIDs are the actions of verbs.
func actionUIDs(verbs []string) []types.EntityUID {
	uids := make([]types.EntityUID, len(verbs))
	for i, v := range verbs {
		uids[i] = schemagen.ActionUID(v)
	}
	return uids
}

// actionIn is the condition `action == A` or `action in [A, B]`.
func actionIn(verbs []string) cedarlex.Expr {
	uids := actionUIDs(verbs)
	if len(uids) == 1 {
		return cedarlex.ActionVar().Eq(cedarlex.Entity(uids[0]))
	}
	elems := make([]cedarlex.Expr, len(uids))
	for i, uid := range uids {
		elems[i] = cedarlex.Entity(uid)
	}
	return cedarlex.ActionVar().In(cedarlex.Set(elems...))
}

// attr is resource.<name>.
func attr(name string) cedarlex.Expr { return cedarlex.Resource().Attr(name) }

// has is `resource has <name>`.
func has(name string) cedarlex.Expr { return cedarlex.Resource().Has(name) }

// conditions are the policy's when conditions.
func (p *policy) conditions(s *schemagen.Schema) []cedarlex.Expr {
	var conds []cedarlex.Expr
	switch p.class {
	case verbActionCond:
		conds = append(conds, actionIn(p.verbs))
	case verbCustom:
		conds = append(conds, cedarlex.OneOf(cedarlex.Context().Attr(schemagen.AttrVerb), p.verbs))
	}
	switch p.entity {
	case string(schemagen.NonResourceURLType):
		return append(conds, cedarlex.OneOf(attr(schemagen.AttrPath), []string{p.path}))
	case string(schemagen.ResourceType):
		conds = append(conds, cedarlex.OneOf(attr(schemagen.AttrAPIGroup), []string{p.group}),
			cedarlex.OneOf(attr(schemagen.AttrResource), []string{p.resource}))
		if p.subres == "" {
			conds = append(conds, cedarlex.Not(has(schemagen.AttrSubresource)))
		} else {
			conds = append(conds, has(schemagen.AttrSubresource), cedarlex.OneOf(attr(schemagen.AttrSubresource), []string{p.subres}))
		}
		return p.scopeConditions(conds, true)
	}
	r, _ := s.Lookup(p.group, p.resource, p.subres)
	if r != nil && r.AnySubresource {
		conds = append(conds, cedarlex.OneOf(attr(schemagen.AttrSubresource), []string{p.subres}))
	}
	return p.scopeConditions(conds, r == nil || !r.Namespaced)
}

// scopeConditions adds the namespace and name conditions; optional: the
// entity may lack namespace and name.
func (p *policy) scopeConditions(conds []cedarlex.Expr, optional bool) []cedarlex.Expr {
	if !p.allNamespaces() {
		c := cedarlex.OneOf(attr(schemagen.AttrNamespace), p.namespaces)
		if optional {
			c = cedarlex.And(has(schemagen.AttrNamespace), c)
		}
		conds = append(conds, c)
	}
	if c, ok := p.names.condition(optional); ok {
		conds = append(conds, c)
	}
	return conds
}

// condition is the name rule as a condition (false for none).
func (r nameRule) condition(optional bool) (cedarlex.Expr, bool) {
	if r.any && !r.strict {
		return cedarlex.Expr{}, false
	}
	if len(r.names)+len(r.patterns) == 0 {
		return cedarlex.Not(attr(schemagen.AttrNamed)), true
	}
	c := []cedarlex.Expr{attr(schemagen.AttrNamed)}
	if optional {
		c = append(c, has(schemagen.AttrName))
	}
	var alts []cedarlex.Expr
	if len(r.names) > 0 {
		alts = append(alts, cedarlex.OneOf(attr(schemagen.AttrName), r.names))
	}
	for _, p := range r.patterns {
		alts = append(alts, attr(schemagen.AttrName).Like(p.literals...))
	}
	named := cedarlex.And(append(c, cedarlex.Or(alts...))...)
	if r.unnamed {
		return cedarlex.Or(cedarlex.Not(attr(schemagen.AttrNamed)), named), true
	}
	return named, true
}
