package testgen

import (
	"math/rand/v2"

	"github.com/kcedar/kcedar/internal/entities"
)

// pathNamed is the value path of expr.
func pathNamed(expr string) valuePath {
	for _, p := range valuePaths {
		if p.expr == expr {
			return p
		}
	}
	panic("testgen: no value path " + expr)
}

// PredicateRequests are count requests on the mix of n policies from seed:
// each of a tenant, carrying its values on most paths and another
// tenant's, an open one or none on some; users, ServiceAccounts and nodes,
// with and without a uid and extra; typed resources (namespaced and
// cluster-scoped), unknown resources with subresources, non-resource URLs;
// custom verbs.
func PredicateRequests(n, count int, seed uint64, o PredicateOptions) []*entities.Request {
	m := NewPredicateMix(n, seed, o)
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]*entities.Request, count)
	for i := range out {
		out[i] = m.request(rng)
	}
	return out
}

// other is t, or now and then another tenant (a near miss).
func (m PredicateMix) other(rng *rand.Rand, t int) int {
	if rng.IntN(4) == 0 {
		return rng.IntN(m.Tenants + 3)
	}
	return t
}

// user draws the user of a request of tenant t.
func (m PredicateMix) user(rng *rand.Rand, t int) entities.UserInfo {
	i := rng.IntN(2)
	var u entities.UserInfo
	switch rng.IntN(6) {
	case 0:
		u = serviceAccount(pathNamed("principal.namespace").value(m.other(rng, t), i), pathNamed("principal.name").value(m.other(rng, t), i))
	case 1:
		u = shapeUser("system:node:"+pathNamed("principal.name").value(m.other(rng, t), i), "system:nodes")
	default:
		u = shapeUser(pathNamed("principal.username").value(m.other(rng, t), i))
	}
	u.Groups = append(u.Groups, groupsOf(m.other(rng, t))[:1+rng.IntN(2)]...)
	if rng.IntN(5) > 0 {
		u.UID = pathNamed("principal.uid").value(m.other(rng, t), i)
	}
	if rng.IntN(3) > 0 {
		o := m.other(rng, t)
		u.Extra = map[string][]string{pick(rng, m.Keys): {token(o), token(o) + "-x"}}
	}
	return u
}

// request draws a request of a random tenant.
func (m PredicateMix) request(rng *rand.Rand) *entities.Request {
	t := rng.IntN(m.Tenants)
	u := m.user(rng, t)
	verb := pick(rng, m.Verbs)
	switch rng.IntN(20) {
	case 0, 1:
		verb = pathNamed("context.verb").value(m.other(rng, t), 0)
	case 2:
		verb = entities.Wildcard // every verb, as a review may ask
	}
	value := func(expr string) string { return pathNamed(expr).value(m.other(rng, t), rng.IntN(2)) }
	openOr := func(v string) string {
		if rng.IntN(5) == 0 {
			return ""
		}
		return v
	}
	switch rng.IntN(10) {
	case 0, 1:
		return &entities.Request{User: u, Verb: pick(rng, urlVerbs), Path: value("resource.path")}
	case 2, 3, 4:
		r := &entities.Request{User: u, Verb: verb, ResourceRequest: true, APIGroup: value("resource.apiGroup"), APIVersion: "v1",
			Resource: value("resource.resource"), Namespace: openOr(value("resource.namespace")), Name: openOr(value("resource.name"))}
		if rng.IntN(2) == 0 {
			r.Subresource = value("resource.subresource")
		}
		return r
	}
	typ := pick(rng, predTypes["typed"])
	ns := openOr(value("resource.namespace"))
	if typ == "core::nodes" {
		ns = ""
	}
	return resourceRequest(u, verb, typ, ns, openOr(value("resource.name")))
}

// PredicateNamespaces are the Namespace objects of the mix's tenants (as a
// namespace lookup returns them): each tenant's namespaces carry its token
// under every key and the label k-<token>; every seventh has no labels.
func PredicateNamespaces(m PredicateMix) map[string]map[string]any {
	out := map[string]map[string]any{}
	p := pathNamed("resource.namespace")
	for t := range m.Tenants {
		for i := range p.tails {
			name := p.value(t, i)
			md := map[string]any{"name": name, "resourceVersion": "1"}
			if t%7 != 6 {
				labels := map[string]any{"k-" + token(t): "yes"}
				for _, k := range m.Keys {
					labels[k] = token(t)
				}
				md["labels"] = labels
			}
			out[name] = map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": md}
		}
	}
	return out
}
