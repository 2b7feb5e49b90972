package testgen

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/kcedar/kcedar/internal/entities"
)

// The shapes of the fifth hidden workload of the index issue, each a family of
// forbids whose only selective predicate is on a path the index once did not
// key, with permits beside them so that requests are allowed too:
//
//   - deletes of any type meet forbids keyed only on
//     `resource.apiGroup like "*.<tenant>.tenant.example.com"`;
//   - nodes reading secrets meet forbids keyed only on
//     `principal.name like "pool-<tenant>-*"`;
//   - users' non-resource and impersonation requests meet forbids of any
//     action on any resource for `principal is k8s::User`, keyed only on a
//     set of `principal.uid`.

// FifthTenants is the number of tenants of a fifth set of n policies.
func FifthTenants(n int) int { return max(4, n/5) }

// Fifth is n policies of the fifth set's shapes.
func Fifth(n int) []string {
	rng := rand.New(rand.NewPCG(46, 5))
	tenants := FifthTenants(n)
	out := make([]string, n)
	for i := range out {
		t := rng.IntN(tenants)
		out[i] = fmt.Sprintf("@id(\"fifth-%d\")\n%s;\n", i, fifthPolicy(rng, i%6, t))
	}
	return out
}

// fifthAPIGroup is tenant t's API group.
func fifthAPIGroup(t int) string { return fmt.Sprintf("%s.tenant.example.com", token(t)) }

// fifthPolicy is a policy of family f (0-2 the forbids, 3-5 permits) for
// tenant t.
func fifthPolicy(rng *rand.Rand, f, t int) string {
	tok := token(t)
	switch f {
	case 0:
		pattern := patternOf(true, false, "."+fifthAPIGroup(t))
		if rng.IntN(3) == 0 {
			pattern = patternOf(false, false, "api-"+tok+".", ".tenant.example.com")
		}
		return fmt.Sprintf("forbid (principal, action == k8s::Action::\"delete\", resource)\nwhen { resource has apiGroup && resource.apiGroup like %s }", pattern)
	case 1:
		return fmt.Sprintf("forbid (principal is k8s::Node, action in [k8s::Action::\"get\", k8s::Action::\"list\", k8s::Action::\"watch\"], resource is core::secrets)\nwhen { principal.name like %s }", patternOf(false, true, "pool-"+tok+"-"))
	case 2:
		uids := []string{lit(pathNamed("principal.uid").value(t, 1), false)}
		for range rng.IntN(3) {
			uids = append(uids, lit(pathNamed("principal.uid").value(1<<21+rng.IntN(1<<20), 0), false))
		}
		return fmt.Sprintf("forbid (principal is k8s::User, action, resource)\nwhen { principal has uid && [%s].contains(principal.uid) }", strings.Join(uids, ", "))
	case 3:
		return fmt.Sprintf("permit (principal in k8s::Group::%s, action == k8s::Action::\"delete\", resource)\nwhen { resource has apiGroup && resource.apiGroup like %s }", lit(groupsOf(t)[0], false), patternOf(true, false, tok+".tenant.example.com"))
	case 4:
		return fmt.Sprintf("permit (principal is k8s::Node, action in [k8s::Action::\"get\", k8s::Action::\"list\"], resource is core::secrets)\nwhen { principal.name == %s }", lit(pathNamed("principal.name").value(t, 0), false))
	}
	return fmt.Sprintf("permit (principal in k8s::Group::%s, action, resource)\nwhen { resource has path && resource.path like %s || resource has name && resource.name like %s }",
		lit(groupsOf(t)[0], false), patternOf(false, true, "/apis/"+tok+"/"), patternOf(false, true, "u-"+tok+"-"))
}

// FifthRequests are count requests against Fifth(n): deletes of typed and
// tenant resources, nodes reading secrets, users' non-resource and
// impersonation requests, of a tenant's users (with their uids) or a near
// miss.
func FifthRequests(n, count int) []*entities.Request {
	rng := rand.New(rand.NewPCG(46, 6))
	tenants := FifthTenants(n)
	out := make([]*entities.Request, count)
	for i := range out {
		t := rng.IntN(tenants)
		if rng.IntN(5) == 0 {
			t = rng.IntN(tenants + 10)
		}
		out[i] = fifthRequest(rng, t)
	}
	return out
}

func fifthRequest(rng *rand.Rand, t int) *entities.Request {
	tok := token(t)
	u := shapeUser(pathNamed("principal.username").value(t, rng.IntN(2)), groupsOf(t)[0])
	u.UID = pathNamed("principal.uid").value(t, rng.IntN(2))
	switch rng.IntN(5) {
	case 0:
		group := pick(rng, []string{"api-" + tok + "." + fifthAPIGroup(t), "x." + fifthAPIGroup(t), "apps"})
		return &entities.Request{User: u, Verb: "delete", ResourceRequest: true, APIGroup: group, APIVersion: "v1", Resource: "widgets", Namespace: "ns-" + tok, Name: "w-" + tok}
	case 1:
		return resourceRequest(u, "delete", pick(rng, []string{"core::pods", "core::secrets", "apps::deployments"}), "ns-"+tok, "web-"+tok)
	case 2:
		node := shapeUser("system:node:"+pathNamed("principal.name").value(t, rng.IntN(2)), "system:nodes")
		return resourceRequest(node, pick(rng, []string{"get", "list", "watch"}), "core::secrets", "ns-"+tok, pick(rng, []string{"", "s-" + tok}))
	case 3:
		return &entities.Request{User: u, Verb: pick(rng, []string{"get", "post"}), Path: "/apis/" + tok + "/" + pick(rng, []string{"x", "healthz"})}
	}
	return &entities.Request{User: u, Verb: "impersonate", ResourceRequest: true, APIVersion: "v1", Resource: pick(rng, []string{"users", "uids"}),
		Name: pathNamed("principal.username").value(t, rng.IntN(2))}
}
