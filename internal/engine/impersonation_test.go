package engine

import (
	"context"
	"testing"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
)

// The action hierarchy of constrained impersonation, as the engine decides
// it: impersonate-on:<mode>:<verb> in impersonate-on:<mode>:*, in "*"; the
// legacy impersonate unrelated to the new verbs; a request for "*" stands for
// every verb, the new ones included.
func TestImpersonationActionGroups(t *testing.T) {
	ps := policytest.Set(t, `
@id("ui-any") permit(principal == k8s::User::"lucas", action in k8s::Action::"impersonate-on:user-info:*", resource);
@id("all") permit(principal == k8s::User::"root", action in k8s::Action::"*", resource);
@id("legacy") permit(principal == k8s::User::"old", action == k8s::Action::"impersonate", resource);
@id("reads") permit(principal == k8s::User::"reader", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::pods);
@id("no-legacy") forbid(principal == k8s::User::"root", action == k8s::Action::"impersonate", resource);
`)
	az := NewEngine(embeddedschema.Schema(t), ps, EngineOptions{})
	authn := "authentication.k8s.io"
	for _, tc := range []struct {
		name string
		req  *entities.Request
		want DecisionType
	}{
		{"group grants a verb of its mode", policytest.ResourceRequest("lucas", nil, "impersonate-on:user-info:get", "", "pods", "", "a", "p"), DecisionAllow},
		{"group grants a verb the schema does not list", policytest.ResourceRequest("lucas", nil, "impersonate-on:user-info:frobnicate", "", "pods", "", "a", "p"), DecisionAllow},
		{"group grants its literal verb", policytest.ResourceRequest("lucas", nil, "impersonate-on:user-info:*", "", "pods", "", "a", "p"), DecisionAllow},
		{"not another mode", policytest.ResourceRequest("lucas", nil, "impersonate-on:serviceaccount:get", "", "pods", "", "a", "p"), DecisionNoOpinion},
		{"not the identity check", policytest.ResourceRequest("lucas", nil, "impersonate:user-info", authn, "users", "", "", "alice"), DecisionNoOpinion},
		{"not the plain verb", policytest.ResourceRequest("lucas", nil, "get", "", "pods", "", "a", "p"), DecisionNoOpinion},
		{"* grants the new verbs", policytest.ResourceRequest("root", nil, "impersonate:associated-node", authn, "nodes", "", "", "*"), DecisionAllow},
		{"a forbid on legacy impersonate does not deny the new verbs", policytest.ResourceRequest("root", nil, "impersonate:user-info", authn, "users", "", "", "alice"), DecisionAllow},
		{"legacy impersonate does not grant the new verbs", policytest.ResourceRequest("old", nil, "impersonate:user-info", authn, "users", "", "", "alice"), DecisionNoOpinion},
		{"legacy impersonate", policytest.ResourceRequest("old", nil, "impersonate", "", "users", "", "", "alice"), DecisionAllow},
		{"a request for * needs the impersonate-on verbs too", policytest.ResourceRequest("reader", nil, "*", "", "pods", "", "a", "p"), DecisionNoOpinion},
		{"non-resource impersonate-on", &entities.Request{User: entities.UserInfo{Name: "lucas"}, Verb: "impersonate-on:user-info:post", Path: "/x"}, DecisionAllow},
	} {
		if d := az.Authorize(context.Background(), tc.req); d.Type() != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, d, tc.want)
		}
	}
}

// The impersonation filter of kube-apiserver (v1.37) calls the
// unconditional Authorize, and admission never sees an impersonate-on or
// impersonate:<mode> verb: a permit conditioned on the object of one is
// never answered Allow, nor turned into a condition, whatever the caller
// says it takes.
func TestImpersonateOnIsNeverConditionallyAllowed(t *testing.T) {
	ps := policytest.Set(t, `
@id("create-on-safe") permit(principal == k8s::User::"lucas", action == k8s::Action::"impersonate-on:user-info:create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe" };
@id("alice-by-uid") permit(principal == k8s::User::"lucas", action == k8s::Action::"impersonate:user-info", resource is io::k8s::authentication::users)
when { resource.name == "alice" };
`)
	az := NewEngine(embeddedschema.Schema(t), ps, EngineOptions{})
	req := policytest.ResourceRequest("lucas", nil, "impersonate-on:user-info:create", "", "pods", "", "a", "")
	// Admission never carries an object for it: the condition on the object
	// cannot hold, so the permit does not apply (no condition to fold).
	if d := az.Authorize(context.Background(), req); d.IsAllowed() || d.IsConditional() {
		t.Fatalf("%v, want neither an Allow nor a condition", d)
	}
	if az.AdmissionWebhookSees(req) {
		t.Error("admission does not see impersonate-on verbs")
	}
	id := policytest.ResourceRequest("lucas", nil, "impersonate:user-info", "authentication.k8s.io", "users", "", "", "alice")
	if d := az.Authorize(context.Background(), id); !d.IsAllowed() {
		t.Errorf("impersonate:user-info alice: %v, want Allow", d)
	}
}
