package testgen

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Random predicates: policies drawn as conjunctions of predicates whose
// path, kind and constant are each drawn at random, not from named shapes.
// A path is any attribute the index may know at authorization time (the
// principal's username, uid, name, namespace, groups and tags, the
// resource's namespace, name, apiGroup, resource, subresource and path, the
// namespace's labels, context.verb); a kind is an equality, a literal set,
// a `like` pattern (prefix, suffix, infix, both ends), a disjunction on one
// path, containment on a set (contains, containsAny either way round,
// containsAll), an entity `==` or `in`, or a post-filter (`!=`, `has`,
// isEmpty, a pattern that matches almost anything); constants are drawn
// from a tenant's values, and tenants grow with the set, so a request's
// tenant concerns a few policies however large the set.

// PredicateOptions say what a draw of random predicates may hold.
type PredicateOptions struct {
	// Valid: only policies the schema validates (every optional read
	// guarded, every path read on types that have it), as kcedar serve
	// loads them; otherwise reads that fail are drawn too (which a forbid
	// turns into a denial).
	Valid bool
	// Selective: every policy holds a predicate on a tenant's constant;
	// otherwise some have only post-filters.
	Selective bool
	// NoLabels: no namespace labels (serve without a cluster knows none).
	NoLabels bool
	// Templates: the policies' structures (scope, conjuncts, their paths
	// and kinds) are this many random draws, each policy one of them with
	// a tenant's constants, as sets written from templates are (and as
	// the validator checks them: once per structure); 0: every policy a
	// draw of its own.
	Templates int
}

// PredicateMix is one draw of random predicates.
type PredicateMix struct {
	PredicateOptions
	Seed    uint64
	Tenants int
	Keys    []string // the extra and label keys
	Verbs   []string // the verbs policies and requests use
}

// NewPredicateMix draws the keys and verbs of a mix of n policies from seed.
func NewPredicateMix(n int, seed uint64, o PredicateOptions) PredicateMix {
	rng := rand.New(rand.NewPCG(seed, 0x51ed27))
	keys := []string{"dept", "example.com/team", "tier", "cost-center", "ä-ключ"}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	rng.Shuffle(len(verbs), func(i, j int) { verbs[i], verbs[j] = verbs[j], verbs[i] })
	return PredicateMix{PredicateOptions: o, Seed: seed, Tenants: max(4, n/6), Keys: keys[:1+rng.IntN(3)], Verbs: verbs[:3+rng.IntN(len(verbs)-2)]}
}

// RandomPredicates is n policies of the mix drawn from seed.
func RandomPredicates(n int, seed uint64, o PredicateOptions) []string {
	m := NewPredicateMix(n, seed, o)
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]string, n)
	for i := range out {
		t := rng.IntN(m.Tenants)
		draw := rng
		if m.Templates > 0 {
			// The template's draws, with this policy's tenant.
			draw = rand.New(rand.NewPCG(seed, 2+uint64(rng.IntN(m.Templates))))
		}
		out[i] = m.policy(draw, i, t)
	}
	return out
}

// token is tenant t's part of every constant: distinct per tenant, and
// ending where a pattern's literal ends ("t17-"), so that a pattern of one
// tenant matches no other's values. Some are edge cases: empty, a literal
// `*`, unicode.
func token(t int) string {
	switch {
	case t == 3:
		return ""
	case t%89 == 5:
		return fmt.Sprintf("s*%d", t)
	case t%97 == 7:
		return fmt.Sprintf("ü%d", t)
	}
	return fmt.Sprintf("t%d", t)
}

// valuePath is a scalar path and how a tenant's values on it are written:
// head + token + tail.
type valuePath struct {
	expr, guard string // the read, and the `has` test that guards it ("": none needed)
	head        string
	tails       []string
	// where the path exists when Valid: "principal" (every principal),
	// "sa-node", "sa", "typed" (typed resources), "resource" (k8s::Resource),
	// "url" (non-resource URLs), "any".
	on string
}

var valuePaths = []valuePath{
	{expr: "principal.username", head: "u-", tails: []string{"-0", "-1"}, on: "principal"},
	{expr: "principal.uid", guard: "principal has uid", head: "uid-", tails: []string{"-0", "-1"}, on: "principal"},
	{expr: "principal.name", guard: "principal has name", head: "pool-", tails: []string{"-0", "-1"}, on: "sa-node"},
	{expr: "principal.namespace", guard: "principal has namespace", head: "sa-", tails: []string{"-x"}, on: "sa"},
	{expr: "resource.namespace", guard: "resource has namespace", head: "ns-", tails: []string{"-prod", "-dev"}, on: "typed"},
	{expr: "resource.name", guard: "resource has name", head: "web-", tails: []string{"-0", "-db"}, on: "typed"},
	{expr: "resource.apiGroup", guard: "resource has apiGroup", head: "api.", tails: []string{".tenant.example.com"}, on: "resource"},
	{expr: "resource.resource", guard: "resource has resource", head: "widgets-", tails: []string{"-a", "-b"}, on: "resource"},
	{expr: "resource.subresource", guard: "resource has subresource", head: "sub-", tails: []string{"-s"}, on: "resource"},
	{expr: "resource.path", guard: "resource has path", head: "/apis/", tails: []string{"/x", "/healthz"}, on: "url"},
	{expr: "context.verb", head: "frob-", tails: []string{"-v"}, on: "any"},
}

// value is tenant t's value on p (its tail i).
func (p valuePath) value(t, i int) string { return p.head + token(t) + p.tails[i%len(p.tails)] }

// lit is s as a Cedar string literal; pattern escapes its `*`.
func lit(s string, pattern bool) string { return cedarString(s, pattern) }

// patternOf writes the pattern of parts (literals) joined by wildcards,
// with a leading and a trailing one as asked.
func patternOf(lead, trail bool, parts ...string) string {
	var b strings.Builder
	b.WriteByte('"')
	if lead {
		b.WriteByte('*')
	}
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('*')
		}
		b.WriteString(strings.Trim(lit(p, true), `"`))
	}
	if trail {
		b.WriteByte('*')
	}
	b.WriteByte('"')
	return b.String()
}

// scalarPredicate draws a predicate on p for tenant t: an equality, a
// literal set, a pattern (prefix, suffix, infix, both ends), or a
// disjunction of two on the path; selective: it names the tenant.
func scalarPredicate(rng *rand.Rand, p valuePath, t int) string {
	v, tok, tail := p.value(t, rng.IntN(2)), token(t), p.tails[rng.IntN(len(p.tails))]
	other := p.value(t+1+rng.IntN(5), 0)
	switch rng.IntN(9) {
	case 0, 1:
		return fmt.Sprintf("%s == %s", p.expr, lit(v, false))
	case 2:
		return fmt.Sprintf("[%s, %s].contains(%s)", lit(v, false), lit(other, false), p.expr)
	case 3:
		return fmt.Sprintf("%s like %s", p.expr, patternOf(false, true, p.head+tok))
	case 4:
		return fmt.Sprintf("%s like %s", p.expr, patternOf(true, false, tok+tail))
	case 5:
		return fmt.Sprintf("%s like %s", p.expr, patternOf(true, true, tok+tail[:min(len(tail), 1)]))
	case 6:
		return fmt.Sprintf("%s like %s", p.expr, patternOf(false, false, p.head, tok+tail))
	case 7:
		return fmt.Sprintf("(%s == %s || %s like %s)", p.expr, lit(other, false), p.expr, patternOf(false, true, p.head+tok))
	}
	return fmt.Sprintf("%s like %s", p.expr, lit(v, true)) // no wildcard: an equality
}

// postFilter draws a predicate that matches almost every value of p (the
// index checks it after the lookup, or leaves it to evaluation).
func postFilter(rng *rand.Rand, p valuePath, t int) string {
	switch rng.IntN(4) {
	case 0:
		return fmt.Sprintf("%s != %s", p.expr, lit(p.value(t+7, 0), false))
	case 1:
		return fmt.Sprintf("%s like %s", p.expr, patternOf(false, true, p.head))
	case 2:
		return fmt.Sprintf("%s like \"*\"", p.expr)
	}
	if p.guard != "" {
		return p.guard
	}
	return fmt.Sprintf("!(%s == \"\")", p.expr)
}

// groupsOf are tenant t's groups.
func groupsOf(t int) []string {
	return []string{"grp-" + token(t), "grp-" + token(t) + "-admins"}
}

// setPredicate draws a predicate on a set-valued path for tenant t: the
// principal's groups or a tag of its extra (values: the token, and the
// token with "-x").
func (m PredicateMix) setPredicate(rng *rand.Rand, t int) string {
	set, vals, guard := "principal.groups", groupsOf(t), ""
	if rng.IntN(2) == 0 {
		k := pick(rng, m.Keys)
		set, vals = fmt.Sprintf("principal.getTag(%s)", lit(k, false)), []string{token(t), token(t) + "-x"}
		guard = fmt.Sprintf("principal.hasTag(%s) && ", lit(k, false))
		if !m.Valid && rng.IntN(5) == 0 {
			guard = "" // getTag fails without the tag
		}
	}
	// b: another value of the tenant, or one nobody has.
	a, b := lit(vals[rng.IntN(2)], false), lit(pick(rng, []string{"zz-0", vals[0], vals[1]}), false)
	switch rng.IntN(5) {
	case 0:
		return fmt.Sprintf("%s%s.contains(%s)", guard, set, a)
	case 1:
		return fmt.Sprintf("%s%s.containsAny([%s, %s])", guard, set, a, b)
	case 2:
		return fmt.Sprintf("%s[%s, %s].containsAny(%s)", guard, a, b, set)
	case 3:
		return fmt.Sprintf("%s%s.containsAll([%s])", guard, set, a)
	}
	return fmt.Sprintf("%s(%s.contains(%s) || %s.contains(%s))", guard, set, a, set, b)
}

// nsLabelsGuard guards a read of the namespace's label k.
func nsLabelsGuard(k string) string {
	return fmt.Sprintf("resource has namespaceObject && resource.namespaceObject.metadata has labels && %s.hasTag(%s) && ", nsLabels, lit(k, false))
}

// labelPredicate draws a predicate on a label of the namespace for tenant
// t: equal to its token, among a set, or like a pattern of it.
func (m PredicateMix) labelPredicate(rng *rand.Rand, t int) string {
	k := pick(rng, m.Keys)
	read := fmt.Sprintf("%s.getTag(%s)", nsLabels, lit(k, false))
	guard := nsLabelsGuard(k)
	if !m.Valid && rng.IntN(5) == 0 {
		guard = ""
	}
	switch rng.IntN(4) {
	case 0:
		return fmt.Sprintf("%s%s == %s", guard, read, lit(token(t), false))
	case 1:
		return fmt.Sprintf("%s[%s, \"zz\"].contains(%s)", guard, lit(token(t), false), read)
	case 2:
		return fmt.Sprintf("%s%s like %s", guard, read, patternOf(false, true, token(t)))
	}
	return fmt.Sprintf("%s%s.hasTag(%s)", strings.TrimSuffix(guard, fmt.Sprintf("%s.hasTag(%s) && ", nsLabels, lit(k, false))), nsLabels, lit("k-"+token(t), false))
}
