package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// benchTeamSet decides requests of issue 23's team-and-namespace shape
// (testgen.TeamAndNamespace), whose keys hold more satisfied permits as n
// grows.
func benchTeamSet(b *testing.B, n int) {
	policies := testgen.TeamAndNamespace(n)
	var ps []*cedarlang.Policy
	for start := 0; start < len(policies); start += 10000 {
		end := min(start+10000, len(policies))
		part, err := cedarlang.ParsePolicies(fmt.Sprintf("team-%d.cedar", start), []byte(strings.Join(policies[start:end], "")))
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, part...)
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		b.Fatal(err)
	}
	e := NewEngine(embedded(b), set, NewCodec(RandomKeyring()), EngineOptions{})
	reqs := testgen.TeamRequests(256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Authorize(context.Background(), reqs[i%len(reqs)])
	}
}

// go test -run '^$' -bench TeamSet -benchtime 20000x ./internal/engine
func BenchmarkTeamSet1000(b *testing.B)   { benchTeamSet(b, 1000) }
func BenchmarkTeamSet10000(b *testing.B)  { benchTeamSet(b, 10000) }
func BenchmarkTeamSet100000(b *testing.B) { benchTeamSet(b, 100000) }
