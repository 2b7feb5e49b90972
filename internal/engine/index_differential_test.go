package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// The index is an optimization only: over the policy-shape zoo, deciding with
// the index gives exactly the outcome of deciding with every policy as a
// candidate (decision, deciding policies, conditions, forbid errors), for
// requests with open values (empty namespace and name, "*" verb, group and
// resource), subresources, unknown resources, ServiceAccounts, nodes and
// non-resource URLs: 20,000 requests (2,000 with -short or -race).
func TestIndexDifferentialZoo(t *testing.T) {
	const policies = 400
	requests := 20000
	if testing.Short() || raceEnabled {
		requests = 2000
	}
	s := embeddedschema.Schema(t)
	// Plus forbids on any type that read optional attributes unguarded: on
	// k8s::Resource an open namespace or name may also be absent, and then
	// they fail (and deny).
	extra := `
@id("x-forbid-any-type") forbid (principal, action in [k8s::Action::"delete", k8s::Action::"list"], resource)
when { resource.namespace == "ns-3" && resource.name == "web" };
@id("x-forbid-sa") forbid (principal, action == k8s::Action::"get", resource)
when { principal.namespace == "ns-4" && resource.apiGroup == "example.com" };
@id("x-forbid-list") forbid (principal is k8s::User, action, resource)
when { ["ns-5", "ns-6"].contains(resource.namespace) && principal.username == "user-5" && context.verb == "watch" };
`
	indexed := policytest.Set(t, zoo.Policies(policies, 7)+extra)
	whole := indexed.Unindexed()
	az := NewEngine(s, indexed, EngineOptions{})
	ref := NewEngine(s, whole, EngineOptions{})
	stats := map[string]int{}
	narrowed := 0
	for i, req := range zoo.Requests(policies, requests, 11) {
		got, want := az.Authorize(context.Background(), req), ref.Authorize(context.Background(), req)
		for _, conditions := range []bool{true, false} {
			if !conditions {
				got, want = got.FailureDecision(), want.FailureDecision()
			}
			if d := outcomeDiff(got, want, indexed); d != "" {
				t.Fatalf("request %d %s (conditions %v): indexed and unindexed outcomes differ: %s", i, req, conditions, d)
			}
		}
		o := az.Authorize(context.Background(), req)
		kind := o.Type().String()
		if o.IsConditional() {
			kind = "conditional"
		}
		stats[kind]++
		target := entities.ResolveTarget(s, req)
		if n := len(indexed.Candidates(cedarlang.NewCandidateQuery(req, target, entities.Verbs(s, req)[0]))); n < policies/10 {
			narrowed++
		}
	}
	t.Logf("%d requests: %v; %d with fewer than a tenth of the policies as candidates", requests, stats, narrowed)
	// The test can only fail if the zoo requests reach every kind of outcome.
	for _, k := range []string{"Allow", "Deny", "NoOpinion", "conditional"} {
		if stats[k] < requests/200 {
			t.Errorf("only %d %s outcomes: the request generator is too weak", stats[k], k)
		}
	}
	if narrowed < requests/2 {
		t.Errorf("the index narrowed only %d of %d requests", narrowed, requests)
	}
}

// Over the team-and-namespace set (keys holding many satisfied
// permits) and its set with other shapes (relations, namespace, path and
// name prefixes, a big group, break-glass forbids, username sets,
// disjunctions across dimensions), deciding with the index gives exactly
// the outcome of deciding with every policy as a candidate.
func TestIndexDifferentialTeamAndShapes(t *testing.T) {
	const policies = 600
	team := compareIndexed(t, policySetOf(t, "team", testgen.TeamAndNamespace(policies)), testgen.TeamRequests(300))
	t.Logf("team-and-namespace, %d policies: %v", policies, team)
	shapes := compareIndexed(t, policySetOf(t, "shapes", testgen.OtherShapes(policies)), testgen.OtherShapesRequests(policies, 600))
	t.Logf("other shapes, %d policies: %v", policies, shapes)
	// The test can only fail if the requests reach every kind of outcome.
	for _, k := range []string{"Allow", "Deny", "NoOpinion"} {
		if shapes[k] < 600/50 {
			t.Errorf("only %d %s outcomes over the other shapes: the request generator is too weak", shapes[k], k)
		}
	}
	if team["Allow"] < 300/2 {
		t.Errorf("only %d of 300 team requests allowed", team["Allow"])
	}
}

// compareIndexed decides reqs over indexed and over the same policies
// unindexed, fails the test on the first different outcome (with and
// without conditions), and counts the outcomes by kind.
func compareIndexed(t *testing.T, indexed *cedarlang.PolicySet, reqs []*entities.Request) map[string]int {
	t.Helper()
	s := embeddedschema.Schema(t)
	az := NewEngine(s, indexed, EngineOptions{})
	ref := NewEngine(s, indexed.Unindexed(), EngineOptions{})
	stats := map[string]int{}
	for i, req := range reqs {
		got, want := az.Authorize(context.Background(), req), ref.Authorize(context.Background(), req)
		kind := got.Type().String()
		if got.IsConditional() {
			kind = "conditional"
		}
		stats[kind]++
		for _, conditions := range []bool{true, false} {
			if !conditions {
				got, want = got.FailureDecision(), want.FailureDecision()
			}
			if d := outcomeDiff(got, want, indexed); d != "" {
				t.Fatalf("request %d %s (conditions %v): indexed and unindexed outcomes differ: %s", i, req, conditions, d)
			}
		}
	}
	return stats
}

func outcomeDiff(got, want Decision, ps *cedarlang.PolicySet) string {
	ids := func(p []*cedarlang.Policy) string {
		var out []string
		for _, x := range p {
			out = append(out, x.ID)
		}
		return strings.Join(out, ",")
	}
	res := func(rs []Residual) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Policy.ID+"="+fmt.Sprint(r.Expr))
		}
		return strings.Join(out, "; ")
	}
	forbidErrors := func(errs []error) []string {
		var out []string
		for _, e := range errs {
			id, _, _ := strings.Cut(strings.TrimPrefix(e.Error(), "policy "), ":")
			if p, ok := ps.Get(id); ok && p.Effect == types.Forbid {
				out = append(out, e.Error())
			}
		}
		return out
	}
	switch {
	case got.Type() != want.Type():
		return fmt.Sprintf("decision %v, want %v (policies %s / %s)", got.Type(), want.Type(), ids(got.Policies()), ids(want.Policies()))
	case ids(got.Policies()) != ids(want.Policies()):
		return fmt.Sprintf("policies %s, want %s", ids(got.Policies()), ids(want.Policies()))
	case !slices.Equal(forbidErrors(got.Errors()), forbidErrors(want.Errors())):
		return fmt.Sprintf("forbid errors %v, want %v", got.Errors(), want.Errors())
	case !sameResiduals(got.DenyConditions(), want.DenyConditions()):
		return fmt.Sprintf("deny conditions %s, want %s", res(got.DenyConditions()), res(want.DenyConditions()))
	case !sameResiduals(got.AllowConditions(), want.AllowConditions()):
		return fmt.Sprintf("allow conditions %s, want %s", res(got.AllowConditions()), res(want.AllowConditions()))
	}
	return ""
}

func sameResiduals(a, b []Residual) bool {
	return slices.EqualFunc(a, b, func(x, y Residual) bool {
		return x.Policy == y.Policy && x.EntityType == y.EntityType && ast.Equal(ast.NewNode(x.Expr), ast.NewNode(y.Expr))
	})
}
