package generate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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
// with -2, -3... after the first of the same id (in the policies' order).
func assignIDs(ps []*policy) {
	seen := map[string]int{}
	for _, p := range ps {
		id := "generated/" + p.subject.slug() + "/" + p.target.slug() + "-" + strings.Join(p.verbs, "-")
		seen[id]++
		if n := seen[id]; n > 1 {
			id += "-" + strconv.Itoa(n)
		}
		p.id = id
	}
}

// cedar is the policy's text (kcedar fmt lays it out).
func (p *policy) cedar(s *schemagen.Schema, audit bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// %s: %s %s%s%s\n", p.subject.describe(), strings.Join(p.verbs, ", "), p.target.describe(), p.whereText(), p.namesText())
	fmt.Fprintf(&b, "// evidence: %s\n", p.ev.describe())
	fmt.Fprintf(&b, "@id(%s)\n", cedarlex.Quote(p.id))
	if audit {
		b.WriteString("@enforcement(\"audit\")\n")
	}
	fmt.Fprintf(&b, "permit (\n  %s,\n  %s,\n  resource is %s\n)", p.subject.scope(), p.actionScope(), p.entity)
	if conds := p.conditions(s); len(conds) > 0 {
		fmt.Fprintf(&b, "\nwhen {\n  %s\n}", strings.Join(conds, " &&\n  "))
	}
	b.WriteString(";\n")
	return b.String()
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
	case len(p.names.names) == 0:
		return ", naming no object"
	}
	return ", named " + strings.Join(p.names.names, ", ")
}

// paths are a non-resource policy's paths: its namespaces field holds them
// (non-resource requests have no namespace).
func (p *policy) paths() []string { return []string{p.path} }

// allNamespaces reports whether the policy has no namespace condition.
func (p *policy) allNamespaces() bool {
	return len(p.namespaces) == 0 || slices.Contains(p.namespaces, "")
}

// actionScope is the policy's action scope.
func (p *policy) actionScope() string {
	if p.class != verbScope {
		return "action"
	}
	return actionIn(p.verbs)
}

// actionIn is `action == A` or `action in [A, B]`.
func actionIn(verbs []string) string {
	uids := make([]string, len(verbs))
	for i, v := range verbs {
		uid := schemagen.ActionUID(v)
		uids[i] = string(uid.Type) + "::" + cedarlex.Quote(string(uid.ID))
	}
	if len(uids) == 1 {
		return "action == " + uids[0]
	}
	return "action in [" + strings.Join(uids, ", ") + "]"
}

// conditions are the policy's when conditions.
func (p *policy) conditions(s *schemagen.Schema) []string {
	var conds []string
	switch p.class {
	case verbActionCond:
		conds = append(conds, actionIn(p.verbs))
	case verbCustom:
		conds = append(conds, inList("context."+schemagen.AttrVerb, p.verbs))
	}
	switch p.entity {
	case string(schemagen.NonResourceURLType):
		return append(conds, inList("resource.path", []string{p.path}))
	case string(schemagen.ResourceType):
		conds = append(conds, inList("resource.apiGroup", []string{p.group}), inList("resource.resource", []string{p.resource}))
		if p.subres == "" {
			conds = append(conds, "!(resource has subresource)")
		} else {
			conds = append(conds, "resource has subresource", inList("resource.subresource", []string{p.subres}))
		}
		return p.scopeConditions(conds, true)
	}
	r, _ := s.Lookup(p.group, p.resource, p.subres)
	if r != nil && r.AnySubresource {
		conds = append(conds, inList("resource.subresource", []string{p.subres}))
	}
	return p.scopeConditions(conds, r == nil || !r.Namespaced)
}

// scopeConditions adds the namespace and name conditions; optional: the
// entity may lack namespace and name.
func (p *policy) scopeConditions(conds []string, optional bool) []string {
	if !p.allNamespaces() {
		c := inList("resource.namespace", p.namespaces)
		if optional {
			c = "resource has namespace && " + c
		}
		conds = append(conds, c)
	}
	if c := p.names.condition(optional); c != "" {
		conds = append(conds, c)
	}
	return conds
}

// condition is the name rule as a condition ("" for none).
func (r nameRule) condition(optional bool) string {
	if r.any && !r.strict {
		return ""
	}
	if len(r.names) == 0 {
		return "!resource." + schemagen.AttrNamed
	}
	c := "resource." + schemagen.AttrNamed + " && "
	if optional {
		c += "resource has name && "
	}
	c += inList("resource.name", r.names)
	if r.unnamed {
		return "(!resource." + schemagen.AttrNamed + " || (" + c + "))"
	}
	return c
}

// inList is `x == "a"` or `["a", "b"].contains(x)`.
func inList(x string, vals []string) string {
	if len(vals) == 1 {
		return x + " == " + cedarlex.Quote(vals[0])
	}
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = cedarlex.Quote(v)
	}
	return "[" + strings.Join(q, ", ") + "].contains(" + x + ")"
}
