package cedarlang

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
)

// A Cursor is Candidates split, not narrowed further: over generated sets
// (some policies in audit mode) and requests, its eager policies are exactly
// the forbids and audit policies among the candidates, and its permits,
// read one at a time, exactly the rest, both in policy order: with the
// index, with its hashes cut short (collisions everywhere), and without one.
func TestCursorIsCandidatesSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 5))
	builds := map[string]func([]*Policy) *index{
		"index":      buildIndex,
		"collisions": func(ps []*Policy) *index { return buildIndexMasked(ps, 0x7, 0x3) },
		"unindexed":  func([]*Policy) *index { return nil },
	}
	cases, permits := 0, 0
	for s := 0; s < 120; s++ {
		gen, _ := genPolicySet(t, rng, 1+rng.IntN(60))
		for _, p := range gen.Policies {
			if rng.IntN(5) == 0 {
				p.Enforcement = Audit
			}
		}
		for _, name := range slices.Sorted(maps.Keys(builds)) {
			set := *gen
			set.index = builds[name](set.Policies)
			for r := 0; r < 30; r++ {
				q := genQuery(rng)
				want := set.Candidates(q)
				wantEager := slices.DeleteFunc(slices.Clone(want), lazyPolicy)
				wantLazy := slices.DeleteFunc(slices.Clone(want), func(p *Policy) bool { return !lazyPolicy(p) })
				cur := set.Lookup(q)
				empty := cur.Empty()
				eager, lazy := cur.Eager, cur.Rest()
				permits += len(lazy)
				if empty != (len(want) == 0) {
					t.Fatalf("%s, set %d, request %+v: empty %v, candidates %v", name, s, q, empty, policyIDs(want))
				}
				if !slices.Equal(policyIDs(eager), policyIDs(wantEager)) || !slices.Equal(policyIDs(lazy), policyIDs(wantLazy)) ||
					slices.ContainsFunc(eager, lazyPolicy) || slices.ContainsFunc(lazy, func(p *Policy) bool { return !lazyPolicy(p) }) {
					t.Fatalf("%s, set %d, request %+v:\ncandidates %v\ncursor eager %v, permits %v\n%s", name, s, q, policyIDs(want), policyIDs(eager), policyIDs(lazy), describeSet(&set))
				}
				cases++
			}
		}
	}
	if permits < cases {
		t.Fatalf("the generator is too weak: %d permits over %d cases", permits, cases)
	}
}

// genQuery draws a request description over the names genPolicySet uses.
func genQuery(rng *rand.Rand) CandidateQuery {
	var groups []string
	for _, g := range append(slices.Clone(genGroups), "g4") {
		if rng.IntN(3) == 0 {
			groups = append(groups, g)
		}
	}
	user := entities.UserInfo{Name: pick(rng, genUsers), Groups: groups}
	q := CandidateQuery{Principal: entities.PrincipalUID(user.Name, groups), Groups: groups, Verb: pick(rng, append(slices.Clone(genVerbs), "*")),
		ResourceType: types.EntityType(pick(rng, genTypes))}
	value := func(vals ...string) QueryValue {
		switch n := rng.IntN(len(vals) + 2); {
		case n == len(vals):
			return QueryValue{}
		case n == len(vals)+1:
			return openValue
		default:
			return known(vals[n])
		}
	}
	q.Namespace, q.Name, q.APIGroup = value("n1", "n2"), value("x", "y"), value("apps", "")
	switch q.Principal.Type {
	case "k8s::ServiceAccount":
		ns, name, _ := entities.ServiceAccountName(user.Name)
		q.PrincipalNamespace, q.PrincipalName = known(ns), known(name)
	case "k8s::Node":
		q.PrincipalName = known(strings.TrimPrefix(user.Name, "system:node:"))
	}
	return q
}

func describeSet(set *PolicySet) string {
	var b strings.Builder
	for _, p := range set.Policies {
		fmt.Fprintf(&b, "  %s audit=%v\n", p.Text(), p.IsAudit())
	}
	return b.String()
}

// A request that leaves an attribute open (a list across namespaces or
// names, a rules review's every path) finds every policy that matches it for
// some value of that attribute, or fails for a forbid: over generated sets,
// each request is checked against the policies evaluated with each value of
// a universe that holds every literal the generator writes (and others).
func TestIndexOpenValuesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 9))
	universe := map[string][]string{
		"namespace": {"n1", "n2", "ns1", "n10", "zz"},
		"name":      {"x", "y", "app-1", "zz"},
		"path":      {"/metrics", "/apis/x", "/healthz/ready", "/h", "/zz"},
	}
	cases, found := 0, 0
	for s := 0; s < 150; s++ {
		set, _ := genPolicySet(t, rng, 1+rng.IntN(40))
		for r := 0; r < 20; r++ {
			q := genQuery(rng)
			attr := pick(rng, []string{"namespace", "name", "path"})
			if attr == "path" {
				q.ResourceType = "k8s::NonResourceURL"
				q.Namespace, q.Name, q.APIGroup = QueryValue{}, QueryValue{}, QueryValue{}
			}
			// One open attribute: the others known or absent.
			for _, qv := range []*QueryValue{&q.Namespace, &q.Name, &q.APIGroup} {
				if qv.Open {
					*qv = known("zz")
				}
			}
			*map[string]*QueryValue{"namespace": &q.Namespace, "name": &q.Name, "path": &q.Path}[attr] = openValue
			if q.Verb == "*" {
				q.Verb = "get"
			}
			candidates := set.Candidates(q)
			checkSkippedAreResidualOnly(t, set, q, attr, universe[attr])
			for _, v := range universe[attr] {
				ents, principal, act, resource := queryEntities(q, attr, v)
				for _, p := range set.Policies {
					holds, err := evaluateOne(p, ents, principal, act, resource)
					if !holds && (err == nil || p.Effect != types.Forbid) {
						continue
					}
					found++
					if !slices.Contains(candidates, p) {
						t.Fatalf("set %d: %s matches with %s %q (err %v) but is not a candidate of %+v: %v\n%s", s, p.ID, attr, v, err, q, policyIDs(candidates), describeSet(set))
					}
				}
			}
			cases++
		}
	}
	if found < cases/4 {
		t.Fatalf("the generator is too weak: %d matches in %d cases", found, cases)
	}
}

// queryEntities is the request q describes with its open attribute set to
// v, as Cedar data.
func queryEntities(q CandidateQuery, attr, v string) (*entities.Entities, types.EntityUID, types.EntityUID, types.EntityUID) {
	attrs := types.RecordMap{types.String(attr): types.String(v)}
	for name, qv := range map[string]QueryValue{"namespace": q.Namespace, "name": q.Name, "apiGroup": q.APIGroup, "path": q.Path} {
		if qv.Has && !qv.Open {
			attrs[types.String(name)] = types.String(qv.Value)
		}
	}
	user := string(q.Principal.ID)
	principal := entities.PrincipalEntity(entities.UserInfo{Name: user, Groups: q.Groups})
	resource := types.Entity{UID: types.NewEntityUID(q.ResourceType, ""), Attributes: types.NewRecord(attrs)}
	act := types.NewEntityUID("k8s::Action", types.String(q.Verb))
	return &entities.Entities{Principal: principal, Resource: resource}, principal.UID, act, resource.UID
}

// checkSkippedAreResidualOnly: every permit a folded lookup leaves out of
// q's candidates (q leaving attr open) fails to match for some value of
// attr, so partial evaluation cannot find it satisfied outright.
func checkSkippedAreResidualOnly(t *testing.T, set *PolicySet, q CandidateQuery, attr string, values []string) {
	t.Helper()
	q.SkipResidualOnly = true
	kept := set.Lookup(q).Rest()
	for _, p := range set.Candidates(q) {
		if !lazyPolicy(p) || slices.Contains(kept, p) {
			continue
		}
		always := true
		for _, v := range values {
			ents, principal, act, resource := queryEntities(q, attr, v)
			if holds, _ := evaluateOne(p, ents, principal, act, resource); !holds {
				always = false
			}
		}
		if always {
			t.Fatalf("%s matches for every %s but a folded lookup of %+v leaves it out\n%s", p.ID, attr, q, describeSet(set))
		}
	}
}
