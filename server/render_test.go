package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/wire"
)

// With admission enforcement, a conditional allow whose allow conditions
// were all dropped in encoding (here: the deny conditions fill every slot)
// has nothing for admission to enforce: it folds to Deny, as for a caller
// that cannot take conditions, never to an answer that is neither.
func TestAdmissionEnforcedWithoutAllowConditionsDenies(t *testing.T) {
	permit := `@id("bob-n1") permit(principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
`
	forbid := func(i int) string {
		return fmt.Sprintf(`@id("not-n%d") forbid(principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "x%d" };
`, i, i)
	}
	enforcing := serveConfig{server: Options{AdmissionEnforcer: enforced, AdmissionWebhookSees: func(string, []string) bool { return true }, AggregatedAPI: noneAggregated}}
	one, _ := serveText(t, permit+forbid(0), enforcing)
	body := sarBody("bob", nil, "create", "pods", "a", false)
	if st := sarStatus(t, one, body); !st.Allowed || st.Denied {
		t.Fatalf("one deny and one allow condition: %+v, want an enforced allow", st)
	}
	var many strings.Builder
	many.WriteString(permit)
	for i := range wire.MaxConditions {
		many.WriteString(forbid(i))
	}
	full, _ := serveText(t, many.String(), enforcing)
	if st := sarStatus(t, full, body); !st.Denied || st.Allowed {
		t.Fatalf("deny conditions only: %+v, want Deny", st)
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
	policies := `
@id("pods-on-safe") permit(principal == k8s::User::"lead", action in [k8s::Action::"create", k8s::Action::"get"], resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe" };
@id("ops-webhooks") permit(principal in k8s::Group::"ops", action == k8s::Action::"delete", resource is io::k8s::admissionregistration::validatingwebhookconfigurations)
unless { resource has oldObject && resource.oldObject.metadata has name && resource.oldObject.metadata.name like "kcedar*" };
@id("ops-secrets") permit(principal in k8s::Group::"ops", action in [k8s::Action::"delete", k8s::Action::"get"], resource is core::secrets)
unless { resource has oldObject && resource.oldObject.metadata has labels && resource.oldObject.metadata.labels.hasTag("protected") };
`
	az := engine.NewEngine(embeddedschema.Schema(t), policytest.Set(t, policies), engine.EngineOptions{})
	lead, ops := "lead", "mallory"
	// A validatingwebhookconfigurations/status update is exempt too: the
	// exemption is by kind.
	if az.AdmissionWebhookSees(policytest.ResourceRequest(ops, nil, "update", "admissionregistration.k8s.io", "validatingadmissionpolicies", "status", "", "p")) {
		t.Error("validatingadmissionpolicies/status: the webhook never sees it")
	}
	if !az.AdmissionWebhookSees(policytest.ResourceRequest(ops, nil, "create", "", "pods", "eviction", "a", "p")) || az.AdmissionWebhookSees(policytest.ResourceRequest(ops, nil, "get", "", "pods", "", "a", "p")) {
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
		if az.AdmissionWebhookSees(policytest.ResourceRequest(ops, nil, "create", r[0], r[1], "", ns, "")) {
			t.Errorf("create %s: kube-apiserver never sends it to admission webhooks", r[1])
		}
	}
	cases := []struct {
		name  string
		body  string
		allow bool
	}{
		{"create pods: admission sees it", sarJSON(lead, nil, "create", "", "pods", "a", ""), true},
		{"delete secrets: admission sees it", sarJSON(ops, []string{"ops"}, "delete", "", "secrets", "a", "s"), true},
		{"delete a webhook configuration: no webhook sees it", sarJSON(ops, []string{"ops"}, "delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "kcedar-conditions"), false},
	}
	s, _ := serveText(t, policies, serveConfig{schema: embeddedschema.Schema(t),
		server: Options{AdmissionEnforcer: enforced, AdmissionWebhookSees: func(string, []string) bool { return true }, AggregatedAPI: noneAggregated}})
	for _, tc := range cases {
		if st := sarStatus(t, s, tc.body); st.Allowed != tc.allow || st.Denied {
			t.Errorf("%s: %+v, want allowed %v", tc.name, st, tc.allow)
		}
		var strict map[string]any
		if err := json.Unmarshal([]byte(tc.body), &strict); err != nil {
			t.Fatal(err)
		}
		spec := strict["spec"].(map[string]any)
		// The decision is conditional, as a caller taking conditions sees.
		spec["authorizationOptions"] = map[string]any{"handledDecisionTypes": []string{"Allow", "Deny", "NoOpinion", "ConditionsMap", "Union"}}
		if b, _ := json.Marshal(strict); sarStatus(t, s, string(b)).ConditionalDecision == nil {
			t.Fatalf("%s: not conditional, nothing to enforce", tc.name)
		}
		delete(spec, "authorizationOptions")
		// A review asking for unconditional rights only (the escalation
		// check's) gets the folded decision, from any caller.
		spec["extra"] = map[string]any{entities.UnconditionalOnlyExtra: []string{"true"}}
		for _, handles := range []bool{false, true} {
			if handles {
				spec["authorizationOptions"] = map[string]any{"handledDecisionTypes": []string{"Allow", "Deny", "NoOpinion", "ConditionsMap", "Union"}}
			}
			b, _ := json.Marshal(strict)
			if st := sarStatus(t, s, string(b)); st.Allowed || st.ConditionalDecision != nil {
				t.Errorf("%s, unconditional rights only (conditions taken: %v): %+v, want the folded decision", tc.name, handles, st)
			}
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
	policies := `
@id("lead-deployments") permit(principal == k8s::User::"lead", action == k8s::Action::"create", resource is apps::deployments)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has replicas && resource.object.v1.spec.replicas < 5 };
@id("lead-pods") permit(principal == k8s::User::"lead", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe" };
@id("no-control-plane") forbid(principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "control" };
`
	review := func(group, resource string) string {
		b, _ := json.Marshal(map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": map[string]any{
			"user": "lead", "resourceAttributes": map[string]any{"verb": "create", "group": group, "version": "v1", "resource": resource, "namespace": "a"}}})
		return string(b)
	}
	deployments, pods := review("apps", "deployments"), review("", "pods")
	appsAggregated := func(group, version string) bool {
		return group == "apps" && (version == "v1" || version == "" || version == "*")
	}
	notSynced := func(string, string) bool { return true } // webhooks.APIServices before its informer synced
	cases := []struct {
		name       string
		body       string
		aggregated func(group, version string) bool
		want       string
	}{
		{"apps/v1 served by kube-apiserver", deployments, noneAggregated, labelConditionalAllow},
		{"apps/v1 served by an aggregated API server", deployments, appsAggregated, "NoOpinion"},
		{"the APIServices not listed yet", deployments, notSynced, "NoOpinion"},
		{"no APIService view at all", deployments, nil, "NoOpinion"},
		{"core/v1 beside an aggregated apps", pods, appsAggregated, labelConditionalAllow},
		{"core/v1 with a deny condition, not listed yet", pods, notSynced, "Deny"},
	}
	for _, tc := range cases {
		var buf syncBuffer
		s, _ := serveText(t, policies, serveConfig{schema: embeddedschema.Schema(t), server: Options{DecisionLog: NewDecisionLog(&buf, 1, 1e6, 1e6),
			AdmissionEnforcer: enforced, AdmissionWebhookSees: func(string, []string) bool { return true }, AggregatedAPI: tc.aggregated}})
		st := sarStatus(t, s, tc.body)
		recs := buf.records(t)
		if len(recs) != 1 || recs[0].Decision != tc.want || st.Allowed != (tc.want == labelConditionalAllow) || st.Denied != (tc.want == "Deny") {
			t.Errorf("%s: %+v, logged %+v, want %s", tc.name, st, recs, tc.want)
		}
	}
}

// With admission enforcement, a conditional allow is answered Allow only
// for a user the verified webhook sees (Options.AdmissionWebhookSees): its
// matchConditions leave some identities out, whose writes it never checks.
func TestAdmissionEnforcedOnlyForUsersTheWebhookSees(t *testing.T) {
	policy := `@id("pods-on-safe") permit(principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe" };`
	seen := func(user string, groups []string) bool { return !slices.Contains(groups, "system:masters") }
	s, _ := serveText(t, policy, serveConfig{server: Options{AdmissionEnforcer: enforced, AdmissionWebhookSees: seen, AggregatedAPI: noneAggregated}})
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
