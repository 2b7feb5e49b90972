package testgen

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// predScope is a drawn policy's scope and what it fixes.
type predScope struct {
	principal, action, resource string
	// rkind: the resources the scope allows: "any", "typed", "resource"
	// (k8s::Resource) or "url" (k8s::NonResourceURL).
	rkind string
}

// predTypes are the resource types of drawn scopes, by kind.
var predTypes = map[string][]string{
	"typed":    {"core::pods", "core::secrets", "apps::deployments", "core::configmaps", "core::services", "core::nodes"},
	"resource": {"k8s::Resource"},
	"url":      {"k8s::NonResourceURL"},
}

// scope draws the scope of a policy of tenant t.
func (m PredicateMix) scope(rng *rand.Rand, t int) predScope {
	s := predScope{principal: "principal", action: "action", resource: "resource", rkind: "any"}
	switch rng.IntN(8) {
	case 0, 1:
		s.principal = "principal is " + pick(rng, []string{"k8s::User", "k8s::ServiceAccount", "k8s::Node"})
	case 2:
		s.principal = fmt.Sprintf("principal == k8s::User::%s", lit(pathNamed("principal.username").value(t, 0), false))
	case 3:
		s.principal = fmt.Sprintf("principal in k8s::Group::%s", lit(groupsOf(t)[rng.IntN(2)], false))
	}
	switch rng.IntN(5) {
	case 0, 1:
		s.rkind = "typed"
	case 2:
		s.rkind = "resource"
	case 3:
		s.rkind = "url"
	}
	if s.rkind != "any" {
		s.resource = "resource is " + pick(rng, predTypes[s.rkind])
	}
	verbs := m.Verbs
	if s.rkind == "url" {
		verbs = urlVerbs
	}
	switch rng.IntN(3) {
	case 0:
		s.action = fmt.Sprintf("action == k8s::Action::%q", pick(rng, verbs))
	case 1:
		s.action = fmt.Sprintf("action in [k8s::Action::%q, k8s::Action::%q]", pick(rng, verbs), pick(rng, verbs))
	}
	return s
}

// urlVerbs are verbs of non-resource requests.
var urlVerbs = []string{"get", "post", "delete", "put"}

// pathFor draws a scalar path a policy of scope s reads: when Valid, one
// its resources have.
func (m PredicateMix) pathFor(rng *rand.Rand, s predScope) valuePath {
	for {
		p := pick(rng, valuePaths)
		switch {
		case !m.Valid:
			return p
		case p.on == "typed" && s.rkind != "typed" && s.rkind != "resource",
			p.on == "resource" && s.rkind != "resource",
			p.on == "url" && s.rkind != "url",
			p.on != "principal" && p.on != "any" && p.on != "sa-node" && p.on != "sa" && s.rkind == "any":
			continue
		}
		return p
	}
}

// guarded is pred behind p's guard: always when Valid, else mostly.
func (m PredicateMix) guarded(rng *rand.Rand, p valuePath, pred string) string {
	if p.guard == "" || !m.Valid && rng.IntN(5) == 0 {
		return pred
	}
	return p.guard + " && " + pred
}

// predicate draws one conjunct of a policy of tenant t with scope s:
// selective names the tenant, else a post-filter.
func (m PredicateMix) predicate(rng *rand.Rand, s predScope, t int, selective bool) string {
	if !selective {
		p := m.pathFor(rng, s)
		return m.guarded(rng, p, postFilter(rng, p, t))
	}
	switch r := rng.IntN(20); {
	case r < 12:
		p := m.pathFor(rng, s)
		return m.guarded(rng, p, scalarPredicate(rng, p, t))
	case r < 15:
		return m.setPredicate(rng, t)
	case r < 17 && !m.NoLabels && s.rkind != "url":
		return m.labelPredicate(rng, t)
	case r < 19:
		return entityPredicate(rng, t)
	}
	// A disjunction across paths.
	a, b := m.pathFor(rng, s), m.pathFor(rng, s)
	return fmt.Sprintf("(%s || %s)", m.guarded(rng, a, scalarPredicate(rng, a, t)), m.guarded(rng, b, scalarPredicate(rng, b, t)))
}

// entityPredicate draws an entity test on the principal for tenant t.
func entityPredicate(rng *rand.Rand, t int) string {
	u := pathNamed("principal.username")
	switch rng.IntN(3) {
	case 0:
		return fmt.Sprintf("principal == k8s::User::%s", lit(u.value(t, rng.IntN(2)), false))
	case 1:
		return fmt.Sprintf("principal in k8s::Group::%s", lit(groupsOf(t)[rng.IntN(2)], false))
	}
	return fmt.Sprintf("principal in [k8s::User::%s, k8s::User::%s]", lit(u.value(t, 0), false), lit(u.value(t, 1), false))
}

// policy draws policy i, of tenant t: a scope, one to three conjuncts (the first names
// a tenant when Selective, else mostly), some negated into an `unless`,
// the effect and the enforcement mode.
func (m PredicateMix) policy(rng *rand.Rand, i, t int) string {
	s := m.scope(rng, t)
	forbid := rng.IntN(4) == 0
	var when, unless []string
	for j := range 1 + rng.IntN(3) {
		// A forbid without a selective conjunct would deny most requests.
		selective := j == 0 && (m.Selective || forbid || rng.IntN(6) > 0) || j > 0 && rng.IntN(3) == 0
		c := m.predicate(rng, s, t, selective)
		if neg, ok := negated(c); ok && rng.IntN(5) == 0 {
			unless = append(unless, neg)
			continue
		}
		when = append(when, c)
	}
	effect := "permit"
	if forbid {
		effect = "forbid"
	}
	ann := fmt.Sprintf("@id(\"rp-%d\")\n", i)
	if rng.IntN(12) == 0 {
		ann += "@enforcement(\"audit\")\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s (%s, %s, %s)", ann, effect, s.principal, s.action, s.resource)
	if len(when) > 0 {
		fmt.Fprintf(&b, "\nwhen { %s }", strings.Join(when, " && "))
	}
	if len(unless) > 0 {
		fmt.Fprintf(&b, "\nunless { %s }", strings.Join(unless, " || "))
	}
	b.WriteString(";\n")
	return b.String()
}

// negated is c written for an `unless` that means the same: an equality
// `a == b` (unguarded) as `a != b`.
func negated(c string) (string, bool) {
	if strings.ContainsAny(c, "&|!(") || strings.Count(c, " == ") != 1 || strings.HasPrefix(c, "principal ==") {
		return "", false
	}
	return strings.Replace(c, " == ", " != ", 1), true
}
