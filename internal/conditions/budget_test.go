package conditions

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/wire"
)

// An engine whose decisions are made for Encode only (EncodedOnly) stops
// evaluating where the encoded answer can no longer change. Its Encode must
// be exactly that of the full decision: the same conditions, signed the
// same, in the same order; the same Allow; Deny where it denies. Over
// random sets of hundreds of forbids and permits on names a create leaves
// open (more deny conditions than kube-apiserver takes, more allow
// conditions than fit beside them), permits that allow some users
// outright at random places in the order, forbids that deny some outright,
// and permits whose condition is too large to send.
func TestEncodedOnlyEncodesAsTheFullDecision(t *testing.T) {
	sets, perSet := 60, 24
	if testing.Short() || raceEnabled {
		sets = 15
	}
	rng := rand.New(rand.NewSource(128))
	s := embeddedschema.Schema(t)
	codec := NewCodec(RandomKeyring())
	seen := map[string]int{}
	for i := range sets {
		set := policytest.Set(t, manyConditionsPolicies(rng))
		full := New(engine.NewEngine(s, set, engine.EngineOptions{CacheSize: engine.DefaultCacheSize}), codec)
		capped := New(engine.NewEngine(s, set, engine.EngineOptions{CacheSize: engine.DefaultCacheSize, EncodedOnly: codec}), codec)
		for j := range perSet {
			req := manyConditionsRequest(rng)
			want := full.Authorize(context.Background(), req)
			got := capped.Authorize(context.Background(), req)
			b := RequestBinding(req)
			if diff := encodedDiff(full.Encode(want, b), capped.Encode(got, b)); diff != "" {
				t.Fatalf("set %d request %d %s: %s", i, j, req, diff)
			}
			seen[budgetCase(want)]++
		}
	}
	t.Logf("full decisions by case: %v", seen)
	// The test can only fail where the budget stops evaluation.
	for _, k := range []string{"deny overflow", "allow conditions dropped", "allowed outright", "conditions fit"} {
		if seen[k] < sets*perSet/50 {
			t.Errorf("only %d cases of %q: the generator is too weak", seen[k], k)
		}
	}
}

// budgetCase names what the budget does with a full decision.
func budgetCase(d engine.Decision) string {
	deny, allow := len(d.DenyConditions()), len(d.AllowConditions())
	switch {
	case !d.IsConditional() && d.IsAllowed(), d.IsConditional() && allow == 1 && isTrue(d.AllowConditions()[0].Expr):
		return "allowed outright"
	case !d.IsConditional():
		return d.Type().String()
	case deny > wire.MaxConditions:
		return "deny overflow"
	case deny+allow > wire.MaxConditions:
		return "allow conditions dropped"
	}
	return "conditions fit"
}

// encodedDiff compares two encoded answers: Deny by type (its reason names
// whichever forbid or limit was met first), anything else exactly.
func encodedDiff(want, got wire.ConditionsAwareDecision) string {
	if want.Type != got.Type {
		return fmt.Sprintf("encoded %s, the full decision %s", got.Type, want.Type)
	}
	if want.Type == wire.DecisionTypeDeny {
		return ""
	}
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if string(w) != string(g) {
		return fmt.Sprintf("encoded\n%s\nthe full decision\n%s", g, w)
	}
	return ""
}

// manyConditionsPolicies draws a set of create policies on secrets in
// random order: forbids and permits on names (conditions for a create),
// permits and forbids that hold outright for some users, and permits whose
// condition is too large to send.
func manyConditionsPolicies(rng *rand.Rand) string {
	var ps []string
	add := func(effect, principal, when string) {
		p := fmt.Sprintf("@id(%q) %s (%s, action == k8s::Action::\"create\", resource is core::secrets)", fmt.Sprintf("p%d", len(ps)), effect, principal)
		if when != "" {
			p += " when { " + when + " }"
		}
		ps = append(ps, p+";")
	}
	forbids := rng.Intn(260)
	if rng.Intn(4) == 0 {
		forbids = 0
	}
	for range forbids {
		add("forbid", "principal", fmt.Sprintf("resource.name like \"f%d-*\"", rng.Intn(1000)))
	}
	for range rng.Intn(300) {
		add("permit", "principal", fmt.Sprintf("resource.name == \"n%d\"", rng.Intn(1000)))
	}
	for range rng.Intn(4) {
		add("permit", fmt.Sprintf("principal == k8s::User::\"u%d\"", rng.Intn(8)), "")
	}
	if rng.Intn(4) == 0 {
		add("forbid", fmt.Sprintf("principal == k8s::User::\"u%d\"", rng.Intn(8)), "")
	}
	for range rng.Intn(3) {
		names := make([]string, 2000)
		for i := range names {
			names[i] = fmt.Sprintf("%q", fmt.Sprintf("big-%d-%d", rng.Intn(1000), i))
		}
		add("permit", "principal", "["+strings.Join(names, ", ")+"].contains(resource.name)")
	}
	rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	return strings.Join(ps, "\n")
}

// manyConditionsRequest is a create of a secret (its name not known yet),
// now and then a named update, by one of a few users.
func manyConditionsRequest(rng *rand.Rand) *entities.Request {
	req := &entities.Request{User: entities.UserInfo{Name: fmt.Sprintf("u%d", rng.Intn(8)), Groups: []string{"system:authenticated"}},
		ResourceRequest: true, Verb: "create", Resource: "secrets", APIVersion: "v1", Namespace: "team-a"}
	if rng.Intn(6) == 0 {
		req.Verb, req.Name = "update", fmt.Sprintf("n%d", rng.Intn(1000))
	}
	return req
}

// isTrue reports whether n is the literal true (a residual that holds
// outright).
func isTrue(n ast.IsNode) bool {
	v, ok := n.(ast.NodeValue)
	return ok && v.Value == types.Boolean(true)
}
