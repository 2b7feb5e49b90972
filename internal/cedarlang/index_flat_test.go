package cedarlang_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// A lookup reads few policies it then rejects, however large the set, for
// the load test's random and fifth workloads: the forbids and audit-mode
// policies it reads in full are nearly all candidates, and a request that
// names its object meets few candidates. In particular a folded lookup
// (CandidateQuery.SkipResidualOnly) of a request that leaves a resource
// value open (a list across names or namespaces) does not read the
// audit-mode permits only that open value finds, which it would drop: in
// the random set, about one policy in three hundred is an audit permit
// keyed only on a resource's name, found by every request with an open
// name. (A forbid keyed only on the open value is a candidate: its
// residual denies.)
func TestLookupReadsFewPoliciesItRejects(t *testing.T) {
	const n = 30000
	s := schematest.Schema()
	seed, o := uint64(1<<20+1), testgen.PredicateOptions{Valid: true, Selective: true, NoLabels: true, Templates: 300}
	sets := []struct {
		name     string
		policies []string
		requests []*entities.Request
	}{
		{"random", testgen.RandomPredicates(n, seed, o), testgen.PredicateRequests(n, 3000, seed, o)},
		{"fifth", testgen.Fifth(n), testgen.FifthRequests(n, 3000)},
	}
	for _, set := range sets {
		ps := parseChunked(t, set.name, set.policies)
		mostRejected, mostCandidates, open := 0, 0, 0
		for _, r := range set.requests {
			for _, verb := range entities.Verbs(s, r) {
				q := cedarlang.NewCandidateQuery(r, entities.ResolveTarget(s, r), verb)
				q.SkipResidualOnly = true
				c := ps.Lookup(q)
				mostRejected = max(mostRejected, cedarlang.EagerReadForTest(c)-len(c.Eager))
				c.Release()
				if q.Name.Open || q.Namespace.Open {
					open++
					continue // every policy keyed on the open value is a candidate
				}
				mostCandidates = max(mostCandidates, len(ps.Candidates(q)))
			}
		}
		t.Logf("%s, %d policies: a folded lookup reads at most %d policies it rejects; a request naming its object meets at most %d candidates (%d open requests)", set.name, n, mostRejected, mostCandidates, open)
		if mostRejected > 16 || mostCandidates > 24 {
			t.Errorf("%s, %d policies: a folded lookup reads %d policies it rejects, a request naming its object meets %d candidates", set.name, n, mostRejected, mostCandidates)
		}
		if set.name == "random" && open < len(set.requests)/10 {
			t.Errorf("only %d of %d random requests leave a value open", open, len(set.requests))
		}
	}
}

// parseChunked parses policies as a set, in files of 10,000.
func parseChunked(t *testing.T, name string, policies []string) *cedarlang.PolicySet {
	t.Helper()
	var ps []*cedarlang.Policy
	for start := 0; start < len(policies); start += 10000 {
		end := min(start+10000, len(policies))
		part, err := cedarlang.ParsePolicies(fmt.Sprintf("%s-%d.cedar", name, start), []byte(strings.Join(policies[start:end], "\n")))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, part...)
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return set
}
