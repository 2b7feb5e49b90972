package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
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
	az := engine.NewEngine(schematest.Schema(), ps, engine.NewCodec(engine.RandomKeyring()), engine.EngineOptions{})
	req := resReq("bob", nil, "create", "", "pods", "", "a", "")
	d := az.Authorize(context.Background(), req)
	if len(d.DenyConditions()) != 1 || len(d.AllowConditions()) != 1 {
		t.Fatalf("want one deny and one allow condition, got %v", d)
	}
	caller := sarCaller{AdmissionEnforced: true}
	if a := renderSubjectAccessReview(az, d, req, caller); !a.Status.Allowed || a.Label != labelConditionalAllow {
		t.Fatalf("with both conditions: %+v, want an enforced allow", a)
	}
	full := engine.Conditional(slices.Repeat(d.DenyConditions(), wire.MaxConditions), d.AllowConditions(), nil)
	if enc := az.Encode(full, engine.RequestBinding(req)); enc.Type != wire.DecisionTypeConditionsMap || len(enc.ConditionsMap.AllowConditions) != 0 {
		t.Fatalf("want deny conditions only, got %+v", enc)
	}
	a := renderSubjectAccessReview(az, full, req, caller)
	if !a.Status.Denied || a.Status.Allowed || a.Label != engine.DecisionDeny.String() {
		t.Fatalf("deny conditions only: %+v, want Deny", a)
	}
}

// With admission enforcement, a conditional allow is answered Allow only
// for a request kcedar's admission webhook will see: a write or connect of
// a typed resource that kube-apiserver sends to webhooks. Anything else
// (the admission configuration kinds, which no webhook sees; reads; verbs
// such as impersonate that never reach admission) gets the decision kcedar
// gives without admission enforcement, and so does a review that asks for
// unconditional rights only (the escalation check's).
func TestAdmissionEnforcedOnlyWhereTheWebhookSees(t *testing.T) {
	ps := mustPolicies(t, `
@id("pods-on-safe") permit(principal == k8s::User::"lead", action in [k8s::Action::"create", k8s::Action::"get"], resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe" };
@id("ops-webhooks") permit(principal in k8s::Group::"ops", action == k8s::Action::"delete", resource is io::k8s::admissionregistration::validatingwebhookconfigurations)
unless { resource has oldObject && resource.oldObject.metadata has name && resource.oldObject.metadata.name like "kcedar*" };
@id("ops-secrets") permit(principal in k8s::Group::"ops", action in [k8s::Action::"delete", k8s::Action::"get"], resource is core::secrets)
unless { resource has oldObject && resource.oldObject.metadata has labels && resource.oldObject.metadata.labels.hasTag("protected") };
`)
	az := engine.NewEngine(embeddedschema.Schema(t), ps, engine.NewCodec(engine.RandomKeyring()), engine.EngineOptions{})
	lead, ops := "lead", "mallory"
	// A validatingwebhookconfigurations/status update is exempt too: the
	// exemption is by kind.
	if az.AdmissionWebhookSees(resReq(ops, nil, "update", "admissionregistration.k8s.io", "validatingadmissionpolicies", "status", "", "p")) {
		t.Error("validatingadmissionpolicies/status: the webhook never sees it")
	}
	if !az.AdmissionWebhookSees(resReq(ops, nil, "create", "", "pods", "eviction", "a", "p")) || az.AdmissionWebhookSees(resReq(ops, nil, "get", "", "pods", "", "a", "p")) {
		t.Error("pods/eviction create is admitted; a get is not")
	}
	// The reviews kube-apiserver never sends to a webhook (they are never
	// stored): a conditional allow on creating one must be folded.
	for _, r := range [][2]string{{"authorization.k8s.io", "subjectaccessreviews"}, {"authorization.k8s.io", "selfsubjectaccessreviews"},
		{"authorization.k8s.io", "localsubjectaccessreviews"}, {"authorization.k8s.io", "selfsubjectrulesreviews"},
		{"authentication.k8s.io", "tokenreviews"}, {"authentication.k8s.io", "selfsubjectreviews"}} {
		ns := ""
		if r[1] == "localsubjectaccessreviews" {
			ns = "a"
		}
		if az.AdmissionWebhookSees(resReq(ops, nil, "create", r[0], r[1], "", ns, "")) {
			t.Errorf("create %s: kube-apiserver never sends it to admission webhooks", r[1])
		}
	}
	cases := []struct {
		name  string
		req   *entities.Request
		allow bool
	}{
		{"create pods: admission sees it", resReq(lead, nil, "create", "", "pods", "", "a", ""), true},
		{"delete secrets: admission sees it", resReq(ops, []string{"ops"}, "delete", "", "secrets", "", "a", "s"), true},
		{"delete a webhook configuration: no webhook sees it", resReq(ops, []string{"ops"}, "delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", "kcedar-conditions"), false},
	}
	for _, tc := range cases {
		d := az.Authorize(context.Background(), tc.req)
		if !d.IsConditional() {
			t.Fatalf("%s: %v, want a conditional decision to render", tc.name, d)
		}
		a := authorizeSubjectAccessReview(context.Background(), az, tc.req, sarCaller{AdmissionEnforced: true, MayBeAggregated: noneAggregated}, nil)
		if a.Status.Allowed != tc.allow {
			t.Errorf("%s: allowed=%v (%s), want %v", tc.name, a.Status.Allowed, a.Label, tc.allow)
		}
		strict := *tc.req
		strict.UnconditionalOnly = true
		if a := authorizeSubjectAccessReview(context.Background(), az, &strict, sarCaller{AdmissionEnforced: true, MayBeAggregated: noneAggregated, Upstream: true}, nil); a.Status.Allowed || a.Status.ConditionalDecision != nil {
			t.Errorf("%s, unconditional rights only: %+v, want the folded decision", tc.name, a)
		}
	}
}

// noneAggregated: kube-apiserver serves every group version itself.
func noneAggregated(string, string) bool { return false }

// With admission enforcement, a conditional allow on a group version that
// an aggregated API server may serve (its APIService names a service, or
// the APIServices are not listed yet) is not answered Allow: kube-apiserver
// proxies the request past its admission webhooks, so nothing would
// enforce the condition. It folds as for a caller that takes no
// conditions: NoOpinion, or Deny where a deny condition may hold. The same
// request on a group version kube-apiserver serves itself is allowed.
func TestAdmissionEnforcedFoldsOnAggregatedAPIs(t *testing.T) {
	ps := mustPolicies(t, `
@id("lead-deployments") permit(principal == k8s::User::"lead", action == k8s::Action::"create", resource is apps::deployments)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has replicas && resource.object.v1.spec.replicas < 5 };
@id("lead-pods") permit(principal == k8s::User::"lead", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe" };
@id("no-control-plane") forbid(principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "control" };
`)
	az := engine.NewEngine(embeddedschema.Schema(t), ps, engine.NewCodec(engine.RandomKeyring()), engine.EngineOptions{})
	deployments := resReq("lead", nil, "create", "apps", "deployments", "", "a", "")
	deployments.APIVersion = "v1"
	pods := resReq("lead", nil, "create", "", "pods", "", "a", "")
	pods.APIVersion = "v1"
	appsAggregated := func(group, version string) bool { return group == "apps" && (version == "v1" || version == "" || version == "*") }
	notSynced := func(string, string) bool { return true } // webhooks.APIServices before its informer synced
	cases := []struct {
		name       string
		req        *entities.Request
		aggregated func(group, version string) bool
		want       string
	}{
		{"apps/v1 served by kube-apiserver", deployments, noneAggregated, labelConditionalAllow},
		{"apps/v1 served by an aggregated API server", deployments, appsAggregated, engine.DecisionNoOpinion.String()},
		{"the APIServices not listed yet", deployments, notSynced, engine.DecisionNoOpinion.String()},
		{"no APIService view at all", deployments, nil, engine.DecisionNoOpinion.String()},
		{"core/v1 beside an aggregated apps", pods, appsAggregated, labelConditionalAllow},
		{"core/v1 with a deny condition, not listed yet", pods, notSynced, engine.DecisionDeny.String()},
	}
	for _, tc := range cases {
		d := az.Authorize(context.Background(), tc.req)
		if !d.IsConditional() {
			t.Fatalf("%s: %v, want a conditional decision to render", tc.name, d)
		}
		caller := sarCaller{AdmissionEnforced: true, MayBeAggregated: tc.aggregated}
		a := authorizeSubjectAccessReview(context.Background(), az, tc.req, caller, nil)
		if a.Label != tc.want || a.Status.Allowed != (tc.want == labelConditionalAllow) || a.Status.Denied != (tc.want == engine.DecisionDeny.String()) {
			t.Errorf("%s: %s (allowed=%v denied=%v), want %s", tc.name, a.Label, a.Status.Allowed, a.Status.Denied, tc.want)
		}
	}
}

func mustPolicies(t testing.TB, src string) *cedarlang.PolicySet {
	t.Helper()
	ps, err := cedarlang.ParsePolicies("test.cedar", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func resReq(user string, groups []string, verb, group, resource, sub, ns, name string) *entities.Request {
	return &entities.Request{User: entities.UserInfo{Name: user, Groups: groups}, Verb: verb, ResourceRequest: true,
		APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

// With admission enforcement, a conditional allow is answered Allow only
// for a user the verified webhook sees (Options.AdmissionWebhookSees): its
// matchConditions leave some identities out, whose writes it never checks.
func TestAdmissionEnforcedOnlyForUsersTheWebhookSees(t *testing.T) {
	dir := t.TempDir()
	policy := `@id("pods-on-safe") permit(principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe" };`
	if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	st := store.NewStore([]string{dir}, nil, quietLogger())
	if err := st.Load(); err != nil {
		t.Fatal(err)
	}
	seen := func(user string, groups []string) bool { return !slices.Contains(groups, "system:masters") }
	s := New(storeAuthorizer(schematest.Schema(), st, nil, engine.EngineOptions{}), Options{Logger: quietLogger(),
		AdmissionEnforcement: true, AdmissionWebhookSees: seen, AggregatedAPI: func(string, string) bool { return false }})
	for _, tc := range []struct {
		groups []string
		allow  bool
	}{{[]string{"dev"}, true}, {[]string{"system:masters"}, false}} {
		st := sarStatus(t, s, sarBody("lead", tc.groups, "create", "pods", "a", false))
		if st.Allowed != tc.allow {
			t.Errorf("groups %v: allowed=%v, want %v (the webhook sees them: %v)", tc.groups, st.Allowed, tc.allow, tc.allow)
		}
	}
}
