package engine

import (
	"context"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
)

// A user whom only a forbid names sees it in what-can: the rule it denies,
// with its policy, unconditional or with its condition.
func TestWhatCanListsForbids(t *testing.T) {
	ps := policytest.Set(t, `
@id("frank-no-secrets") forbid(principal == k8s::User::"frank", action, resource is core::secrets);
@id("no-x") forbid(principal == k8s::User::"frank", action == k8s::Action::"delete", resource is core::pods) when { resource.name == "x" };
@id("no-metrics") forbid(principal == k8s::User::"frank", action == k8s::Action::"get", resource is k8s::NonResourceURL) when { resource.path == "/metrics" };
@id("dev") permit(principal in k8s::Group::"dev", action, resource is core::pods);
`)
	az := NewEngine(embeddedschema.Schema(t), ps, EngineOptions{})
	rv := whatCan(t, az, entities.UserInfo{Name: "frank"}, "team-a")
	if len(rv.ResourceRules) != 0 || len(rv.NonResourceRules) != 0 {
		t.Errorf("frank is allowed nothing: %+v", rv)
	}
	find := func(id string) *DeniedRule {
		for i, r := range rv.Denied {
			if slices.Equal(r.Policies, []string{id}) {
				return &rv.Denied[i]
			}
		}
		return nil
	}
	if r := find("frank-no-secrets"); r == nil || !slices.Equal(r.Resources, []string{"secrets"}) || len(r.When) != 0 || !slices.Contains(r.Verbs, "get") {
		t.Errorf("secrets: %+v", r)
	}
	if r := find("no-x"); r == nil || !slices.Equal(r.Verbs, []string{"delete"}) || len(r.When) != 1 || !strings.Contains(r.When[0], `"x"`) {
		t.Errorf("pods named x: %+v", r)
	}
	if r := find("no-metrics"); r == nil || !slices.Equal(r.NonResourceURLs, []string{"*"}) || len(r.When) != 1 {
		t.Errorf("/metrics: %+v", r)
	}
	if dev := whatCan(t, az, entities.UserInfo{Name: "dana", Groups: []string{"dev"}}, "team-a"); len(dev.Denied) != 0 {
		t.Errorf("no forbid names dana: %+v", dev.Denied)
	}
}

// Denied rules, as a property: for generated policy sets and principals,
// every denied rule is a forbid that really denies (for every name) or, with
// conditions, leaves a deny condition on the request, and every typed
// resource and verb Authorize denies is listed by a denied rule.
func TestWhatCanDeniedAgreesWithAuthorize(t *testing.T) {
	s := embeddedschema.Schema(t)
	rng := rand.New(rand.NewSource(2510))
	sets := 20
	if testing.Short() {
		sets = 8
	}
	ctx := context.Background()
	checked, covered := 0, 0
	for i := 0; i < sets; i++ {
		src := genPrincipalPolicies(rng, 2+rng.Intn(7))
		az := NewEngine(s, policytest.Set(t, src), EngineOptions{})
		for _, u := range genUniverse(rng)[:3] {
			ns := pick(rng, []string{"", "team-a", "kube-system"})
			rv := whatCan(t, az, u, ns)
			listed := map[string]bool{}
			for _, r := range rv.Denied {
				for _, v := range r.Verbs {
					for _, res := range r.Resources {
						resource, sub, _ := strings.Cut(res, "/")
						listed[v+" "+r.APIGroups[0]+" "+res] = true
						reqNS := ns
						if tr, ok := s.Lookup(r.APIGroups[0], resource, sub); ok && !tr.Namespaced {
							reqNS = ""
						}
						req := &entities.Request{User: u, ResourceRequest: true, Verb: v, APIGroup: r.APIGroups[0], Resource: resource, Subresource: sub, Namespace: reqNS}
						if len(r.When) == 0 {
							req.Name = "any-name"
						}
						d := az.Authorize(ctx, req)
						if !forbidsIn(d, r.Policies) {
							t.Fatalf("set %d %s: denied rule %+v, but Authorize says %v (%s)\npolicies:\n%s", i, req, r, d.Type(), d.Reason(), src)
						}
						checked++
					}
				}
			}
			for k, r := range s.Resources {
				if r.AnySubresource {
					continue
				}
				res := k.Resource
				if k.Subresource != "" {
					res += "/" + k.Subresource
				}
				for _, v := range []string{"get", "list", "create", "delete"} {
					req := &entities.Request{User: u, ResourceRequest: true, Verb: v, APIGroup: k.Group, Resource: k.Resource, Subresource: k.Subresource}
					if r.Namespaced {
						req.Namespace = ns
					}
					if !az.Authorize(ctx, req).IsDenied() {
						continue
					}
					covered++
					if !listed[v+" "+k.Group+" "+res] {
						t.Fatalf("set %d %s: Authorize denies it, no denied rule lists it\ndenied: %+v\npolicies:\n%s", i, req, rv.Denied, src)
					}
				}
			}
		}
	}
	t.Logf("%d denied (rule, verb, resource) checked against Authorize; %d denials found listed", checked, covered)
	if checked < 50 || covered < 50 {
		t.Errorf("only %d checks, %d denials: the generator does not exercise forbids", checked, covered)
	}
}

// forbidsIn reports whether d is a Deny by one of the policies of ids (a
// decision stops at the first forbid that denies, and names it), or a
// decision with deny conditions from every policy of ids.
func forbidsIn(d Decision, ids []string) bool {
	if d.IsDenied() {
		return slices.ContainsFunc(policyIDs(d.Policies()), func(id string) bool { return slices.Contains(ids, id) })
	}
	if !d.IsConditional() {
		return false
	}
	var got []string
	for _, r := range d.DenyConditions() {
		got = append(got, r.Policy.ID)
	}
	for _, id := range ids {
		if !slices.Contains(got, id) {
			return false
		}
	}
	return true
}
