package engine

import (
	"context"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// Over policies drawn as random predicates (testgen.RandomPredicates: each
// conjunct's path, kind and constant drawn at random, not named shapes;
// forbids and permits, audit mode, `unless`, reads that fail on absent
// attributes), deciding with the index gives exactly the outcome of
// deciding with every policy as a candidate, and for fully known requests
// the one-phase oracle's, for requests of users, ServiceAccounts and nodes
// with and without a uid or extra, on typed and unknown resources with
// subresources, non-resource URLs, custom verbs, open names and namespaces,
// namespaces with, without and of unknown labels.
func TestIndexDifferentialRandomPredicates(t *testing.T) {
	const policies = 400
	requests := 3000
	if testing.Short() || raceEnabled {
		requests = 600
	}
	for seed := uint64(1); seed <= 6; seed++ {
		valid, selective := seed%2 == 0, seed%3 == 0
		set, reqs, ns := predicatesCase(t, policies, requests, seed, valid, selective)
		stats := comparePlatform(t, set, set.Unindexed(), reqs, ns, true)
		t.Logf("seed %d (valid %v, selective %v), %d policies: %v", seed, valid, selective, policies, stats)
		for _, k := range []string{"Allow", "Deny", "NoOpinion", "one-phase"} {
			if stats[k] < requests/100 {
				t.Errorf("seed %d: only %d %s outcomes: the request generator is too weak", seed, stats[k], k)
			}
		}
	}
}

// The index narrows random predicates: a request that names its object
// meets few of the policies, and a request meets few policies left to their
// verbs and types (a selective one only when its tenant's predicate is a
// verb, which picks its bucket).
func TestIndexNarrowsRandomPredicates(t *testing.T) {
	set, reqs, _ := predicatesCase(t, 6000, 600, 7, true, true)
	// Only policies whose selective predicate is a (custom) verb are left
	// to their verbs and types, and a request meets few of them.
	if r := cedarlang.Unnarrowed(set.Policies); r.Max > 3 {
		t.Errorf("%d policies only their verbs and types narrow, %d of them for %s %s, such as %s", len(r.Policies), r.Max, r.Verb, r.ResourceType, r.Policies[0].Text())
	}
	s := embeddedschema.Schema(t)
	most, total, n := 0, 0, 0
	for _, req := range reqs {
		if req.Verb == entities.Wildcard || req.ResourceRequest && (req.Name == "" || req.Namespace == "") {
			continue // open requests meet every policy keyed on the open value
		}
		q := cedarlang.NewCandidateQuery(req, entities.ResolveTarget(s, req), req.Verb)
		q.NamespaceLabels = cedarlang.QueryLabels{State: cedarlang.LabelsKnown}
		c := len(set.Candidates(q))
		most, total, n = max(most, c), total+c, n+1
	}
	if most > 60 {
		t.Errorf("a request meets %d of 6000 random-predicate policies", most)
	}
	t.Logf("%d requests: at most %d candidates of 6000, %.1f on average", n, most, float64(total)/float64(max(n, 1)))
}

func predicatesCase(t *testing.T, policies, requests int, seed uint64, valid, selective bool) (*cedarlang.PolicySet, []*entities.Request, platformNamespaces) {
	t.Helper()
	o := testgen.PredicateOptions{Valid: valid, Selective: selective}
	set := policySetOf(t, "random", testgen.RandomPredicates(policies, seed, o))
	m := testgen.NewPredicateMix(policies, seed, o)
	return set, testgen.PredicateRequests(policies, requests, seed, o), platformNamespaces(testgen.PredicateNamespaces(m))
}

// A folded decision (nothing evaluates conditions) of an open request (a
// list across names or namespaces) evaluates no more of the random
// predicates than a named request does: a policy keyed on the open value is
// found by its secondary key (index.go, chooseKeys), a permit that can only
// leave a residual is not read, and the first forbid that denies settles
// the answer.
func TestIndexNarrowsOpenRequestsFolded(t *testing.T) {
	const policies = 20000
	seed, o := uint64(1<<20+1), testgen.PredicateOptions{Valid: true, Selective: true, NoLabels: true, Templates: 300}
	e := NewEngine(embeddedschema.Schema(t), policySetOf(t, "random", testgen.RandomPredicates(policies, seed, o)), EngineOptions{})
	most, total, n := 0, 0, 0
	for _, req := range testgen.PredicateRequests(policies, 4000, seed, o) {
		if req.Verb == entities.Wildcard || !(req.ResourceRequest && (req.Name == "" || req.Namespace == "")) {
			continue
		}
		req.UnconditionalOnly = true
		var st Stats
		e.AuthorizeWithStats(context.Background(), req, &st)
		most, total, n = max(most, st.Candidates), total+st.Candidates, n+1
	}
	if most > 20 {
		t.Errorf("a folded open request evaluates %d of %d random-predicate policies", most, policies)
	}
	t.Logf("%d open requests: at most %d candidates of %d evaluated, %.1f on average", n, most, policies, float64(total)/float64(max(n, 1)))
}
