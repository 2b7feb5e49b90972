package conditions

import (
	"context"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/wire"
)

// Conditions written before ids were prefixed (a bare policy id) still
// verify and evaluate in the callback during the transition; a bare id that
// was not the one signed does not.
func TestLegacyBareConditionIDs(t *testing.T) {
	s := schematest.Schema()
	ps := policytest.Set(t, `
@id("bob-n1") permit(principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
`)
	az := newEngine(s, ps, engine.EngineOptions{})
	req := policytest.ResourceRequest("bob", nil, "create", "", "pods", "", "a", "")
	d := az.Authorize(context.Background(), req)
	if !d.IsConditional() {
		t.Fatalf("want a conditional decision, got %v", d.Type())
	}
	enc := az.Encode(d, RequestBinding(req))
	cond := enc.ConditionsMap.AllowConditions[0]
	if cond.ID != "kcedar.dev/bob-n1" {
		t.Fatalf("condition id %q, want kcedar.dev/bob-n1", cond.ID)
	}
	// Re-sign the same condition under the bare id, as kcedar did before.
	key := az.Codec().Keys.signing()
	parts := strings.SplitN(cond.Condition, ";", 5)
	body := parts[3] + ";" + parts[4]
	legacy := wire.Condition{ID: "bob-n1", Type: cond.Type, Description: cond.Description,
		Condition: strings.Join([]string{conditionPrefix, key.ID, mac(key, engine.DecisionAllow, "bob-n1", cond.Type, body, RequestBinding(req)), body}, ";")}
	user := entities.UserInfo{Name: "bob"}
	data := &AdmissionData{Operation: "CREATE", Resource: "pods", APIVersion: "v1", Namespace: "a", Name: "p", User: &user,
		Object: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"},"spec":{"nodeName":"n1"}}`)}
	eval := func(c wire.Condition) engine.Decision {
		return az.EvaluateConditions(context.Background(), &wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: &wire.ConditionsMap{AllowConditions: []wire.Condition{c}}}, data)
	}
	if v := eval(cond); !v.IsAllowed() {
		t.Fatalf("prefixed id: %v %s %s", v.Type(), v.Reason(), v.EvaluationError())
	}
	if v := eval(legacy); !v.IsAllowed() {
		t.Fatalf("legacy bare id: %v %s %s", v.Type(), v.Reason(), v.EvaluationError())
	}
	renamed := legacy
	renamed.ID = "kcedar.dev/bob-n1"
	if v := eval(renamed); v.IsAllowed() {
		t.Fatalf("a condition moved to another id must not verify")
	}
}
