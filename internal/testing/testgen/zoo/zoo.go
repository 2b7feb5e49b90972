// Package zoo generates policy sets written the way people write Cedar for
// Kubernetes (a zoo of policy shapes, mixed in realistic proportions) and
// requests against them, deterministically from a seed. It is test code:
// benchmarks, the load test and differential tests of the policy index use it.
package zoo

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// World is the cluster a policy set of a given size describes: the number of
// teams, namespaces, users and nodes grows with the set, as in a
// multi-tenant cluster.
type World struct {
	Teams, Namespaces, Users, Nodes int
}

// WorldFor is the world of an n-policy set.
func WorldFor(n int) World {
	return World{Teams: max(4, n/40), Namespaces: max(8, n/10), Users: max(16, n/8), Nodes: max(4, n/200)}
}

func (w World) team(i int) string { return fmt.Sprintf("team-%d", i%w.Teams) }
func (w World) ns(i int) string   { return fmt.Sprintf("ns-%d", i%w.Namespaces) }
func (w World) user(i int) string { return fmt.Sprintf("user-%d", i%w.Users) }
func (w World) node(i int) string { return fmt.Sprintf("node-%d", i%w.Nodes) }

// teamOf is the team owning a namespace; a user's teams.
func (w World) teamOfNS(ns int) int { return ns % w.Teams }
func (w World) userTeams(u int) []int {
	return []int{u % w.Teams, (u*7 + 3) % w.Teams}
}

var (
	namespacedTypes = []string{"core::pods", "core::configmaps", "core::secrets", "apps::deployments", "core::services", "batch::jobs", "core::serviceaccounts", "io::k8s::authorization::rbac::roles"}
	readVerbs       = `[k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"]`
	writeVerbs      = `[k8s::Action::"create", k8s::Action::"update", k8s::Action::"patch", k8s::Action::"delete"]`
	names           = []string{"web", "api", "db", "admin-token", "config", "worker"}
)

// Shape names, in the order of Shapes.
const (
	ShapeScopeRBAC     = "scope-rbac"     // group, verbs and type in the scope, namespace in when
	ShapeUser          = "user-pinned"    // principal is k8s::User + principal.username == ...
	ShapeGroupContains = "group-contains" // principal.groups.contains(...)
	ShapeSA            = "serviceaccount" // principal.namespace == .. && principal.name == ..
	ShapeMultiType     = "multi-type"     // (resource is A || resource is B) in when
	ShapeNSList        = "namespace-list" // ["a","b"].contains(resource.namespace)
	ShapeLabels        = "object-labels"  // labels of the object
	ShapeUnless        = "unless"         // unless exceptions
	ShapeForbid        = "forbid"         // forbids, some with open names
	ShapeNearDup       = "near-duplicate" // a policy again with one literal changed
	ShapeContextVerb   = "context-verb"   // verbs through context.verb
	ShapeNode          = "node"           // principal.name of a Node
	ShapeResource      = "k8s-resource"   // apiGroup and resource of k8s::Resource
	ShapeUserScope     = "user-scope"     // principal == k8s::User::"..." in the scope
	// ShapeOther draws from the other shapes (testgen.OtherShapes):
	// relations, prefixes, a big group, break-glass forbids, username sets,
	// disjunctions across dimensions; one tenant per team.
	ShapeOther = "other-shapes"
)

// Shapes and their weights (percent).
var Shapes = []struct {
	Name   string
	Weight int
}{
	{ShapeScopeRBAC, 14}, {ShapeUser, 10}, {ShapeGroupContains, 8}, {ShapeSA, 9},
	{ShapeMultiType, 6}, {ShapeNSList, 7}, {ShapeLabels, 5}, {ShapeUnless, 6},
	{ShapeForbid, 3}, {ShapeNearDup, 6}, {ShapeContextVerb, 5}, {ShapeNode, 2},
	{ShapeResource, 3}, {ShapeUserScope, 4}, {ShapeOther, 12},
}

// Fixed policies every set starts with (the cluster-wide ones).
const preamble = `@id("masters")
permit (principal in k8s::Group::"system:masters", action, resource);

@id("authenticated-discovery")
permit (principal in k8s::Group::"system:authenticated", action == k8s::Action::"get", resource is k8s::NonResourceURL)
when { resource.path like "/api*" || resource.path == "/version" };

@id("protect-kube-system")
forbid (principal, action in [k8s::Action::"delete", k8s::Action::"deletecollection", k8s::Action::"update", k8s::Action::"patch"], resource)
when { resource has namespace && resource.namespace == "kube-system" }
unless { principal in k8s::Group::"system:masters" };

`

// Policies returns n policies (the preamble's among them) in Cedar text.
func Policies(n int, seed uint64) string {
	w := WorldFor(n)
	rng := rand.New(rand.NewPCG(seed, 0x200))
	var b strings.Builder
	b.WriteString(preamble)
	var prev []string
	for i := 3; i < n; i++ {
		shape := pickShape(rng)
		var body string
		if shape == ShapeNearDup && len(prev) > 0 {
			body = nearDuplicate(rng, w, prev[rng.IntN(len(prev))])
		} else {
			if shape == ShapeNearDup {
				shape = ShapeScopeRBAC
			}
			body = policy(rng, w, shape)
		}
		if len(prev) < 64 {
			prev = append(prev, body)
		} else {
			prev[rng.IntN(len(prev))] = body
		}
		fmt.Fprintf(&b, "@id(\"z%d-%s\")\n%s\n\n", i, shape, body)
	}
	return b.String()
}

func pickShape(rng *rand.Rand) string {
	r := rng.IntN(100)
	for _, s := range Shapes {
		if r < s.Weight {
			return s.Name
		}
		r -= s.Weight
	}
	return ShapeScopeRBAC
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

func verbs(rng *rand.Rand) string {
	switch rng.IntN(4) {
	case 0:
		return writeVerbs
	case 1:
		return `k8s::Action::"*"`
	}
	return readVerbs
}

func policy(rng *rand.Rand, w World, shape string) string {
	nsI := rng.IntN(w.Namespaces)
	ns := w.ns(nsI)
	team := w.team(w.teamOfNS(nsI))
	typ := pick(rng, namespacedTypes)
	switch shape {
	case ShapeScopeRBAC:
		return fmt.Sprintf("permit (principal in k8s::Group::%q, action in %s, resource is %s)\nwhen { resource.namespace == %q };", team, verbs(rng), typ, ns)
	case ShapeUser:
		return fmt.Sprintf("permit (principal is k8s::User, action in %s, resource is %s)\nwhen { principal.username == %q && resource.namespace == %q };", verbs(rng), typ, w.user(rng.IntN(w.Users)), ns)
	case ShapeUserScope:
		return fmt.Sprintf("permit (principal == k8s::User::%q, action in %s, resource is %s)\nwhen { resource.namespace == %q };", w.user(rng.IntN(w.Users)), verbs(rng), typ, ns)
	case ShapeGroupContains:
		return fmt.Sprintf("permit (principal, action in %s, resource is %s)\nwhen { principal.groups.contains(%q) && resource.namespace == %q };", verbs(rng), typ, team, ns)
	case ShapeSA:
		// A ServiceAccount reads in its own namespace, sometimes elsewhere.
		saNS := nsI
		if rng.IntN(4) == 0 {
			saNS = rng.IntN(w.Namespaces)
		}
		return fmt.Sprintf("permit (principal is k8s::ServiceAccount, action in %s, resource is %s)\nwhen { principal.namespace == %q && principal.name == %q && resource.namespace == %q };",
			readVerbs, typ, w.ns(saNS), fmt.Sprintf("sa-%d", rng.IntN(3)), ns)
	case ShapeMultiType:
		a, b2 := pick(rng, namespacedTypes), pick(rng, namespacedTypes)
		return fmt.Sprintf("permit (principal in k8s::Group::%q, action in %s, resource)\nwhen { (resource is %s || resource is %s || resource is core::configmaps) && resource.namespace == %q };", team, readVerbs, a, b2, ns)
	case ShapeNSList:
		return fmt.Sprintf("permit (principal in k8s::Group::%q, action in %s, resource is %s)\nwhen { [%q, %q, %q].contains(resource.namespace) };", team, verbs(rng), typ, ns, w.ns(nsI+1), w.ns(nsI+2))
	case ShapeLabels:
		return fmt.Sprintf("permit (principal in k8s::Group::%q, action in [k8s::Action::\"create\", k8s::Action::\"update\", k8s::Action::\"patch\"], resource is core::configmaps)\nwhen { resource.namespace == %q && resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag(\"team\") && resource.object.metadata.labels.getTag(\"team\") == %q };", team, ns, team)
	case ShapeUnless:
		return fmt.Sprintf("permit (principal in k8s::Group::%q, action in %s, resource is core::secrets)\nwhen { resource.namespace == %q }\nunless { resource.name == \"admin-token\" };", team, readVerbs, ns)
	case ShapeForbid:
		switch rng.IntN(3) {
		case 0: // one object, for everyone: requests with open names meet it
			return fmt.Sprintf("forbid (principal, action in [k8s::Action::\"delete\", k8s::Action::\"update\", k8s::Action::\"patch\"], resource is %s)\nwhen { resource.namespace == %q && resource.name == %q };", typ, ns, pick(rng, names))
		case 1:
			return fmt.Sprintf("forbid (principal in k8s::Group::%q, action, resource is core::secrets)\nwhen { resource.namespace == %q }\nunless { resource.name like \"public-*\" };", team, w.ns(rng.IntN(w.Namespaces)))
		default:
			return fmt.Sprintf("forbid (principal is k8s::User, action == k8s::Action::\"delete\", resource is %s)\nwhen { principal.username == %q };", typ, w.user(rng.IntN(w.Users)))
		}
	case ShapeContextVerb:
		if rng.IntN(2) == 0 {
			return fmt.Sprintf("permit (principal in k8s::Group::%q, action, resource is %s)\nwhen { [\"get\", \"list\", \"watch\"].contains(context.verb) && resource.namespace == %q };", team, typ, ns)
		}
		return fmt.Sprintf("permit (principal in k8s::Group::%q, action, resource is %s)\nwhen { context.verb == \"get\" && resource.namespace == %q };", team, typ, ns)
	case ShapeNode:
		node := w.node(rng.IntN(w.Nodes))
		return fmt.Sprintf("permit (principal is k8s::Node, action in [k8s::Action::\"get\", k8s::Action::\"update\", k8s::Action::\"patch\"], resource is core::nodes)\nwhen { principal.name == %q && resource.name == %q };", node, node)
	case ShapeResource:
		return fmt.Sprintf("permit (principal in k8s::Group::%q, action in %s, resource is k8s::Resource)\nwhen { resource.apiGroup == \"example.com\" && resource.resource == %q };", team, readVerbs, fmt.Sprintf("widgets-%d", rng.IntN(w.Teams)))
	case ShapeOther:
		return testgen.DrawShapeSpec(rng, w.Teams).Policy()
	}
	panic("zoo: unknown shape " + shape)
}

// nearDuplicate changes one verb list, or the first namespace.
func nearDuplicate(rng *rand.Rand, w World, body string) string {
	switch {
	case strings.Contains(body, readVerbs) && rng.IntN(2) == 0:
		return strings.Replace(body, readVerbs, `[k8s::Action::"get", k8s::Action::"list"]`, 1)
	case strings.Contains(body, `"ns-`):
		i := strings.Index(body, `"ns-`)
		j := strings.Index(body[i+1:], `"`) + i + 1
		return body[:i] + fmt.Sprintf("%q", w.ns(rng.IntN(w.Namespaces))) + body[j+1:]
	}
	return body + "\n"
}

// Requests returns count requests against the world of an n-policy set: users
// of its teams, ServiceAccounts and nodes, verbs (some "*"), typed resources
// and subresources, unknown and "*" resources, and open namespaces and names.
func Requests(n, count int, seed uint64) []*entities.Request {
	w := WorldFor(n)
	rng := rand.New(rand.NewPCG(seed, 0x300))
	out := make([]*entities.Request, 0, count)
	for len(out) < count {
		out = append(out, request(rng, w))
	}
	return out
}

var reqVerbs = []string{"get", "get", "list", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

func request(rng *rand.Rand, w World) *entities.Request {
	if rng.IntN(100) < 10 { // made for one of the other shapes, which the set may hold
		return testgen.DrawShapeSpec(rng, w.Teams).Request(rng)
	}
	r := &entities.Request{ResourceRequest: true, Verb: pick(rng, reqVerbs)}
	nsI := requestUser(rng, w, r)
	if rng.IntN(30) == 0 {
		r.Verb = entities.Wildcard
	}
	switch k := rng.IntN(100); {
	case k < 4:
		r.ResourceRequest = false
		r.Path = pick(rng, []string{"/api", "/apis/apps", "/version", "/healthz", "/metrics"})
		if r.Verb != entities.Wildcard {
			r.Verb = "get"
		}
		return r
	case k < 70:
		typ := pick(rng, namespacedTypes)
		group, resource, _ := strings.Cut(typ, "::")
		switch group {
		case "core":
			group = ""
		case "io":
			group, resource = "rbac.authorization.k8s.io", "roles"
		}
		r.APIGroup, r.Resource = group, resource
		r.APIVersion = "v1"
	case k < 76:
		r.Resource, r.Subresource = "pods", pick(rng, []string{"status", "log", "exec"})
	case k < 80:
		r.APIGroup, r.Resource, r.Subresource = "apps", "deployments", "scale"
	case k < 86:
		r.Resource = "nodes"
		if rng.IntN(2) == 0 {
			r.Name = w.node(rng.IntN(w.Nodes))
		}
		return r
	case k < 88:
		r.Resource = "namespaces"
		r.Name = pick(rng, []string{"", w.ns(nsI), "kube-system"})
		return r
	case k < 94:
		r.APIGroup, r.Resource = "example.com", fmt.Sprintf("widgets-%d", rng.IntN(w.Teams))
	case k < 97:
		r.APIGroup, r.Resource = entities.Wildcard, entities.Wildcard
	default:
		r.APIGroup, r.Resource = pick(rng, []string{"", "apps", entities.Wildcard}), pick(rng, []string{entities.Wildcard, "pods"})
	}
	switch k := rng.IntN(100); {
	case k < 15:
	case k < 17:
		r.Namespace = "kube-system"
	default:
		r.Namespace = w.ns(nsI)
	}
	if rng.IntN(100) < 45 {
		r.Name = pick(rng, names)
		if rng.IntN(3) == 0 {
			r.Name += fmt.Sprintf("-%d", rng.IntN(w.Namespaces))
		}
	}
	return r
}

// requestUser sets the request's user: a member of teams, a ServiceAccount,
// a node, an admin or a guest; and returns the namespace index to request
// (often one of the user's).
func requestUser(rng *rand.Rand, w World, r *entities.Request) int {
	nsI := rng.IntN(w.Namespaces)
	switch p := rng.IntN(100); {
	case p < 60:
		u := rng.IntN(w.Users)
		r.User.Name = w.user(u)
		ts := w.userTeams(u)
		if rng.IntN(3) == 0 {
			nsI = ts[0] + w.Teams*rng.IntN(max(1, w.Namespaces/w.Teams)) // a namespace of the user's team
		}
		r.User.Groups = []string{w.team(ts[0]), w.team(ts[1]), "system:authenticated"}
	case p < 85:
		saNS := rng.IntN(w.Namespaces)
		r.User.Name = fmt.Sprintf("system:serviceaccount:%s:sa-%d", w.ns(saNS), rng.IntN(4))
		r.User.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + w.ns(saNS), "system:authenticated"}
		if rng.IntN(2) == 0 {
			nsI = saNS
		}
	case p < 92:
		r.User.Name = "system:node:" + w.node(rng.IntN(w.Nodes))
		r.User.Groups = []string{"system:nodes", "system:authenticated"}
	case p < 94:
		r.User.Name = "admin"
		r.User.Groups = []string{"system:masters", "system:authenticated"}
	default:
		r.User.Name = fmt.Sprintf("guest-%d", rng.IntN(100))
		r.User.Groups = []string{w.team(rng.IntN(w.Teams)), "system:authenticated"}
	}
	return nsI
}

// Split cuts a policy document into documents of at most maxBytes (at policy
// boundaries), for sets larger than one policy file may be.
func Split(text string, maxBytes int) []string {
	var out []string
	for len(text) > maxBytes {
		cut := strings.LastIndex(text[:maxBytes], "\n@id(")
		if cut <= 0 {
			break
		}
		out = append(out, text[:cut+1])
		text = text[cut+1:]
	}
	return append(out, text)
}

// PolicySet parses and indexes the n-policy zoo (not validated).
func PolicySet(n int, seed uint64) (*cedarlang.PolicySet, error) {
	var all []*cedarlang.Policy
	for i, doc := range Split(Policies(n, seed), 4<<20) {
		ps, err := cedarlang.ParsePolicies(fmt.Sprintf("zoo-%d.cedar", i), []byte(doc))
		if err != nil {
			return nil, err
		}
		all = append(all, ps...)
	}
	return cedarlang.NewPolicySet(all)
}
