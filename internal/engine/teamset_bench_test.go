package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// policySetOf parses policies (one string each) into an indexed set, in
// files of 10,000 policies.
func policySetOf(t testing.TB, name string, policies []string) *cedarlang.PolicySet {
	t.Helper()
	var ps []*cedarlang.Policy
	for start := 0; start < len(policies); start += 10000 {
		end := min(start+10000, len(policies))
		part, err := cedarlang.ParsePolicies(fmt.Sprintf("%s-%d.cedar", name, start), []byte(strings.Join(policies[start:end], "")))
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

// benchDecisions decides reqs over set, one per iteration, round robin,
// with the caches the server has (only decisions that needed partial
// evaluation are cached; principals are).
func benchDecisions(b *testing.B, set *cedarlang.PolicySet, reqs []*entities.Request) {
	e := NewEngine(embeddedschema.Schema(b), set, EngineOptions{CacheSize: DefaultCacheSize})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Authorize(context.Background(), reqs[i%len(reqs)])
	}
}

// benchTeamSet decides requests of the team-and-namespace shape
// (testgen.TeamAndNamespace), whose keys hold more satisfied permits as n
// grows.
func benchTeamSet(b *testing.B, n int) {
	benchDecisions(b, policySetOf(b, "team", testgen.TeamAndNamespace(n)), testgen.TeamRequests(256))
}

// go test -run '^$' -bench TeamSet -benchtime 20000x ./internal/engine
func BenchmarkTeamSet1000(b *testing.B)   { benchTeamSet(b, 1000) }
func BenchmarkTeamSet10000(b *testing.B)  { benchTeamSet(b, 10000) }
func BenchmarkTeamSet100000(b *testing.B) { benchTeamSet(b, 100000) }
