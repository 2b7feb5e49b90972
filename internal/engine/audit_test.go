package engine

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// auditHarness builds engines on one schema.
type auditHarness struct {
	t *testing.T
}

// engine parses src, puts the policies with ids in audit into audit mode
// and drops those with ids in drop.
func (h auditHarness) engine(src string, audit, drop map[string]bool, cache int) *Engine {
	ps, err := cedarlang.ParsePolicies("gen.cedar", []byte(src))
	if err != nil {
		h.t.Fatal(err)
	}
	var kept []*cedarlang.Policy
	for _, p := range ps {
		if drop[p.ID] {
			continue
		}
		if audit[p.ID] {
			p.Enforcement = cedarlang.Audit
		}
		kept = append(kept, p)
	}
	set, err := cedarlang.NewPolicySet(kept)
	if err != nil {
		h.t.Fatal(err)
	}
	return NewEngine(schematest.Schema(), set, EngineOptions{CacheSize: cache})
}

// describe is everything a caller of the enforced decision sees of it: its
// type, reason, errors and policies, and the residuals its conditions are
// encoded from, in order.
func (h auditHarness) describe(_ *Engine, d Decision) string {
	var conds []string
	for _, list := range [][]Residual{d.DenyConditions(), d.AllowConditions()} {
		for _, r := range list {
			text, err := ExprText(r.Expr)
			conds = append(conds, fmt.Sprintf("%s %s %s %v", r.Policy.ID, r.EntityType, text, err))
		}
		conds = append(conds, "|")
	}
	return fmt.Sprintf("%s|%s|%s|%v|%q", d.Type(), d.Reason(), d.EvaluationError(), policyIDs(d.Policies()), conds)
}

// conditionShape is a conditional decision's conditions, by policy.
func conditionShape(d Decision) string {
	if !d.IsConditional() {
		return ""
	}
	ids := func(rs []Residual) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Policy.ID)
		}
		sort.Strings(out)
		return out
	}
	return fmt.Sprintf("%v %v %t", ids(d.deny), ids(d.allow), allowsUnconditionally(d))
}

// Audit mode as a property: for random sets with a random subset in audit
// mode, every enforced decision is the decision of the set without them,
// and an audit policy has a finding exactly when enforcing it alone beside
// the others changes the answer, with that answer as its would-be decision.
func TestAuditNeverChangesDecisionsAndFindsWhatWouldChange(t *testing.T) {
	rng := rand.New(rand.NewSource(2121))
	h := auditHarness{t: t}
	sets, perSet := 150, 12
	if testing.Short() {
		sets = 40
	}
	kinds := map[string]int{}
	for i := 0; i < sets; i++ {
		n := 2 + rng.Intn(5)
		src := testgen.ObjectPolicies(rng, n)
		audit := map[string]bool{}
		for j := 0; j < n; j++ {
			if rng.Intn(2) == 0 {
				audit[fmt.Sprintf("g%d", j)] = true
			}
		}
		base := h.engine(src, nil, audit, 0)
		mixed := h.engine(src, audit, nil, (i%2)*1024)
		alone := map[string]*Engine{}
		for id := range audit {
			others := maps2(audit, id)
			alone[id] = h.engine(src, nil, others, 0)
		}
		for j := 0; j < perSet; j++ {
			req := auditRequest(rng)
			want := base.Authorize(context.Background(), req)
			got := mixed.Authorize(context.Background(), req)
			if g, w := h.describe(mixed, got), h.describe(base, want); g != w {
				t.Fatalf("set %d, request %s: audit policies changed the decision\n got %s\nwant %s\npolicies:\n%s", i, req, g, w, src)
			}
			wantFindings := map[string]string{}
			for id, e := range alone {
				d := e.Authorize(context.Background(), req)
				if d.Type() != want.Type() || conditionShape(d) != conditionShape(want) {
					wantFindings[id] = AuditFinding{would: d}.Kind()
				}
			}
			gotFindings := map[string]string{}
			for _, f := range got.AuditFindings() {
				gotFindings[f.Policy().ID] = f.Kind()
				kinds[f.Kind()]++
			}
			if fmt.Sprint(gotFindings) != fmt.Sprint(wantFindings) {
				t.Fatalf("set %d, request %s (%s): findings %v, want %v\naudit: %v\npolicies:\n%s", i, req, want.Type(), gotFindings, wantFindings, audit, src)
			}
		}
	}
	t.Logf("findings by kind: %v", kinds)
	for _, k := range []string{"would-deny", "would-allow", "would-be-conditional"} {
		if kinds[k] == 0 {
			t.Errorf("no %s finding: the generator does not exercise it", k)
		}
	}
}

// maps2 is audit without id.
func maps2(audit map[string]bool, id string) map[string]bool {
	out := map[string]bool{}
	for k := range audit {
		if k != id {
			out[k] = true
		}
	}
	return out
}

// auditRequest is an admission case's request, or a read, a list or a "*"
// (a request decided as several cases).
func auditRequest(rng *rand.Rand) *entities.Request {
	req := testgen.ObjectAdmission(rng).Req
	if rng.Intn(3) == 0 {
		req.Subresource = ""
		req.Verb = pick(rng, []string{"get", "list", "*"})
	}
	return req
}

// The bar, engine side: an audit forbid on an allowed request
// leaves it allowed and is a would-deny finding; the finding survives the
// decision cache; shadow mode answers NoOpinion where the permit allows and
// reports a would-allow.
func TestAuditForbidOnAllowedRequest(t *testing.T) {
	src := `@id("allow-get") permit(principal, action == k8s::Action::"get", resource is core::pods);
@id("audit-forbid") @enforcement("audit") forbid(principal, action, resource is core::pods) when { principal.username == "alice" };`
	h := auditHarness{t: t}
	e := h.engine(src, nil, nil, 1024)
	req := &entities.Request{User: entities.UserInfo{Name: "alice"}, ResourceRequest: true, Verb: "get", Resource: "pods", APIVersion: "v1", Namespace: "team-a", Name: ""}
	for range 2 { // the second is served from the cache (an open name is partial)
		d := e.Authorize(context.Background(), req)
		if !d.IsAllowed() || len(d.AuditFindings()) != 1 || d.AuditFindings()[0].Kind() != "would-deny" || d.AuditFindings()[0].Policy().ID != "audit-forbid" {
			t.Fatalf("got %s with findings %v", d.Type(), d.AuditFindings())
		}
	}
	if d := e.Authorize(context.Background(), req).FailureDecision(); !d.IsAllowed() || strings.Contains(d.Reason()+d.EvaluationError(), "audit-forbid") {
		t.Fatalf("the answer shows the audit policy: %s", d.Reason())
	}

	ps, _ := cedarlang.ParsePolicies("gen.cedar", []byte(src))
	set, _ := cedarlang.NewPolicySet(ps)
	shadow := NewEngine(schematest.Schema(), set, EngineOptions{Shadow: true})
	bob := *req
	bob.User = entities.UserInfo{Name: "bob"}
	d := shadow.Authorize(context.Background(), &bob)
	var kinds []string
	for _, f := range d.AuditFindings() {
		kinds = append(kinds, f.Policy().ID+"="+f.Kind())
	}
	if d.Type() != DecisionNoOpinion || !slices.Equal(kinds, []string{"allow-get=would-allow"}) {
		t.Fatalf("shadow: got %s with findings %v", d.Type(), kinds)
	}
}
