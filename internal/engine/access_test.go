package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
)

func whoCanReq(verb, group, resource, sub, ns, name string) *entities.Request {
	return &entities.Request{ResourceRequest: true, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

func TestWhoCanHandPicked(t *testing.T) {
	s := embeddedschema.Schema(t)
	ps := policytest.Set(t, `
@id("team-a") permit(principal in k8s::Group::"team-a", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods)
when { resource.namespace like "team-a-*" };
@id("alice") permit(principal == k8s::User::"alice", action, resource is core::pods);
@id("sa") permit(principal == k8s::ServiceAccount::"system:serviceaccount:team-a-dev:ci", action == k8s::Action::"get", resource is core::pods);
@id("sas") permit(principal is k8s::ServiceAccount, action == k8s::Action::"get", resource is core::pods)
when { principal.namespace == "monitoring" };
@id("pattern") permit(principal, action == k8s::Action::"get", resource is core::pods)
when { principal.username like "oidc:*" && principal.hasTag("scopes") && principal.getTag("scopes").contains("pods") };
@id("no-contractors") forbid(principal in k8s::Group::"contractors", action, resource is core::pods)
when { resource.namespace like "*-prod" };
@id("node") permit(principal is k8s::Node, action == k8s::Action::"get", resource is core::pods)
when { resource has oldObject };
@id("never") permit(principal == k8s::User::"system:serviceaccount:team-a-dev:builder", action, resource is core::pods);
@id("user-named-like-a-node") permit(principal == k8s::User::"system:node:n2", action, resource is core::pods);
`)
	az := NewEngine(s, ps, EngineOptions{})
	rv := whoCan(t, az, whoCanReq("get", "", "pods", "", "team-a-dev", ""))
	if want := []string{"alice", "system:node:n2", "system:serviceaccount:team-a-dev:ci"}; !slices.Equal(rv.Users, want) {
		t.Errorf("users = %v, want %v", rv.Users, want)
	}
	if want := []string{"team-a"}; !slices.Equal(rv.Groups, want) {
		t.Errorf("groups = %v, want %v", rv.Groups, want)
	}
	var sas, pattern bool
	for _, a := range rv.Allowed {
		if a.Kind == SubjectServiceAccounts && a.Namespace == "monitoring" && slices.Equal(a.Policies, []string{"sas"}) {
			sas = true
		}
	}
	for _, a := range rv.Conditional {
		if a.Kind == SubjectUsernamePattern && a.Name == `"oidc:*"` && strings.Contains(a.Condition, `getTag("scopes")`) {
			pattern = true
		}
		if slices.Contains(a.Policies, "node") || slices.Contains(a.Policies, "never") {
			t.Errorf("a get has no stored object and user system:node:n1 is never a User: %+v", a)
		}
	}
	if !sas || !pattern {
		t.Errorf("missing the ServiceAccounts or the pattern entry: %+v", rv)
	}
	// The namespace is known: the contractors' forbid cannot hold.
	if len(rv.Denied) != 0 {
		t.Errorf("denied = %+v", rv.Denied)
	}
	rv = whoCan(t, az, whoCanReq("get", "", "pods", "", "", ""))
	if len(rv.Denied) != 1 || rv.Denied[0].Name != "contractors" || rv.Denied[0].Condition == "" {
		t.Errorf("every namespace: denied = %+v", rv.Denied)
	}
	for _, u := range []entities.UserInfo{{Name: "bob", Groups: []string{"team-a"}}, {Name: "alice", Groups: []string{"contractors"}}} {
		if got, want := rv.Decide(u, ps).Type(), az.Authorize(context.Background(), &entities.Request{User: u, ResourceRequest: true, Verb: "get", Resource: "pods"}).Type(); got != want {
			t.Errorf("%s: rule says %v, Authorize %v", u.Name, got, want)
		}
	}
}

// The bar, as a property: for generated policy sets and questions
// (with forbids, unless, open names and namespaces, verb "*", principal
// conditions on groups, extra, usernames and types), the review's rule gives
// every principal of a generated universe the decision Authorize gives it.
func TestWhoCanRuleEqualsAuthorize(t *testing.T) {
	s := embeddedschema.Schema(t)
	rng := rand.New(rand.NewSource(14))
	sets, perSet := 1000, 10
	if testing.Short() {
		sets = 150
	}
	stats := map[string]int{}
	questions, checks := 0, 0
	for i := 0; i < sets; i++ {
		src := genPrincipalPolicies(rng, 2+rng.Intn(7))
		ps := policytest.Set(t, src)
		az := NewEngine(s, ps, EngineOptions{})
		universe := genUniverse(rng)
		for j := 0; j < perSet; j++ {
			q := genWhoCanQuestion(rng)
			rv := whoCan(t, az, q)
			if len(rv.Errors) > 0 {
				t.Fatalf("set %d: %s: %v\npolicies:\n%s", i, q, rv.Errors, src)
			}
			questions++
			for _, u := range universe {
				req := *q
				req.User = u
				want := az.Authorize(context.Background(), &req)
				got := rv.Decide(u, ps)
				stats[want.Type().String()]++
				checks++
				if got.Type() != want.Type() || conditionalIDs(got) != conditionalIDs(want) {
					t.Fatalf("set %d question %s principal %+v: the review's rule says %v %s, Authorize says %v %s (%s)\nreview: %+v\npolicies:\n%s",
						i, q, u, got.Type(), conditionalIDs(got), want.Type(), conditionalIDs(want), want.Reason(), rv, src)
				}
			}
		}
	}
	t.Logf("%d questions, %d principal decisions agree: %v", questions, checks, stats)
	for _, k := range []string{"Allow", "Deny", "NoOpinion", "Conditional"} {
		if stats[k] < checks/100 {
			t.Errorf("only %d %s decisions: the generator does not exercise them", stats[k], k)
		}
	}
}

func conditionalIDs(d Decision) string {
	if !d.IsConditional() {
		return ""
	}
	var deny, allow []string
	for _, r := range d.DenyConditions() {
		deny = append(deny, r.Policy.ID)
	}
	for _, r := range d.AllowConditions() {
		allow = append(allow, r.Policy.ID)
	}
	slices.Sort(deny)
	slices.Sort(allow)
	return fmt.Sprintf("deny%v allow%v", deny, allow)
}

var (
	wcUsers  = []string{"alice", "bob", "oidc:carol", "system:serviceaccount:team-a:sa", "system:serviceaccount:kube-system:default", "system:node:n1", "system:node:n2", "system:anonymous"}
	wcGroups = []string{"dev", "ops", "system:serviceaccounts:team-a", "system:authenticated"}
)

func genPrincipalPolicies(rng *rand.Rand, n int) string {
	principalAtoms := []string{
		`principal.groups.contains("dev")`,
		`principal in k8s::Group::"ops"`,
		`principal.username like "system:serviceaccount:team-a:*"`,
		`principal.username like "oidc:*"`,
		`principal.username == "bob"`,
		`principal is k8s::ServiceAccount && principal.namespace == "team-a"`,
		`principal is k8s::ServiceAccount && principal.namespace == "team-a" && principal.name == "sa"`,
		`principal is k8s::Node && principal.name == "n1"`,
		`principal is k8s::ServiceAccount`,
		`principal has uid`,
		`principal.hasTag("scopes") && principal.getTag("scopes").contains("x")`,
		`principal.getTag("scopes").contains("x")`, // fails without the tag
		`principal == k8s::User::"alice"`,
		`principal is k8s::Node && resource has name && resource.name == principal.name`,
	}
	resourceAtoms := []string{
		`(resource has namespace && resource.namespace == "team-a")`,
		`(resource has namespace && resource.namespace like "team-*")`,
		`(resource has name && resource.name == "p1")`,
		`(resource has name && resource.name like "web-*")`,
		`!(resource has namespace)`,
		`(resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("env"))`,
		`resource has oldObject`,
		`(resource has object && resource.object.metadata has name && resource.object.metadata.name == "p1")`,
		`(resource is k8s::NonResourceURL && resource.path like "/health*")`,
	}
	scopes := []string{
		"principal", "principal", "principal",
		`principal == k8s::User::"alice"`,
		`principal == k8s::ServiceAccount::"system:serviceaccount:team-a:sa"`,
		`principal == k8s::Node::"system:node:n1"`,
		`principal == k8s::User::"system:node:n1"`,
		`principal in k8s::Group::"dev"`,
		`principal in k8s::Group::"system:serviceaccounts:team-a"`,
		`principal in k8s::User::"bob"`,
		`principal is k8s::ServiceAccount`,
		`principal is k8s::Node`,
		`principal is k8s::User in k8s::Group::"ops"`,
	}
	verbs := []string{"get", "list", "create", "update", "delete"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		effect := "permit"
		if rng.Intn(10) < 3 {
			effect = "forbid"
		}
		action := "action"
		switch rng.Intn(4) {
		case 0:
			action = fmt.Sprintf("action == k8s::Action::%q", pick(rng, verbs))
		case 1:
			action = fmt.Sprintf("action in [k8s::Action::%q, k8s::Action::%q]", pick(rng, verbs), pick(rng, verbs))
		}
		resource := pick(rng, []string{"resource", "resource", "resource is core::pods", "resource is core::pods", "resource is core::nodes", "resource is apps::deployments", "resource is k8s::Resource"})
		fmt.Fprintf(&b, "@id(\"p%d\")\n%s(%s, %s, %s)", i, effect, pick(rng, scopes), action, resource)
		for k := rng.Intn(3); k > 0; k-- {
			if rng.Intn(3) == 0 {
				continue
			}
			var atoms []string
			for m := 1 + rng.Intn(2); m > 0; m-- {
				if rng.Intn(2) == 0 {
					atoms = append(atoms, "("+pick(rng, principalAtoms)+")")
				} else {
					atoms = append(atoms, pick(rng, resourceAtoms))
				}
			}
			op := pick(rng, []string{" && ", " || "})
			fmt.Fprintf(&b, " %s { %s }", pick(rng, []string{"when", "when", "unless"}), strings.Join(atoms, op))
		}
		b.WriteString(";\n")
	}
	return b.String()
}

func genUniverse(rng *rand.Rand) []entities.UserInfo {
	var out []entities.UserInfo
	for _, name := range wcUsers {
		u := entities.UserInfo{Name: name}
		for _, g := range wcGroups {
			if rng.Intn(3) == 0 {
				u.Groups = append(u.Groups, g)
			}
		}
		if rng.Intn(2) == 0 {
			u.UID = "uid-" + name
		}
		switch rng.Intn(3) {
		case 0:
			u.Extra = map[string][]string{"scopes": {"x"}}
		case 1:
			u.Extra = map[string][]string{"scopes": {"y"}}
		}
		out = append(out, u)
	}
	return out
}

func genWhoCanQuestion(rng *rand.Rand) *entities.Request {
	r := pick(rng, [][3]string{{"", "pods", ""}, {"", "nodes", ""}, {"apps", "deployments", ""}, {"", "pods", "exec"}, {"example.com", "foos", ""}, {"*", "*", ""}})
	verb := pick(rng, []string{"get", "list", "create", "update", "delete", "get", "create", "update"})
	if rng.Intn(25) == 0 {
		verb = "*"
	}
	q := whoCanReq(verb, r[0], r[1], r[2], "", "")
	if rng.Intn(15) == 0 {
		return &entities.Request{Verb: pick(rng, []string{"get", "post", "*"}), Path: pick(rng, []string{"/healthz", "/metrics"})}
	}
	if rng.Intn(2) == 0 {
		q.Namespace = pick(rng, []string{"team-a", "team-b", "kube-system"})
	}
	if rng.Intn(2) == 0 {
		q.Name = pick(rng, []string{"p1", "web-1", "n1", "zzz"})
	}
	return q
}

func TestWhatCan(t *testing.T) {
	s := embeddedschema.Schema(t)
	ps := policytest.Set(t, `
@id("read") permit(principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods);
@id("named") permit(principal in k8s::Group::"dev", action == k8s::Action::"get", resource is core::configmaps)
when { ["app-config", "flags"].contains(resource.name) };
@id("create-labelled") permit(principal in k8s::Group::"dev", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("team") };
@id("not-secret-x") forbid(principal, action == k8s::Action::"get", resource is core::secrets) when { resource.name == "x" };
@id("secrets") permit(principal in k8s::Group::"dev", action == k8s::Action::"get", resource is core::secrets);
@id("healthz") permit(principal, action == k8s::Action::"get", resource is k8s::NonResourceURL) when { resource.path == "/healthz" || resource.path like "/api/*" };
@id("other") permit(principal in k8s::Group::"ops", action, resource);
`)
	az := NewEngine(s, ps, EngineOptions{})
	rv := whatCan(t, az, entities.UserInfo{Name: "bob", Groups: []string{"dev"}}, "team-a")
	find := func(res string, verb string) *ResourceRule {
		for i, r := range rv.ResourceRules {
			if slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, verb) {
				return &rv.ResourceRules[i]
			}
		}
		return nil
	}
	if r := find("pods", "list"); r == nil || r.Conditions != nil || !slices.Equal(r.Verbs, []string{"get", "list"}) {
		t.Errorf("pods: %+v", r)
	}
	if r := find("configmaps", "get"); r == nil || !slices.Equal(r.ResourceNames, []string{"app-config", "flags"}) {
		t.Errorf("configmaps: %+v", r)
	}
	if r := find("pods", "create"); r == nil || r.Conditions == nil || len(r.Conditions.Allow) != 1 {
		t.Errorf("create pods: %+v", r)
	}
	if r := find("secrets", "get"); r == nil || r.Conditions == nil || len(r.Conditions.Deny) != 1 {
		t.Errorf("get secrets but x: %+v", r)
	}
	if find("pods", "delete") != nil || find("*", "get") != nil || rv.Incomplete {
		t.Errorf("unexpected rules: %+v", rv)
	}
	if len(rv.NonResourceRules) != 1 || !slices.Equal(rv.NonResourceRules[0].NonResourceURLs, []string{"/api/*", "/healthz"}) {
		t.Errorf("non-resource rules: %+v", rv.NonResourceRules)
	}
	// Every allowed rule is allowed by Authorize, and every typed resource
	// Authorize allows is listed.
	for _, r := range rv.ResourceRules {
		if r.Conditions != nil || len(r.ResourceNames) > 0 {
			continue
		}
		for _, v := range r.Verbs {
			for _, res := range r.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				d := az.Authorize(context.Background(), &entities.Request{User: entities.UserInfo{Name: "bob", Groups: []string{"dev"}}, ResourceRequest: true, Verb: v, APIGroup: r.APIGroups[0], Resource: resource, Subresource: sub, Namespace: "team-a"})
				if !d.IsAllowed() {
					t.Errorf("rule %+v: %s is %v", r, v, d.Type())
				}
			}
		}
	}
	ops := whatCan(t, az, entities.UserInfo{Name: "carol", Groups: []string{"ops"}}, "")
	n := 0
	for _, r := range ops.ResourceRules {
		n += len(r.Resources)
	}
	if n < 100 || len(ops.ResourceRules) > 40 {
		t.Errorf("ops may do everything: got %d resources in %d rules, want every resource in one rule per group", n, len(ops.ResourceRules))
	}
}

// What can, as a property: for generated policy sets and principals, every
// unconditional rule is allowed by Authorize (each of its names, for a rule
// on names), and every typed resource and verb Authorize allows for every
// name is listed by an unconditional rule.
func TestWhatCanAgreesWithAuthorize(t *testing.T) {
	s := embeddedschema.Schema(t)
	rng := rand.New(rand.NewSource(1414))
	sets := 20
	if testing.Short() {
		sets = 8
	}
	checked := 0
	for i := 0; i < sets; i++ {
		src := genPrincipalPolicies(rng, 2+rng.Intn(7))
		ps := policytest.Set(t, src)
		az := NewEngine(s, ps, EngineOptions{})
		for _, u := range genUniverse(rng)[:3] {
			ns := pick(rng, []string{"", "team-a", "kube-system"})
			rv := whatCan(t, az, u, ns)
			listed := map[string]bool{}
			for _, r := range rv.ResourceRules {
				if r.Conditions != nil {
					continue
				}
				for _, v := range r.Verbs {
					for _, res := range r.Resources {
						resource, sub, _ := strings.Cut(res, "/")
						names := r.ResourceNames
						if len(names) == 0 {
							names = []string{""}
							listed[v+" "+r.APIGroups[0]+" "+res] = true
						}
						for _, name := range names {
							// As what-can asks: a cluster-scoped resource
							// without the namespace (a request that names one
							// is another question since resource.namespace?).
							reqNS := ns
							if tr, ok := az.Schema().Lookup(r.APIGroups[0], resource, sub); ok && !tr.Namespaced {
								reqNS = ""
							}
							req := &entities.Request{User: u, ResourceRequest: true, Verb: v, APIGroup: r.APIGroups[0], Resource: resource, Subresource: sub, Namespace: reqNS, Name: name}
							if d := az.Authorize(context.Background(), req); !d.IsAllowed() {
								t.Fatalf("set %d %s: rule %+v lists it, Authorize says %v\npolicies:\n%s", i, req, r, d.Type(), src)
							}
							checked++
						}
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
				for _, v := range []string{"get", "list", "create", "update", "delete"} {
					req := &entities.Request{User: u, ResourceRequest: true, Verb: v, APIGroup: k.Group, Resource: k.Resource, Subresource: k.Subresource}
					if r.Namespaced {
						req.Namespace = ns
					}
					if az.Authorize(context.Background(), req).IsAllowed() && !listed[v+" "+k.Group+" "+res] {
						t.Fatalf("set %d %s: Authorize allows it, no rule lists it\nrules: %+v\npolicies:\n%s", i, req, rv.ResourceRules, src)
					}
				}
			}
		}
	}
	t.Logf("%d listed (rule, verb, resource, name) checked against Authorize", checked)
	if checked < 100 {
		t.Errorf("only %d checks: the generator does not exercise what-can", checked)
	}
}

func TestWhoCanListsNoDeniedSubject(t *testing.T) {
	ps := policytest.Set(t, `
@id("alice") permit(principal == k8s::User::"alice", action, resource is core::pods);
@id("bob") permit(principal == k8s::User::"bob", action, resource is core::pods);
@id("dev") permit(principal in k8s::Group::"dev", action, resource is core::pods);
@id("no-alice") forbid(principal == k8s::User::"alice", action == k8s::Action::"delete", resource is core::pods);
`)
	az := NewEngine(embeddedschema.Schema(t), ps, EngineOptions{})
	if rv := whoCan(t, az, whoCanReq("delete", "", "pods", "", "a", "p")); !slices.Equal(rv.Users, []string{"bob"}) || !slices.Equal(rv.Groups, []string{"dev"}) || len(rv.Denied) != 1 {
		t.Errorf("delete: %+v", rv)
	}
	if rv := whoCan(t, az, whoCanReq("get", "", "pods", "", "a", "p")); !slices.Equal(rv.Users, []string{"alice", "bob"}) {
		t.Errorf("get: %+v", rv)
	}
}

// A forbid on a selector (every User, a username pattern, every
// ServiceAccount of a namespace, every principal) keeps the principals it
// selects out of the users list, and only those.
func TestWhoCanListsNoSubjectASelectorDenies(t *testing.T) {
	permits := `
@id("alice") permit(principal == k8s::User::"alice", action, resource is core::pods);
@id("ci") permit(principal == k8s::ServiceAccount::"system:serviceaccount:a:ci", action, resource is core::pods);
@id("node") permit(principal == k8s::Node::"system:node:n1", action, resource is core::pods);
@id("dev") permit(principal in k8s::Group::"dev", action, resource is core::pods);
`
	for forbid, want := range map[string][]string{
		`forbid(principal is k8s::User, action, resource is core::pods);`:                                                 {"system:node:n1", "system:serviceaccount:a:ci"},
		`forbid(principal is k8s::ServiceAccount, action, resource is core::pods);`:                                       {"alice", "system:node:n1"},
		`forbid(principal, action, resource is core::pods) when { principal.username like "system:serviceaccount:a:*" };`: {"alice", "system:node:n1"},
		`forbid(principal, action, resource is core::pods) when { principal.username like "ali*" };`:                      {"system:node:n1", "system:serviceaccount:a:ci"},
		`forbid(principal in k8s::Group::"dev", action, resource is core::pods);`:                                         {"alice", "system:node:n1", "system:serviceaccount:a:ci"},
		`forbid(principal, action, resource is core::pods);`:                                                              {},
	} {
		az := NewEngine(embeddedschema.Schema(t), policytest.Set(t, permits+forbid), EngineOptions{})
		rv := whoCan(t, az, whoCanReq("get", "", "pods", "", "a", "p"))
		if !slices.Equal(rv.Users, want) {
			t.Errorf("%s\nusers = %v, want %v (denied: %+v)", forbid, rv.Users, want, rv.Denied)
		}
		for _, u := range rv.Users {
			var groups []string // the node permit lists n1 as a node: in system:nodes
			if strings.HasPrefix(u, "system:node:") {
				groups = []string{"system:nodes"}
			}
			if d := az.Authorize(context.Background(), &entities.Request{ResourceRequest: true, Verb: "get", Resource: "pods", Namespace: "a", Name: "p", User: entities.UserInfo{Name: u, Groups: groups}}); d.Type() != DecisionAllow {
				t.Errorf("%s: %s is listed but Authorize says %v", forbid, u, d.Type())
			}
		}
	}
}

// whoCan is az.WhoCan for tests: a cancelled context never happens here.
func whoCan(t testing.TB, az RuleResolver, req *entities.Request) AccessReview {
	t.Helper()
	rv, err := az.WhoCan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

// whatCan is az.WhatCan for tests.
func whatCan(t testing.TB, az RuleResolver, u entities.UserInfo, namespace string) RulesReview {
	t.Helper()
	rv, err := az.WhatCan(context.Background(), u, namespace)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

// A cancelled context stops who-can and what-can with the context's error,
// and a live one answers.
func TestReviewsStopWhenCancelled(t *testing.T) {
	s := embeddedschema.Schema(t)
	ps := policytest.Set(t, `@id("read") permit(principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods);`)
	az := NewEngine(s, ps, EngineOptions{CacheSize: DefaultCacheSize})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := az.WhoCan(ctx, whoCanReq("*", "", "pods", "", "", "")); !errors.Is(err, context.Canceled) {
		t.Errorf("WhoCan with a cancelled context: err %v, want context.Canceled", err)
	}
	dev := entities.UserInfo{Name: "bob", Groups: []string{"dev"}}
	if _, err := az.WhatCan(ctx, dev, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("WhatCan with a cancelled context: err %v, want context.Canceled", err)
	}
	if rv := whatCan(t, az, dev, "team-a"); len(rv.ResourceRules) == 0 {
		t.Error("WhatCan with a live context found no rule")
	}
}
