package cedarlang_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	cedarlib "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
)

// A sure test may only ever answer what cedar-go answers: whenever it says
// a request surely satisfies a policy, or surely does not, evaluating the
// policy on the same request (as the engine makes it Cedar data) gives that
// answer, without an error. Policies: the converted RBAC of a generated
// configuration, the team, other-shapes and fifth sets, the zoo, random
// predicates (error-prone reads included), each of those confined to a
// namespace, and each check alone. Requests: each generator's own, plus
// near misses (one of user, groups, verb, namespace, name or resource
// taken from another request). The test also checks that sure tests
// answer often, both ways (it could not fail otherwise).
func TestSureTestsAgreeWithCedar(t *testing.T) {
	s := embeddedschema.Schema(t)
	sets := surePolicySets(t, s)
	rng := rand.New(rand.NewPCG(5, 81))
	var answered [3]int
	for _, base := range sureRequests(t) {
		// The policies the index finds for base (where matches are), and
		// others, each against base and its near misses.
		var ps []*cedarlang.Policy
		for _, set := range sets {
			ps = append(ps, set.Candidates(cedarlang.NewCandidateQuery(base, entities.ResolveTarget(s, base), entities.Verbs(s, base)[0]))...)
			for range 3 {
				ps = append(ps, set.Policies[rng.IntN(len(set.Policies))])
			}
		}
		for _, req := range append([]*entities.Request{base}, nearMisses(rng, base)...) {
			f, ents, creq := requestData(s, req)
			for _, p := range ps {
				got := p.Surely(&f)
				want, err := holdsInCedar(p, ents, creq)
				if got != cedarlang.Unsure && (err != nil || want != (got == cedarlang.SurelySatisfied)) {
					t.Fatalf("sure test answers %v for %s on %+v; cedar-go says %v (error %v)\npolicy: %s", got, p.ID, *req, want, err, p.Text())
				}
				answered[got]++
				if p.SureReadsPrincipal() {
					withoutPrincipal := f
					withoutPrincipal.PrincipalAttributes = nil
					if p.Surely(&withoutPrincipal) != cedarlang.Unsure {
						t.Fatalf("%s: a sure test that reads the principal answers without its attributes", p.ID)
					}
				}
			}
		}
	}
	t.Logf("%d pairs surely satisfied, %d surely not, %d left to cedar-go", answered[cedarlang.SurelySatisfied], answered[cedarlang.SurelyNotSatisfied], answered[cedarlang.Unsure])
	if answered[cedarlang.SurelySatisfied] < 1000 || answered[cedarlang.SurelyNotSatisfied] < 1000 {
		t.Fatalf("only %v answers (unsure, satisfied, not): the test does not exercise sure tests", answered)
	}
}

// nearMisses are copies of r that each differ in one value: the user,
// groups (one dropped, or none), verb, namespace, name (or none), or the
// resource (another, or the Namespace object).
func nearMisses(rng *rand.Rand, r *entities.Request) []*entities.Request {
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "impersonate"}
	var out []*entities.Request
	for k := range 8 {
		m := *r
		switch k {
		case 0:
			m.User.Name = fmt.Sprintf("system:serviceaccount:ns-%d:sa-%d", rng.IntN(9), rng.IntN(50))
		case 1:
			if len(m.User.Groups) > 0 {
				m.User.Groups = m.User.Groups[1:]
			}
		case 2:
			m.Verb = verbs[rng.IntN(len(verbs))]
		case 3:
			m.Namespace = fmt.Sprintf("ns-%d", rng.IntN(9))
		case 4:
			m.Name = ""
		case 5:
			m.APIGroup, m.APIVersion, m.Resource, m.Subresource = "", "v1", "namespaces", ""
		case 6:
			m.APIGroup, m.APIVersion, m.Resource = "example.com", "v1", "widgets"
		default:
			m.Namespace = ""
		}
		out = append(out, &m)
	}
	return out
}

// surePolicySets are the policy sets the sure test is checked on.
func surePolicySets(t *testing.T, s *schemagen.Schema) []*cedarlang.PolicySet {
	var out []*cedarlang.PolicySet
	newSet := func(ps []*cedarlang.Policy) {
		set, err := cedarlang.NewPolicySet(ps)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, set)
	}
	add := func(name, src string) {
		ps, err := cedarlang.ParsePolicies(name, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		newSet(ps)
		var permits []*cedarlang.Policy
		for _, p := range ps {
			if p.Effect == types.Permit {
				permits = append(permits, p)
			}
		}
		confined, err := cedarlang.ConfineToNamespace(permits, fmt.Sprintf("ns-%d", len(out)%7), "c/")
		if err != nil {
			t.Fatal(err)
		}
		newSet(confined)
	}
	add("team.cedar", strings.Join(testgen.TeamAndNamespace(600), ""))
	add("shapes.cedar", strings.Join(testgen.OtherShapes(600), "\n"))
	add("zoo.cedar", zoo.Policies(600, 3))
	add("rbac.cedar", convertedRBAC(t, s))
	add("fifth.cedar", strings.Join(testgen.Fifth(600), "\n"))
	for i, o := range surePredicateOptions {
		add(fmt.Sprintf("random-%d.cedar", i), strings.Join(testgen.RandomPredicates(600, surePredicateSeed+uint64(i), o), "\n"))
	}
	// Each check alone, where no other check of the policy hides it.
	add("single.cedar", `
permit(principal, action, resource) when { resource has name };
permit(principal, action, resource) when { resource.name == "" };
permit(principal, action, resource) when { !(resource is core::namespaces) };
permit(principal, action == k8s::Action::"get", resource);
permit(principal, action in [k8s::Action::"list", k8s::Action::"*"], resource is core::pods);
permit(principal in k8s::Group::"system:authenticated", action, resource) when { "ns-1" == resource.namespace };
permit(principal is k8s::ServiceAccount, action, resource) when { resource is core::secrets || resource is core::configmaps };
permit(principal, action, resource) when { resource.apiGroup like "*.example.com" };
permit(principal, action, resource) when { resource has apiGroup && resource.apiGroup like "ex*" };
permit(principal, action, resource) when { resource.name like "web-*" || resource.namespace like "*-1" };
permit(principal, action, resource) when { ["ns-1", "ns-2"].contains(resource.namespace) };
permit(principal, action, resource) unless { resource has name && resource.name like "*a*" };
permit(principal is k8s::User, action, resource) when { principal has uid && ["u-1", "u-2"].contains(principal.uid) };
permit(principal is k8s::User, action, resource) when { principal.uid == "u-1" };
permit(principal is k8s::Node, action, resource) when { principal.name like "pool-*" };
permit(principal is k8s::ServiceAccount, action, resource) when { principal.namespace == resource.namespace };
permit(principal, action, resource) when { principal.name like "system:*" };
permit(principal, action, resource) when { !(resource has subresource) && !(resource.apiGroup == "") };
permit(principal, action, resource) when { resource has named && resource.named like "*" };
permit(principal, action, resource) when { resource has named && ["true"].contains(resource.named) };
permit(principal, action, resource) when { resource.named == "true" || principal.groups == "g" };
`)
	return out
}

// convertedRBAC is a generated RBAC configuration converted to Cedar.
func convertedRBAC(t *testing.T, s *schemagen.Schema) string {
	gen := testgen.RBACConfig(77, 40, 80)
	res, err := rbacconvert.Convert(s, &rbacconvert.Input{Roles: gen.Roles, ClusterRoles: gen.ClusterRoles, RoleBindings: gen.RoleBindings, ClusterRoleBindings: gen.ClusterRoleBindings})
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Policies)
}

// surePredicateSeed and surePredicateOptions draw the random predicate
// sets the sure test is checked on: error-prone reads, and valid ones.
const surePredicateSeed = 1<<20 + 77

var surePredicateOptions = []testgen.PredicateOptions{{}, {Valid: true, Selective: true, NoLabels: true, Templates: 40}}

// sureRequests are the generators' requests.
func sureRequests(t *testing.T) []*entities.Request {
	var base []*entities.Request
	base = append(base, testgen.FifthRequests(600, 300)...)
	for i, o := range surePredicateOptions {
		base = append(base, testgen.PredicateRequests(600, 300, surePredicateSeed+uint64(i), o)...)
	}
	base = append(base, testgen.TeamRequests(300)...)
	base = append(base, testgen.OtherShapesRequests(600, 600)...)
	base = append(base, zoo.Requests(600, 600, 4)...)
	for _, spec := range testgen.SubjectAccessReviews(78, 600) {
		req, err := entities.RequestFromSAR(&spec)
		if err != nil {
			t.Fatal(err)
		}
		base = append(base, req)
	}
	return base
}

// requestData is req (its first verb) as sure facts and as the Cedar data
// the engine evaluates a fully known request with.
func requestData(s *schemagen.Schema, req *entities.Request) (cedarlang.SureFacts, *entities.Entities, cedarlib.Request) {
	target := entities.ResolveTarget(s, req)
	action := schemagen.ActionUID(entities.Verbs(s, req)[0])
	resource := target.EntityUID(req)
	attrs := target.Attributes(req, nil, nil)
	principal := entities.PrincipalEntity(req.User)
	f := cedarlang.FactsOf(req, action, resource, attrs)
	f.PrincipalAttributes = &principal.Attributes
	ents := &entities.Entities{Principal: principal, Resource: types.Entity{UID: resource, Attributes: types.NewRecord(attrs)}}
	return f, ents, cedarlib.Request{Principal: principal.UID, Action: action, Resource: resource, Context: entities.ContextFor(action)}
}

// holdsInCedar evaluates p alone with cedar-go.
func holdsInCedar(p *cedarlang.Policy, ents *entities.Entities, req cedarlib.Request) (bool, error) {
	set := cedarlib.NewPolicySet()
	set.Add("p", p.Compiled())
	_, diag := cedarlib.Authorize(set, ents, req)
	if len(diag.Errors) > 0 {
		return false, fmt.Errorf("%s", diag.Errors[0].Message)
	}
	return len(diag.Reasons) > 0, nil
}
