package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/oracle"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// explainExtra are policies beside the zoo that fail to evaluate or hold
// for many requests: erroring forbids (which deny), unless clauses and
// permits that hold together (every satisfied permit decides an Allow).
const explainExtra = `
@id("x-forbid-error") forbid (principal, action == k8s::Action::"delete", resource is core::pods)
when { principal.username == "user-3" && principal.namespace == "ns-1" };
@id("x-unless") permit (principal is k8s::User, action in [k8s::Action::"get", k8s::Action::"list"], resource is core::configmaps)
unless { resource.namespace == "ns-2" } when { principal.username like "user-*" };
@id("x-forbid-ns-0") forbid (principal, action in [k8s::Action::"get", k8s::Action::"delete"], resource)
when { resource has namespace && resource.namespace == "ns-0" } unless { principal.username == "user-0" };
@id("x-also-get") permit (principal, action == k8s::Action::"get", resource is core::configmaps)
when { resource.namespace == "ns-1" };
`

// The explanation of a decision names exactly the policies that determine
// it: over 2,000 zoo requests (1,000 with -short or -race), the deciding
// policies fit the engine's decision (forbids for a Deny, permits that
// hold for an Allow, residuals for a Conditional, none for NoOpinion),
// include every policy the engine names, and, for fully known requests,
// are exactly the policies a one-phase Cedar evaluation of every policy
// names; each policy's parts, evaluated alone, agree with the policy's
// outcome.
func TestExplainNamesTheDecidingPolicies(t *testing.T) {
	const policies = 200
	requests := 2000
	if testing.Short() || raceEnabled {
		requests = 1000
	}
	s := embeddedschema.Schema(t)
	ps := policytest.Set(t, zoo.Policies(policies, 5)+explainExtra)
	az := NewEngine(s, ps, EngineOptions{})
	stats := map[string]int{}
	for i, req := range zoo.Requests(policies, requests, 17) {
		ex, err := explain(az, req)
		if errors.Is(err, ErrNotExplained) {
			stats["not explained"]++
			continue
		}
		if err != nil {
			t.Fatalf("request %d %s: %v", i, req, err)
		}
		stats[ex.Decision]++
		if msg := checkDeciding(ex, az.Authorize(context.Background(), req)); msg != "" {
			t.Fatalf("request %d %s: %s\n%s", i, req, msg, ex)
		}
		if msg := checkParts(ex); msg != "" {
			t.Fatalf("request %d %s: %s\n%s", i, req, msg, ex)
		}
		if want, ok := oneDecision(s, ps, req); ok {
			stats["one-phase"]++
			if ex.Decision != want.Decision || !slices.Equal(ex.DecidingIDs(), nonNil(want.Policies)) {
				t.Fatalf("request %d %s: explained %s by %q, one-phase %s by %q\n%s", i, req, ex.Decision, ex.DecidingIDs(), want.Decision, want.Policies, ex)
			}
		}
	}
	t.Logf("%d requests: %v", requests, stats)
	for _, k := range []string{"Allow", "Deny", "NoOpinion", "Conditional", "one-phase"} {
		if stats[k] < requests/200 {
			t.Errorf("only %d %s: the generator is too weak", stats[k], k)
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// checkDeciding checks the deciding policies against the decision d.
func checkDeciding(ex Explanation, d Decision) string {
	if ex.Decision != reportType(d) {
		return fmt.Sprintf("explained %s, the engine decides %s", ex.Decision, reportType(d))
	}
	ids := ex.DecidingIDs()
	for _, p := range d.Policies() {
		if !slices.Contains(ids, p.ID) {
			return fmt.Sprintf("the engine names %s, the explanation does not (%q)", p.ID, ids)
		}
	}
	for _, tr := range ex.Deciding {
		ok := false
		switch ex.Decision {
		case "Deny":
			ok = tr.Effect == "forbid"
		case "Allow":
			ok = tr.Effect == "permit" && tr.Outcome == OutcomeHolds
		case "Conditional":
			ok = tr.Outcome == OutcomeConditional || tr.Effect == "permit" && tr.Outcome == OutcomeHolds
		}
		if !ok {
			return fmt.Sprintf("%s %s (%s) cannot decide %s", tr.Effect, tr.ID, tr.Outcome, ex.Decision)
		}
	}
	if (ex.Decision == "NoOpinion") != (len(ids) == 0) {
		return fmt.Sprintf("%s decided by %q", ex.Decision, ids)
	}
	return ""
}

// reportType is the decision type as the report writes it.
func reportType(d Decision) string { return d.Type().String() }

// checkParts checks that each traced policy's parts, evaluated alone,
// agree with its outcome: a policy that holds has every part letting it
// apply; one whose parts are all known and free of errors holds exactly
// when every part lets it apply; a near miss has a part that failed.
func checkParts(ex Explanation) string {
	for _, tr := range slices.Concat(ex.Deciding, ex.NearMisses) {
		allLet, known := true, true
		for _, p := range tr.Parts {
			allLet = allLet && p.lets()
			known = known && (p.Result == "true" || p.Result == "false")
		}
		switch {
		case tr.Outcome == OutcomeHolds && !allLet:
			return fmt.Sprintf("%s holds, yet a part does not let it apply", tr.ID)
		case known && allLet != (tr.Outcome == OutcomeHolds):
			return fmt.Sprintf("%s: every part known, all let it apply: %v, outcome %s", tr.ID, allLet, tr.Outcome)
		case tr.Outcome == OutcomeDoesNotHold && known:
			if _, failed := tr.FailedPart(); !failed {
				return fmt.Sprintf("%s does not hold, and no part failed", tr.ID)
			}
		}
	}
	return ""
}

// oneDecision is the one-phase Cedar decision of a fully known request
// (nothing open, not seen by admission, no namespace object) over every
// enforced policy, and whether the request is one.
func oneDecision(s *schemagen.Schema, ps *cedarlang.PolicySet, req *entities.Request) (oracle.Result, bool) {
	verbs := entities.Verbs(s, req)
	target := entities.ResolveTarget(s, req)
	if len(verbs) != 1 || len(target.Open(req)) > 0 || len(AdmissionShapes(target, req, verbs[0])) > 0 || len(req.LabelSelector) > 0 {
		return oracle.Result{}, false
	}
	for _, p := range ps.Policies {
		if strings.Contains(string(p.Text()), "namespaceObject") {
			return oracle.Result{}, false
		}
	}
	uid := target.EntityUID(req)
	ents := &entities.Entities{Principal: entities.PrincipalEntity(req.User), Resource: types.Entity{UID: uid, Attributes: types.NewRecord(target.Attributes(req, nil, nil))}}
	var enforced []*cedarlang.Policy
	for _, p := range ps.Policies {
		if !p.IsAudit() {
			enforced = append(enforced, p)
		}
	}
	return oracle.Evaluate(policytest.OraclePolicies(enforced), ents, ents.Principal.UID, schemagen.ActionUID(verbs[0]), uid), true
}

// The explanation's text names the deciding policy with its file and line,
// and for a near miss the clause that failed with the value it read.
func TestExplainText(t *testing.T) {
	s := embeddedschema.Schema(t)
	ps := policytest.Set(t, `@id("dev-reads")
permit (principal in k8s::Group::"dev", action == k8s::Action::"get", resource is core::pods)
when { resource.namespace == "dev" };
@id("prod-reads")
permit (principal in k8s::Group::"dev", action == k8s::Action::"get", resource is core::pods)
when { resource.namespace == "prod" };
@id("object-writes")
permit (principal in k8s::Group::"dev", action == k8s::Action::"create", resource is core::pods)
when { resource.object.metadata.name == "web" };`)
	az := NewEngine(s, ps, EngineOptions{})
	alice := entities.UserInfo{Name: "alice", Groups: []string{"dev"}}
	ex, err := explain(az, &entities.Request{User: alice, ResourceRequest: true, Verb: "get", APIVersion: "v1", Resource: "pods", Namespace: "dev", Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	text := ex.String()
	for _, want := range []string{"decision: Allow", "permit dev-reads (test.cedar:1:1): holds",
		"prod-reads (test.cedar:4:1): principal matched, action matched, resource matched, `when { resource.namespace == \"prod\" }` was false: resource.namespace is \"dev\""} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	ex, err = explain(az, &entities.Request{User: alice, ResourceRequest: true, Verb: "create", APIVersion: "v1", Resource: "pods", Namespace: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	text = ex.String()
	for _, want := range []string{"decision: Conditional", "permit object-writes", "conditions that remain", "resource.object.metadata.name == \"web\""} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	if _, err := explain(az, &entities.Request{User: alice, ResourceRequest: true, Verb: "*", APIVersion: "v1", Resource: "pods"}); !errors.Is(err, ErrNotExplained) {
		t.Errorf("verb *: %v, want ErrNotExplained", err)
	}
}

// Over small random policy sets on a small domain (so that several permits
// and forbids hold at once, clauses fail and error, unless clauses flip),
// every request fully known: the explanation names exactly the policies a
// one-phase Cedar evaluation of every policy names, and its decision is
// the engine's. 3,000 requests (600 with -short or -race).
func TestExplainRandomSetsMatchOnePhase(t *testing.T) {
	sets := 300
	if testing.Short() || raceEnabled {
		sets = 60
	}
	s := embeddedschema.Schema(t)
	rng := rand.New(rand.NewSource(23))
	stats := map[string]int{}
	for i := 0; i < sets; i++ {
		src := testgen.RandomPolicies(rng, 2+rng.Intn(6), explainScope, func(rng *rand.Rand) string { return testgen.RandomTree(rng, 2, explainLeaf) })
		ps := policytest.Set(t, src)
		az := NewEngine(s, ps, EngineOptions{})
		for j := 0; j < 10; j++ {
			req := explainRequest(rng)
			ex, err := explain(az, req)
			if err != nil {
				t.Fatalf("%s: %v", req, err)
			}
			want, ok := oneDecision(s, ps, req)
			if !ok {
				t.Fatalf("%s is not fully known", req)
			}
			if ex.Decision != want.Decision || !slices.Equal(ex.DecidingIDs(), nonNil(want.Policies)) {
				t.Fatalf("%s: explained %s by %q, one-phase %s by %q\npolicies:\n%s\n%s", req, ex.Decision, ex.DecidingIDs(), want.Decision, want.Policies, src, ex)
			}
			if msg := checkDeciding(ex, az.Authorize(context.Background(), req)); msg != "" {
				t.Fatalf("%s: %s\n%s", req, msg, ex)
			}
			if msg := checkParts(ex); msg != "" {
				t.Fatalf("%s: %s\n%s", req, msg, ex)
			}
			stats[ex.Decision]++
			if len(want.Policies) > 1 {
				stats["several deciding"]++
			}
		}
	}
	t.Logf("%d requests: %v", sets*10, stats)
	for _, k := range []string{"Allow", "Deny", "NoOpinion", "several deciding"} {
		if stats[k] < sets/5 {
			t.Errorf("only %d %s: the generator is too weak", stats[k], k)
		}
	}
}

func explainScope(rng *rand.Rand) string {
	principal := []string{"principal", `principal == k8s::User::"alice"`, `principal in k8s::Group::"dev"`, "principal is k8s::ServiceAccount"}[rng.Intn(4)]
	action := []string{"action", `action in [k8s::Action::"list", k8s::Action::"get"]`, `action == k8s::Action::"get"`}[rng.Intn(3)]
	resource := []string{"resource", "resource is core::pods", "resource is core::secrets"}[rng.Intn(3)]
	return principal + ", " + action + ", " + resource
}

func explainLeaf(rng *rand.Rand) string {
	return []string{
		`resource.namespace == "dev"`, `resource.namespace == "prod"`, `resource.name like "web*"`,
		`principal.username == "alice"`, `principal.groups.contains("ops")`,
		`principal.namespace == "dev"`, // fails for users
		`context.verb == "get"`, "true", "false",
		`principal.hasTag("team") && principal.getTag("team").contains("a")`,
	}[rng.Intn(10)]
}

// explainRequest is a fully known request on the small domain: a named
// namespaced read (nothing open, nothing admission sees).
func explainRequest(rng *rand.Rand) *entities.Request {
	users := []entities.UserInfo{
		{Name: "alice", Groups: []string{"dev"}},
		{Name: "bob", Groups: []string{"ops", "dev"}, Extra: map[string][]string{"team": {"a"}}},
		{Name: "system:serviceaccount:dev:builder", Groups: []string{"system:serviceaccounts"}},
	}
	return &entities.Request{
		User: users[rng.Intn(len(users))], ResourceRequest: true, Verb: []string{"get", "list"}[rng.Intn(2)],
		APIVersion: "v1", Resource: []string{"pods", "secrets"}[rng.Intn(2)],
		Namespace: []string{"dev", "prod"}[rng.Intn(2)], Name: []string{"web-1", "db"}[rng.Intn(2)],
	}
}

// explain is az.Explain with the decision reported as the engine decides it
// (package conditions reports it as the server answers it, encoded).
func explain(az *Engine, req *entities.Request) (Explanation, error) {
	return az.Explain(req, func() Report {
		d := az.Authorize(context.Background(), req)
		r := Report{Decision: d.Type().String(), Reason: d.Reason(), EvaluationError: d.EvaluationError(), WithoutConditions: d.FailureDecision().Type().String()}
		for _, p := range d.Policies() {
			r.Policies = append(r.Policies, p.ID)
		}
		sort.Strings(r.Policies)
		return r
	})
}
