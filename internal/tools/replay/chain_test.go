package replay

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/upstream"
)

// rbacPolicies are RBAC grants as kcedar rbac convert writes them: carol
// (dev) views pods everywhere, tom (team-a) creates configmaps in shared,
// dan reads secrets in dev.
const rbacPolicies = `
@id("rbac/ClusterRoleBinding//view/view/0")
permit (principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods);
@id("rbac/RoleBinding/shared/tom/edit/0")
permit (principal == k8s::User::"tom", action == k8s::Action::"create", resource is core::configmaps)
when { resource.namespace == "shared" };
@id("rbac/RoleBinding/dev/dan/read/0")
permit (principal == k8s::User::"dan", action == k8s::Action::"get", resource is core::secrets)
when { resource.namespace == "dev" };
`

// kcedar sits before RBAC: requests RBAC allowed while kcedar had no
// opinion are unchanged with the chain and "newly denied" with kcedar
// alone; a kcedar forbid still denies what RBAC grants; each change names
// the authorizer that decided. The mode decides a conditional create:
// folded (then RBAC decides), answered Allow under admission enforcement,
// evaluated against the logged object with conditional authorization.
func TestReplayComposesTheChain(t *testing.T) {
	log := lines(t,
		event("r1", "get", "/api/v1/namespaces/prod/pods/web", user("carol", "dev"), "allow"), // RBAC allows
		event("r2", "list", "/api/v1/namespaces/prod/pods", user("carol", "dev"), "allow"),    // RBAC allows
		event("k1", "get", "/api/v1/namespaces/dev/pods/web", user("carol", "dev"), "allow"),  // kcedar allows
		event("f1", "get", "/api/v1/namespaces/dev/secrets/s", user("dan", "contractors"), "forbid"),
		event("c1", "create", "/api/v1/namespaces/shared/configmaps", user("tom", "team-a"), "allow"),
		event("c2", "create", "/api/v1/namespaces/shared/configmaps", user("una", "team-a"), "allow"),
	)
	for _, tc := range []struct {
		name    string
		opts    Options
		want    Summary
		changes string
		text    string
	}{
		{"kcedar alone", Options{}, Summary{Decided: 6, Unchanged: 2, NewlyDenied: 4},
			"r1:NoOpinion: r2:NoOpinion: c1:NoOpinion: c2:NoOpinion:", "chain:          kcedar alone (kcedar serve mode: none)"},
		{"kcedar, then RBAC", Options{RBAC: policytest.Set(t, rbacPolicies)}, Summary{Decided: 6, Unchanged: 5, NewlyDenied: 1},
			"c2:NoOpinion:", "chain:          kcedar, then RBAC (kcedar serve mode: none)"},
		{"RBAC first", Options{RBAC: policytest.Set(t, rbacPolicies), RBACFirst: true}, Summary{Decided: 6, Unchanged: 4, NewlyDenied: 1, NewlyAllowed: 1},
			"f1:Allow:rbac c2:NoOpinion:", "chain:          RBAC, then kcedar"},
		{"admission enforcement", Options{RBAC: policytest.Set(t, rbacPolicies), Mode: upstream.ServeModeAdmissionEnforcement}, Summary{Decided: 6, Unchanged: 6},
			"", "(kcedar serve mode: admission-enforcement)"},
		{"conditional authorization", Options{RBAC: policytest.Set(t, rbacPolicies), Mode: upstream.ServeModeConditionsReview}, Summary{Decided: 5, Unchanged: 5, Conditional: 1},
			"", "(kcedar serve mode: conditions-review)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, changes := replay(t, testPolicies, tc.opts, log)
			tc.want.Lines, tc.want.Events, tc.want.Requests = 6, 6, 6
			checkCounts(t, s, tc.want)
			var got []string
			for _, c := range changes {
				got = append(got, c.AuditID+":"+c.Now+":"+c.DecidedBy)
			}
			if strings.Join(got, " ") != tc.changes {
				t.Errorf("changes %q, want %q", strings.Join(got, " "), tc.changes)
			}
			var text bytes.Buffer
			if err := s.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), tc.text) {
				t.Errorf("the summary does not say %q:\n%s", tc.text, text.String())
			}
		})
	}
}

// The AuthorizationConfiguration says where RBAC sits and whether kcedar's
// webhook takes conditions.
func TestReachReadsTheChain(t *testing.T) {
	for _, tc := range []struct {
		config         string
		present, first bool
		conditions     bool
	}{
		{manifestsReach, true, false, false},
		{strings.Replace(manifestsReach, "    matchConditions:", "    conditionsReview: {version: v1alpha1, kubeConfigContextName: conditions}\n    matchConditions:", 1), true, false, true},
		{strings.Replace(manifestsReach, "- type: RBAC\n  name: rbac\n", "", 1), false, false, false},
		{strings.Replace(strings.Replace(manifestsReach, "- type: RBAC\n  name: rbac\n", "", 1), "- type: Node\n", "- type: RBAC\n  name: rbac\n- type: Node\n", 1), true, true, false},
	} {
		r, err := NewReach([]byte(tc.config), "kcedar")
		if err != nil {
			t.Fatal(err)
		}
		present, first := r.RBACPosition()
		if present != tc.present || first != tc.first || r.ConditionsReview() != tc.conditions {
			t.Errorf("RBAC present %v first %v, conditionsReview %v; want %v %v %v in\n%s", present, first, r.ConditionsReview(), tc.present, tc.first, tc.conditions, tc.config)
		}
	}
}
