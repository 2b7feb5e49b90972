package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/wire"
)

// With admission enforcement, a conditional allow whose allow conditions
// were all dropped in encoding (here: the deny conditions fill every slot)
// has nothing for admission to enforce: it folds to Deny, as for a caller
// that cannot take conditions, never to an answer that is neither.
func TestAdmissionEnforcedWithoutAllowConditionsDenies(t *testing.T) {
	ps := mustPolicies(t, `
@id("bob-n1") permit(principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
@id("not-n2") forbid(principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n2" };
`)
	az := NewEngine(schematest.Schema(), ps, NewCodec(RandomKeyring()), EngineOptions{})
	req := resReq("bob", nil, "create", "", "pods", "", "a", "")
	d := az.Authorize(context.Background(), req)
	if len(d.DenyConditions()) != 1 || len(d.AllowConditions()) != 1 {
		t.Fatalf("want one deny and one allow condition, got %v", d)
	}
	caller := SARCaller{AdmissionEnforced: true}
	if a := az.renderSubjectAccessReview(d, req, caller); !a.Status.Allowed || a.Label != LabelConditionalAllow {
		t.Fatalf("with both conditions: %+v, want an enforced allow", a)
	}
	full := Conditional(slices.Repeat(d.DenyConditions(), wire.MaxConditions), d.AllowConditions(), nil)
	if enc := az.Encode(full, RequestBinding(req, false)); enc.Type != wire.DecisionTypeConditionsMap || len(enc.ConditionsMap.AllowConditions) != 0 {
		t.Fatalf("want deny conditions only, got %+v", enc)
	}
	a := az.renderSubjectAccessReview(full, req, caller)
	if !a.Status.Denied || a.Status.Allowed || a.Label != DecisionDeny.String() {
		t.Fatalf("deny conditions only: %+v, want Deny", a)
	}
}
