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
	q := CandidateQuery{Principal: entities.PrincipalUID(user.Name), Groups: groups, Verb: pick(rng, append(slices.Clone(genVerbs), "*")),
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
		fmt.Fprintf(&b, "  %s audit=%v\n", p.Compiled.MarshalCedar(), p.IsAudit())
	}
	return b.String()
}
