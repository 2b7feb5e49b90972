package generate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
	"github.com/kcedar/kcedar/internal/tools/replay"
)

// paymentsPermit is the node-restricted permit of kcedar issue 44.
const paymentsPermit = `@id("payments-dev-on-node-1")
permit (principal in k8s::Group::"payments-dev", action == k8s::Action::"create", resource is core::pods)
when { resource.namespace == "payments" && resource has object && resource.object has v1 && resource.object.v1 has spec
  && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "payments-node-1" };`

// decider is an engine over texts, valid against s.
func decider(t *testing.T, s *schemagen.Schema, texts ...[]byte) *engine.Engine {
	t.Helper()
	return engine.NewEngine(s, valid(t, s, texts...), engine.EngineOptions{})
}

// The scenario of issue 44: the existing policies allow payments-dev's
// creates of pods in payments on a condition on the pod. Those creates
// are not generated, and no generated policy allows one without the
// condition: not alice's, whose other group ops another member's
// identical create is granted to (that grant is written for the member).
func TestConditionalPermitIsNeverWidened(t *testing.T) {
	s := embeddedschema.Schema(t)
	alice, bob, carol := person("alice", "payments-dev", "ops"), person("bob", "payments-dev"), person("carol", "ops")
	create := "/api/v1/namespaces/payments/pods?fieldManager=kubectl-create"
	log := logOf(t,
		logged{alice, "create", create, "allow"},
		logged{bob, "create", create, "allow"},
		logged{alice, "get", "/api/v1/namespaces/payments/pods/web", "allow"},
		logged{carol, "create", create, "allow"}, // allowed by something else (RBAC)
		logged{bob, "create", "/api/v1/namespaces/dev/pods", "allow"},
	)
	for _, opts := range []Options{{}, {Names: NamesAny}, {GroupSubjects: []string{"ops", "payments-dev"}, Names: NamesAny}} {
		opts.Existing = valid(t, s, []byte(paymentsPermit))
		res := generateFrom(t, s, opts, log)
		if res.Stats.ConditionallyAllowed != 2 || !strings.Contains(string(res.Text), "2 allowed requests are allowed by the existing policies on conditions") {
			t.Errorf("groups %v: %d conditionally allowed, want alice's and bob's creates:\n%s", opts.GroupSubjects, res.Stats.ConditionallyAllowed, res.Text)
		}
		gen := decider(t, s, res.Text)
		for _, rec := range records(t, log) {
			got := gen.Authorize(context.Background(), rec.Request).IsAllowed()
			conditional := rec.Request.Namespace == "payments" && rec.Request.Verb == "create" && rec.Request.User.Name != "carol"
			if got == conditional {
				t.Errorf("groups %v: %s: allowed by the generated policies %v, want %v:\n%s", opts.GroupSubjects, rec.Request, got, !conditional, res.Text)
			}
		}
	}
}

// conditionalPermits allow groups of the synthesized users some verbs on
// conditions on the object: decided at authorization as conditional for
// the verbs admission sees an object of.
func conditionalPermits() []byte {
	var b strings.Builder
	for i, c := range []struct{ group, actions, typ string }{
		{"dev", `action in [k8s::Action::"create", k8s::Action::"update", k8s::Action::"delete"]`, "core::pods"},
		{"dev", `action`, "apps::deployments"},
		{"ops", `action`, "core::configmaps"},
		{"ops", `action`, "core::secrets"},
		{"ops", `action == k8s::Action::"create"`, "core::services"},
		{"qa", `action`, "batch::jobs"},
		{"qa", `action in [k8s::Action::"create", k8s::Action::"patch"]`, "io::k8s::authorization::rbac::roles"},
		{"auditors", `action`, "core::pods"},
	} {
		fmt.Fprintf(&b, "@id(\"c%d\")\npermit (principal in k8s::Group::%q, %s, resource is %s)\nwhen { resource has object && resource.object has v1 };\n",
			i, c.group, c.actions, c.typ)
	}
	return []byte(b.String())
}

// TestConditionalAllowsAreNeverWidened: over synthesized logs decided by
// generated RBAC and existing policies that allow some requests on
// conditions on the object (which held), in every names mode and with
// group subjects: no generated policy allows a request the existing
// policies allow on conditions, and every other allowed request of a
// non-system identity is allowed by the existing or the generated
// policies.
func TestConditionalAllowsAreNeverWidened(t *testing.T) {
	s := embeddedschema.Schema(t)
	existingText := conditionalPermits()
	existing := decider(t, s, existingText)
	for _, seed := range []uint64{11, 12} {
		// The cluster allows what its RBAC allows, and what kcedar allows
		// on conditions (that held).
		rbac := rbacAllows(testgen.RBACConfig(seed, 40, 80))
		log := synthesize(t, seed, 3000, func(req *entities.Request) bool {
			return rbac(req) || existing.Authorize(context.Background(), req).IsConditional()
		})
		for _, opts := range []Options{{Names: NamesAny}, {Names: NamesAuto, MaxNames: 2, GroupSubjects: []string{"ops", "dev", "qa", "auditors"}}} {
			opts.Existing = valid(t, s, existingText)
			res := generateFrom(t, s, opts, log)
			union := decider(t, s, existingText, res.Text)
			gen := decider(t, s, res.Text)
			conditional := 0
			for _, rec := range records(t, log) {
				if !rec.Allowed || SystemClass(rec.Request.User) != "" {
					continue
				}
				d := existing.Authorize(context.Background(), rec.Request)
				switch {
				case d.IsConditional() && len(d.AllowConditions()) > 0:
					conditional++
					if gen.Authorize(context.Background(), rec.Request).IsAllowed() {
						t.Errorf("seed %d, groups %v: a generated policy allows %s, which the existing policies allow only on conditions", seed, opts.GroupSubjects, rec.Request)
					}
				case !union.Authorize(context.Background(), rec.Request).IsAllowed():
					t.Errorf("seed %d, groups %v: %s is allowed by neither the existing nor the generated policies", seed, opts.GroupSubjects, rec.Request)
				}
			}
			if conditional < 40 || res.Stats.ConditionallyAllowed != conditional {
				t.Errorf("seed %d: %d conditionally allowed requests in the log, counted %d (want at least 40)", seed, conditional, res.Stats.ConditionallyAllowed)
			}
			t.Logf("seed %d, groups %v: %d policies, %d requests conditionally allowed; %+v", seed, opts.GroupSubjects, res.Count, conditional, res.Outcome)
		}
	}
}

// TestRBACAllowedIsLeftOut: with half of the cluster's RBAC given as
// Options.RBAC, the generated policies and that RBAC together allow every
// allowed request of a non-system identity, and no generated policy is
// needed only for requests the RBAC allows.
func TestRBACAllowedIsLeftOut(t *testing.T) {
	s := embeddedschema.Schema(t)
	for _, seed := range []uint64{13, 14} {
		cluster := testgen.RBACConfig(seed, 40, 80)
		log := synthesize(t, seed, 3000, rbacAllows(cluster))
		half := &rbacconvert.Input{Roles: cluster.Roles, ClusterRoles: cluster.ClusterRoles,
			RoleBindings: cluster.RoleBindings[:len(cluster.RoleBindings)/2], ClusterRoleBindings: cluster.ClusterRoleBindings[:len(cluster.ClusterRoleBindings)/2]}
		conv, err := rbacconvert.Convert(s, half)
		if err != nil {
			t.Fatal(err)
		}
		res := generateFrom(t, s, Options{RBAC: valid(t, s, conv.Policies), RBACSource: "half the RBAC"}, log)
		checkReplay(t, s, valid(t, s, conv.Policies, res.Text), log)
		byRBAC := checkNoRedundantPolicy(t, s, valid(t, s, conv.Policies), res.Text, log)
		if res.Stats.AllowedByRBAC != byRBAC || byRBAC < 50 || !strings.Contains(string(res.Text), fmt.Sprintf("%d allowed requests are allowed by half the RBAC", byRBAC)) {
			t.Errorf("seed %d: %d requests counted as allowed by the RBAC, %d are (want at least 50):\n%.800s", seed, res.Stats.AllowedByRBAC, byRBAC, res.Text)
		}
	}
}

// reachConfig is an AuthorizationConfiguration whose kcedar webhook skips
// kcedar's own ServiceAccount and the nodes, as kcedar manifests' does.
const reachConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: kcedar
  webhook:
    timeout: 3s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    connectionInfo: {type: InClusterConfig}
    matchConditions:
    - expression: request.user != 'system:serviceaccount:kcedar-system:kcedar'
    - expression: "!has(request.groups) || !('system:nodes' in request.groups)"
- type: RBAC
  name: rbac
`

// TestReachLeavesOutWhatKcedarNeverSees: requests the webhook's
// matchConditions send around kcedar (its own ServiceAccount, the nodes)
// are left out even with IncludeSystem, and counted by the condition.
func TestReachLeavesOutWhatKcedarNeverSees(t *testing.T) {
	s := embeddedschema.Schema(t)
	reach, err := replay.NewReach([]byte(reachConfig), "")
	if err != nil {
		t.Fatal(err)
	}
	kcedar := withAuthenticated(authnv1.UserInfo{Username: "system:serviceaccount:kcedar-system:kcedar",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kcedar-system"}})
	node := withAuthenticated(authnv1.UserInfo{Username: "system:node:n1", Groups: []string{"system:nodes"}})
	var reqs []logged
	for _, uri := range []string{"/apis/kcedar.dev/v1alpha1/cedarpolicies?limit=500", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?limit=500",
		"/apis/coordination.k8s.io/v1/namespaces/kcedar-system/leases/kcedar"} {
		reqs = append(reqs, logged{kcedar, "list", uri, "allow"})
	}
	reqs = append(reqs, logged{node, "get", "/api/v1/nodes/n1", "allow"}, logged{person("alice"), "get", "/api/v1/namespaces/team/pods/web", "allow"})
	res := generateFrom(t, s, Options{Reach: reach, IncludeSystem: true}, logOf(t, reqs...))
	if res.Count != 1 || !strings.Contains(string(res.Text), "generated/alice/pods-get") {
		t.Errorf("want alice's policy alone:\n%s", res.Text)
	}
	for why, n := range map[string]int{
		"excluded by the matchCondition of authorizer kcedar: request.user != 'system:serviceaccount:kcedar-system:kcedar'": 3,
		"excluded by the matchCondition of authorizer kcedar: !has(request.groups) || !('system:nodes' in request.groups)":  1,
	} {
		if res.Stats.NotSeen[why] != n || !strings.Contains(string(res.Text), fmt.Sprintf("//   %d requests: %s", n, why)) {
			t.Errorf("not seen %q: %d, want %d:\n%s", why, res.Stats.NotSeen[why], n, res.Text)
		}
	}
}

// The requests of a conditional decision without allow conditions (only
// a forbid's) are not covered: nothing can allow them.
func TestConditionalDenyIsNotCoverage(t *testing.T) {
	s := embeddedschema.Schema(t)
	forbid := []byte(`@id("no-privileged") forbid (principal, action, resource is core::pods) when { resource has object && resource.object has v1 };`)
	g := New(s, Options{Existing: valid(t, s, forbid)})
	req := &entities.Request{User: entities.UserInfo{Name: "alice", Groups: []string{"system:authenticated"}}, Verb: "create",
		ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "team"}
	d := g.existing.Authorize(context.Background(), req)
	if !d.IsConditional() || len(d.AllowConditions()) != 0 {
		t.Fatalf("the request's decision: %v, want conditional with deny conditions only", d.Type())
	}
	if c := g.coverageOf(req); c != notCovered {
		t.Errorf("coverage %d, want none", c)
	}
}
