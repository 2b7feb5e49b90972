package cedarlang

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	cedarlib "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
)

// The index is an optimization only: for any policy set and request, the
// candidates must include every policy whose scope matches, and deciding over
// the candidates must give the same answer as deciding over all policies.

var (
	genVerbs  = []string{"get", "list", "create", "delete", "frob"}
	genGroups = []string{"g1", "g2", "g3", "system:nodes"}
	genTypes  = []string{"core::pods", "core::secrets", "apps::deployments", "k8s::Resource", "k8s::NonResourceURL"}
	genUsers  = []string{
		"alice", "bob", "carol", "system:anonymous",
		"system:serviceaccount:ns1:sa1", "system:serviceaccount:ns2:sa2", "system:serviceaccount:ns1",
		"system:serviceaccount:ns1:SA1", // a User: not a name kube-apiserver gives a ServiceAccount
		"system:node:n1", "system:node:",
	}
)

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

func action(verb string) string { return fmt.Sprintf("k8s::Action::%q", verb) }

func genPrincipalScope(rng *rand.Rand) string {
	g := pick(rng, genGroups)
	switch rng.IntN(14) {
	case 0, 1:
		return "principal"
	case 2:
		return `principal == k8s::User::"alice"`
	case 3:
		return `principal == k8s::User::"bob"`
	case 4:
		return `principal == k8s::ServiceAccount::"system:serviceaccount:ns1:sa1"`
	case 5:
		return `principal == k8s::Node::"system:node:n1"`
	case 6, 7:
		return fmt.Sprintf("principal in k8s::Group::%q", g)
	case 8:
		return "principal is " + pick(rng, []string{"k8s::User", "k8s::ServiceAccount", "k8s::Node", "k8s::Group"})
	case 9:
		return fmt.Sprintf("principal is %s in k8s::Group::%q", pick(rng, []string{"k8s::User", "k8s::ServiceAccount", "k8s::Node"}), g)
	case 10:
		return `principal in k8s::User::"alice"`
	case 11:
		return `principal is k8s::User in k8s::User::"alice"`
	case 12:
		return `principal == k8s::Group::"g1"`
	default:
		return `principal in k8s::ServiceAccount::"system:serviceaccount:ns1:sa1"`
	}
}

func genActionScope(rng *rand.Rand) string {
	switch rng.IntN(9) {
	case 0, 1:
		return "action"
	case 2:
		return "action == " + action(pick(rng, genVerbs))
	case 3:
		return "action in " + action(pick(rng, genVerbs))
	case 4, 5:
		var list []string
		for k := 1 + rng.IntN(3); k > 0; k-- {
			if rng.IntN(6) == 0 {
				list = append(list, action("*"))
			} else {
				list = append(list, action(pick(rng, genVerbs)))
			}
		}
		return "action in [" + strings.Join(list, ", ") + "]"
	case 6:
		return "action in " + action("*")
	case 7:
		return "action == " + action("*")
	default:
		return `action in [Other::Action::"get", ` + action(pick(rng, genVerbs)) + "]"
	}
}

func genResourceScope(rng *rand.Rand) string {
	if rng.IntN(3) == 0 {
		return "resource"
	}
	return "resource is " + pick(rng, genTypes)
}

// genCondition returns a condition and, when it starts with a test of
// context.verb that the index may key on, that test (the scope oracle adds it).
func genCondition(rng *rand.Rand) (cond, verbGuard string) {
	switch rng.IntN(14) {
	case 10:
		return ` when { context.verb == "frob" && principal.username == "alice" }`, `context.verb == "frob"`
	case 11:
		return ` when { ["get", "frob"].contains(context.verb) }`, `["get", "frob"].contains(context.verb)`
	case 12:
		return ` unless { context.verb == "get" }`, ""
	case 13:
		return ` when { principal has uid && context.verb == "list" }`, ""
	}
	return genConditionPlain(rng), ""
}

func genConditionPlain(rng *rand.Rand) string {
	switch rng.IntN(42) {
	case 34, 35, 36, 37, 38, 39, 40, 41:
		return genConditionOtherShape(rng)
	case 30:
		return ` when { principal.username == "alice" || principal in k8s::Group::"g2" }`
	case 31:
		return ` when { (principal in k8s::Group::"g1" || principal == k8s::User::"bob" || principal.groups.contains("g3")) && resource.name == "x" }`
	case 32:
		return ` unless { !(principal.username == "carol" || principal.groups.containsAny(["g4"])) }`
	case 33:
		return ` when { principal.username == "alice" || principal.namespace == "ns1" }`
	case 27:
		return ` when { ["g1", "g4"].containsAny(principal.groups) }`
	case 28:
		return ` when { principal.groups.containsAll(["g1", "g3"]) && resource.name == "y" }`
	case 29:
		return ` unless { principal.groups.containsAll([]) && !principal.groups.containsAny([]) }`
	case 24:
		return ` when { principal in [k8s::Group::"g1", k8s::Group::"g3"] }`
	case 25:
		return ` when { principal in [k8s::User::"alice", k8s::User::"bob"] && resource.name == "x" }`
	case 26:
		return ` when { principal in [k8s::Group::"g2", k8s::User::"carol"] || principal in [] }`
	case 22:
		return ` when { resource.namespace == "n1" && context.verb == "get" && principal.username == "bob" }` // fails when absent, then narrows
	case 23:
		return ` when { ["n1", "n2"].contains(resource.name) && principal.namespace == "ns1" && resource is core::pods }`
	case 10:
		return ` when { resource.namespace == "n1" }` // errors when absent
	case 11:
		return ` when { resource has namespace && ["n1", "n2"].contains(resource.namespace) }`
	case 12:
		return ` when { principal.namespace == "ns1" && principal.name == "sa1" }` // errors on Users
	case 13:
		return ` when { principal is k8s::Node && principal.name == "n1" }`
	case 14:
		return ` when { resource is core::pods || resource is core::secrets }`
	case 15:
		return ` when { ["x", "z"].contains(resource.name) && principal.username == "bob" }`
	case 16:
		return ` unless { resource.name != "y" }`
	case 17:
		return ` unless { !(principal.groups.containsAny(["g2", "g3"])) || context.verb == "get" }`
	case 18:
		return ` when { principal.nosuch == 1 && resource.name == "x" }`
	case 19:
		return ` when { resource.name == "x" && resource.namespace == "n2" }`
	case 20:
		return ` when { action in [k8s::Action::"get", k8s::Action::"list"] && resource has name && resource.name == "x" }`
	case 21:
		return ` when { (principal.username == "alice" || principal.username == "carol") && resource.apiGroup == "apps" }`
	}
	switch rng.IntN(10) {
	case 0, 1, 2:
		return ""
	case 3:
		return " when { false }"
	case 4:
		return ` when { principal.username == "alice" }`
	case 5:
		return ` when { resource.name == "x" }` // errors when the resource has no name
	case 6:
		return ` when { principal.groups.contains("g1") }`
	case 7:
		return ` unless { principal in k8s::Group::"g2" }`
	case 8:
		return " when { principal.nosuch == 1 }" // always an error
	default:
		return ` when { principal has uid }`
	}
}

// genConditionOtherShape: the shapes of the set with other shapes
// (testgen.OtherShapes) in the property's vocabulary: `like` prefixes on
// namespaces and names, `like` on usernames and inner literals, relations
// between request attributes with a literal, disjunctions across
// dimensions, break-glass exceptions and username sets.
func genConditionOtherShape(rng *rand.Rand) string {
	switch rng.IntN(16) {
	case 13:
		return ` when { principal.username like "*li*" }` // an inner literal only
	case 14:
		return ` when { resource.namespace like "*s1*" }` // errors when absent
	case 15:
		return ` when { principal.username like "*ob" || principal.username like "ca*" }`
	case 10:
		return ` when { resource.path like "/apis/*" }` // errors on resources
	case 11:
		return ` when { resource.path == "/metrics" || principal in k8s::Group::"g1" }`
	case 12:
		return ` when { resource has path && resource.path like "/healthz*" }`
	case 0:
		return ` when { resource.namespace like "n1*" }` // errors when absent
	case 1:
		return ` when { resource.name like "x*" && principal in k8s::Group::"g1" }`
	case 2:
		return ` when { principal.namespace == resource.namespace && resource.namespace == "ns1" }` // errors on Users
	case 3:
		return ` when { resource.namespace == principal.namespace && principal.name == "sa1" }`
	case 4:
		return ` when { resource.namespace == "n1" || principal in k8s::Group::"g2" }`
	case 5:
		return ` when { principal.groups.contains("g3") || resource.name == "y" }`
	case 6:
		return ` when { resource has namespace && resource.namespace == "n2" } unless { principal in k8s::Group::"g1" }`
	case 7:
		return ` when { resource.namespace == "ns1" && resource.name == "x" } unless { principal.groups.contains("g4") || principal.username == "carol" }`
	case 8:
		return ` when { ["alice", "bob"].contains(principal.username) && resource.namespace like "n*" }`
	}
	return ` when { principal in [k8s::User::"alice", k8s::User::"carol"] && resource.name like "*y" }`
}

func genPolicySet(t *testing.T, rng *rand.Rand, n int) (*PolicySet, []*cedarlib.PolicySet) {
	t.Helper()
	var b strings.Builder
	var scopeOnly []*cedarlib.PolicySet
	for i := 0; i < n; i++ {
		scope := fmt.Sprintf("%s, %s, %s", genPrincipalScope(rng), genActionScope(rng), genResourceScope(rng))
		effect := "permit"
		if rng.IntN(4) == 0 {
			effect = "forbid"
		}
		cond, verbGuard := genCondition(rng)
		fmt.Fprintf(&b, "@id(\"p%d\") %s(%s)%s;\n", i, effect, scope, cond)
		// The oracle for "the scope matches": the scope alone, as a permit
		// (with a leading context.verb test, which the index keys on too).
		oracle := "permit(" + scope + ");"
		if verbGuard != "" {
			oracle = "permit(" + scope + ") when { " + verbGuard + " };"
		}
		list, err := cedarlib.NewPolicyListFromBytes("scope", []byte(oracle))
		if err != nil || len(list) != 1 {
			t.Fatalf("scope %s: %v", scope, err)
		}
		ps := cedarlib.NewPolicySet()
		ps.Add("scope", list[0])
		scopeOnly = append(scopeOnly, ps)
	}
	policies, err := ParsePolicies("gen.cedar", []byte(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	set, err := NewPolicySet(policies)
	if err != nil {
		t.Fatal(err)
	}
	return set, scopeOnly
}

func policyIDs(ps []*Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func TestIndexCandidatesProperty(t *testing.T) {
	checkCandidatesProperty(t, nil)
}

// The index knows values only by their hashes: collisions (of value hashes,
// and of fingerprints in the lookup table) may only add candidates. With
// hashes cut to 3 bits and fingerprints to 2, almost every value collides
// with another, and the property still holds.
func TestIndexCandidatesPropertyCollisions(t *testing.T) {
	checkCandidatesProperty(t, func(ps []*Policy) *index { return buildIndexMasked(ps, 0x7, 0x3) })
}

// checkCandidatesProperty: over generated sets and requests, the candidates
// are in policy order and a superset of the matching policies (and erroring
// forbids), and deciding over them equals deciding over all the policies
// and Cedar's own answer. build, when set, rebuilds each set's index.
func checkCandidatesProperty(t *testing.T, build func([]*Policy) *index) {
	sets, requestsPerSet := 250, 40
	if testing.Short() {
		sets = 50
	}
	rng := rand.New(rand.NewPCG(20240601, 6))
	cases, matched, narrowed := 0, 0, 0
	for s := 0; s < sets; s++ {
		set, _ := genPolicySet(t, rng, 1+rng.IntN(40))
		if build != nil {
			set.index = build(set.Policies)
		}
		for r := 0; r < requestsPerSet; r++ {
			var groups []string
			for _, g := range append(slices.Clone(genGroups), "g4") {
				if rng.IntN(3) == 0 {
					groups = append(groups, g)
				}
			}
			user := entities.UserInfo{Name: pick(rng, genUsers), Groups: groups}
			if rng.IntN(2) == 0 {
				user.UID = "uid-1"
			}
			principal := entities.PrincipalEntity(user)
			verb := pick(rng, genVerbs)
			rtype := types.EntityType(pick(rng, append(slices.Clone(genTypes), "io::k8s::networking::ingresses")))
			attrs := types.RecordMap{}
			if n := rng.IntN(3); n > 0 {
				attrs["name"] = types.String([]string{"x", "y"}[n-1])
			}
			if n := rng.IntN(4); n > 0 {
				attrs["namespace"] = types.String([]string{"n1", "n2", "ns1"}[n-1]) // ns1: a ServiceAccount's own
			}
			if n := rng.IntN(3); n > 0 {
				attrs["apiGroup"] = types.String([]string{"apps", ""}[n-1])
			}
			if rtype == "k8s::NonResourceURL" && rng.IntN(4) > 0 {
				attrs["path"] = types.String(pick(rng, []string{"/metrics", "/apis/x", "/healthz/ready", "/h"}))
			}
			resource := types.Entity{UID: types.NewEntityUID(rtype, ""), Attributes: types.NewRecord(attrs)}
			ents := &entities.Entities{Principal: principal, Resource: resource}
			act := types.NewEntityUID("k8s::Action", types.String(verb))

			q := CandidateQuery{Principal: principal.UID, Groups: groups, Verb: verb, ResourceType: rtype}
			for attr, qv := range map[types.String]*QueryValue{"name": &q.Name, "namespace": &q.Namespace, "apiGroup": &q.APIGroup, "path": &q.Path} {
				if v, ok := attrs[attr]; ok {
					*qv = known(string(v.(types.String)))
				}
			}
			switch principal.UID.Type {
			case "k8s::ServiceAccount":
				ns, name, _ := entities.ServiceAccountName(user.Name)
				q.PrincipalNamespace, q.PrincipalName = known(ns), known(name)
			case "k8s::Node":
				q.PrincipalName = known(strings.TrimPrefix(user.Name, "system:node:"))
			}
			candidates := set.Candidates(q)
			desc := func() string {
				var b strings.Builder
				fmt.Fprintf(&b, "set %d request %d: user=%q groups=%v verb=%s resource=%s\n", s, r, user.Name, groups, verb, rtype)
				for _, p := range set.Policies {
					b.WriteString("  " + string(p.Text()) + "\n")
				}
				return b.String()
			}
			// Candidates come in policy order, without duplicates.
			pos := -1
			for _, c := range candidates {
				i := slices.Index(set.Policies, c)
				if i <= pos {
					t.Fatalf("candidates out of order or repeated: %v\n%s", policyIDs(candidates), desc())
				}
				pos = i
			}
			// Superset of the policies that match, and of the forbids that
			// fail (kcedar counts them as denying).
			for _, p := range set.Policies {
				holds, err := evaluateOne(p, ents, principal.UID, act, resource.UID)
				if !holds && (err == nil || p.Effect != types.Forbid) {
					continue
				}
				matched++
				if !slices.Contains(candidates, p) {
					t.Fatalf("policy %s matches (err %v) but is not a candidate (candidates %v)\n%s", p.ID, err, policyIDs(candidates), desc())
				}
			}
			if len(candidates) < set.Len() {
				narrowed++
			}
			// The same decision, deciding policies and errors.
			all := evaluate(set.Policies, ents, principal.UID, act, resource.UID)
			some := evaluate(candidates, ents, principal.UID, act, resource.UID)
			// Errors of permits may differ: a permit that fails is one that
			// does not match, and the index may leave it out.
			forbidErrors := func(errs []string) []string {
				var out []string
				for _, e := range errs {
					id, _, _ := strings.Cut(strings.TrimPrefix(e, "policy "), ":")
					if p, ok := set.Get(id); ok && p.Effect == types.Forbid {
						out = append(out, e)
					}
				}
				return out
			}
			if all.Decision != some.Decision || !slices.Equal(policyIDs(all.Policies), policyIDs(some.Policies)) || !slices.Equal(forbidErrors(all.Errors), forbidErrors(some.Errors)) {
				t.Fatalf("over all policies: %v %v %v\nover candidates: %v %v %v\n%s",
					all.Decision, policyIDs(all.Policies), all.Errors, some.Decision, policyIDs(some.Policies), some.Errors, desc())
			}
			// And Cedar's own answer over all policies agrees, but for
			// erroring forbids, which kcedar counts as denying.
			cs := cedarlib.NewPolicySet()
			for _, p := range set.Policies {
				cs.Add(types.PolicyID(p.ID), p.Compiled())
			}
			dec, diag := cedarlib.Authorize(cs, ents, cedarlib.Request{Principal: principal.UID, Action: act, Resource: resource.UID, Context: entities.ContextFor(act)})
			erroringForbid := false
			for _, e := range diag.Errors {
				if p, _ := set.Get(string(e.PolicyID)); p.Effect == types.Forbid {
					erroringForbid = true
				}
			}
			want := "NoOpinion"
			switch {
			case erroringForbid || dec == types.Deny && len(diag.Reasons) > 0:
				want = "Deny"
			case dec == types.Allow:
				want = "Allow"
			}
			if some.Decision != want {
				t.Fatalf("decision %v, Cedar says %v (reasons %v, errors %v)\n%s", some.Decision, dec, diag.Reasons, diag.Errors, desc())
			}
			cases++
		}
	}
	t.Logf("%d cases, %d scope matches, %d requests narrowed by the index", cases, matched, narrowed)
	if matched < cases/4 || build == nil && narrowed < cases/2 {
		t.Fatalf("the generator is too weak: %d matches, %d narrowed of %d cases", matched, narrowed, cases)
	}
}

func TestIndexBuckets(t *testing.T) {
	set, err := NewPolicySet(mustParse(t, "i.cedar", `
@id("alice-get-pods") permit(principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::pods);
@id("dev-any") permit(principal in k8s::Group::"dev", action in k8s::Action::"*", resource);
@id("sa-list") permit(principal is k8s::ServiceAccount, action in [k8s::Action::"list", k8s::Action::"watch"], resource is core::pods);
@id("anyone-secrets") forbid(principal, action, resource is core::secrets);
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user   string
		groups []string
		verb   string
		rtype  types.EntityType
		want   []string
	}{
		{"alice", nil, "get", "core::pods", []string{"alice-get-pods"}},
		{"alice", nil, "list", "core::pods", nil},
		{"alice", []string{"dev"}, "list", "core::pods", []string{"dev-any"}},
		{"bob", []string{"dev", "ops"}, "delete", "core::secrets", []string{"dev-any", "anyone-secrets"}},
		{"system:serviceaccount:a:b", nil, "watch", "core::pods", []string{"sa-list"}},
		{"system:serviceaccount:a:b", nil, "get", "core::pods", nil},
		{"system:node:n1", nil, "list", "core::pods", nil},
	} {
		req := &entities.Request{User: entities.UserInfo{Name: tc.user, Groups: tc.groups}, Verb: tc.verb, ResourceRequest: true}
		got := policyIDs(set.Candidates(NewCandidateQuery(req, entities.Target{EntityType: tc.rtype}, tc.verb)))
		if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%s %v %s %s: candidates %v, want %v", tc.user, tc.groups, tc.verb, tc.rtype, got, tc.want)
		}
	}
}

func TestUnnarrowed(t *testing.T) {
	set, err := NewPolicySet(mustParse(t, "u.cedar", `
@id("keyed") permit(principal in k8s::Group::"dev", action == k8s::Action::"get", resource is core::pods);
@id("get-pods-1") permit(principal, action == k8s::Action::"get", resource is core::pods) when { resource.name like "*a*" };
@id("get-pods-suffix") permit(principal, action == k8s::Action::"get", resource is core::pods) when { resource.name like "*-a" };
@id("get-pods-prefix") permit(principal, action == k8s::Action::"get", resource is core::pods) when { resource.name like "a*" };
@id("get-pods-2") permit(principal, action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods);
@id("any-verb-pods") forbid(principal, action, resource is core::pods) when { context.verb != "get" };
@id("list-any") permit(principal, action == k8s::Action::"list", resource) when { resource has name };
@id("ns-keyed") permit(principal, action, resource is core::secrets) when { resource.namespace == "x" };
`))
	if err != nil {
		t.Fatal(err)
	}
	r := Unnarrowed(set.Policies)
	if got := policyIDs(r.Policies); !slices.Equal(got, []string{"get-pods-1", "get-pods-2", "any-verb-pods", "list-any"}) {
		t.Errorf("unnarrowed %v", got)
	}
	// list core::pods meets get-pods-2, any-verb-pods and list-any; get
	// core::pods meets get-pods-1, get-pods-2 and any-verb-pods: 3 each, and
	// the report names the first.
	if r.Max != 3 || r.Verb != "get" || r.ResourceType != "core::pods" {
		t.Errorf("max %d for %q %q, want 3 for get core::pods", r.Max, r.Verb, r.ResourceType)
	}
	if r := Unnarrowed(nil); r.Max != 0 || r.Policies != nil {
		t.Errorf("no policies: %+v", r)
	}
}

// Unnarrowed names exactly the policies the index files under "rest" or
// keys on their principal's type alone, over the generator's sets.
func TestUnnarrowedIsTheIndexRest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	weak := 0
	for s := 0; s < 200; s++ {
		set, _ := genPolicySet(t, rng, 1+rng.IntN(40))
		var rest []int32
		for _, b := range set.index.buckets {
			rest = append(rest, b.rest...)
		}
		slices.Sort(rest)
		rest = slices.Compact(rest)
		var want []string
		for i, p := range set.Policies {
			e := set.index.extraction(p)
			primary, _ := chooseKeys(resolveAlts(e.cons, set.index.count), set.index.count)
			vs, okV := e.values(dVerb)
			ts, okT := e.values(dRType)
			if okV && len(vs) == 0 || okT && len(ts) == 0 {
				continue // no verb or type: in no bucket
			}
			if (primary < 0) != slices.Contains(rest, int32(i)) {
				t.Fatalf("set %d: %s has primary key %d but is in rest: %v", s, p.ID, primary, slices.Contains(rest, int32(i)))
			}
			if primary >= 0 && e.cons[primary].dim == dPType {
				weak++
			} else if primary >= 0 {
				continue
			}
			want = append(want, p.ID)
		}
		if got := policyIDs(Unnarrowed(set.Policies).Policies); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("set %d: Unnarrowed %v, the index's rest and principal-type keys %v", s, got, want)
		}
	}
	if weak == 0 {
		t.Fatal("no policy was keyed on its principal's type alone: the generator is too weak")
	}
}

// evaluateOne evaluates one policy on a fully known request with the test
// oracle: whether it holds, or the error that stopped it.
func evaluateOne(p *Policy, ents types.EntityGetter, principal, action, resource types.EntityUID) (bool, error) {
	r := evaluate([]*Policy{p}, ents, principal, action, resource)
	if len(r.Errors) > 0 {
		return false, errors.New(r.Errors[0])
	}
	return len(r.Policies) > 0, nil
}
