package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// bigTeam is n permits that all match one request (one big team's
// policies, each satisfied), a forbid that does not apply, and an
// unsatisfied forbid after them.
func bigTeam(t testing.TB, n int, forbid string) *Engine {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "@id(\"team-%d\")\npermit(principal in k8s::Group::\"platform\", action == k8s::Action::\"get\", resource is core::pods) when { resource.namespace == \"team\" };\n", i)
	}
	b.WriteString(forbid)
	ps, err := cedarlang.ParsePolicies("team.cedar", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return NewEngine(schematest.Schema(), set, EngineOptions{})
}

var teamRequest = &entities.Request{User: entities.UserInfo{Name: "ann", Groups: []string{"platform"}}, Verb: "get", ResourceRequest: true, Resource: "pods", Namespace: "team", Name: "p"}

// A decision stops at the first satisfied permit once the forbids are
// cleared: the reason names it alone, and a forbid anywhere in the set
// still decides.
func TestDecisionStopsWhenDecided(t *testing.T) {
	d := bigTeam(t, 50, "").Authorize(context.Background(), teamRequest)
	var ids []string
	for _, p := range d.Policies() {
		ids = append(ids, p.ID)
	}
	if !d.IsAllowed() || !slices.Equal(ids, []string{"team-0"}) {
		t.Fatalf("%v %v: want Allow by team-0 alone", d.Type(), ids)
	}
	denied := bigTeam(t, 50, `@id("no-pods-in-team") forbid(principal, action, resource is core::pods) when { resource.namespace == "team" };`).Authorize(context.Background(), teamRequest)
	if !denied.IsDenied() {
		t.Fatalf("%v: the forbid after 50 satisfied permits must deny", denied.Type())
	}
}

// One big team: the decision costs the same whatever the number of
// satisfied permits (compare the ns/op of the three sizes).
//
//	go test -run '^$' -bench BigTeam -benchtime 20000x ./internal/engine
func BenchmarkBigTeam100(b *testing.B)   { benchBigTeam(b, 100) }
func BenchmarkBigTeam1000(b *testing.B)  { benchBigTeam(b, 1000) }
func BenchmarkBigTeam10000(b *testing.B) { benchBigTeam(b, 10000) }

func benchBigTeam(b *testing.B, n int) {
	e := bigTeam(b, n, `@id("f") forbid(principal, action, resource is core::secrets);`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Authorize(context.Background(), teamRequest)
	}
}
