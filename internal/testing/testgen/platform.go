package testgen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/kcedar/kcedar/internal/entities"
)

// Platform families: the shapes platform teams write that name no principal
// and no resource value the index keyed before (each policy is narrowed by
// its verb and type and a condition whose constants differ from policy to
// policy).
const (
	FamilyExtra     = "extra"       // principal.getTag("k").contains("v") / containsAny
	FamilyLabel     = "label"       // the namespace's label k is v (or one of a set)
	FamilySuffix    = "like-suffix" // resource.name like "*-t7-prod", namespace like "*-t7", principal.username like "*-t7"
	FamilyInner     = "like-inner"  // resource.name like "t7-*-db" / "team-*-t7" / "*-t7-*"
	FamilyNameSet   = "name-set"    // ["a", "b"].contains(resource.name)
	FamilyGroupsAny = "groups-any"  // principal.groups.containsAny([...])
	FamilyHasTag    = "has-tag"     // principal.hasTag("k7") / the namespace has label k7
)

// PlatformFamilies lists the families, in a fixed order.
var PlatformFamilies = []string{FamilyExtra, FamilyLabel, FamilySuffix, FamilyInner, FamilyNameSet, FamilyGroupsAny, FamilyHasTag}

// PlatformMix is one draw of the platform workload: which families, with
// which weights, the extra keys, verbs and types, and the tenants.
type PlatformMix struct {
	Seed     uint64
	Weights  []int // per family of PlatformFamilies (0: not drawn)
	Keys     []string
	Verbs    []string
	Types    []string
	Tenants  int
	NoLabels bool // leave out the families that read namespace labels
}

// NewPlatformMix draws a mix of n policies from seed: every run of a seed
// has the same mix, different seeds different ones. noLabels leaves out the
// namespace-label families (a server without a cluster does not know
// namespaces).
func NewPlatformMix(n int, seed uint64, noLabels bool) PlatformMix {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b9))
	m := PlatformMix{Seed: seed, Tenants: max(2, n/4), NoLabels: noLabels}
	for _, f := range PlatformFamilies {
		w := rng.IntN(10)
		if w < 2 && f != FamilyExtra || noLabels && f == FamilyLabel {
			w = 0 // a family left out of this mix
		}
		m.Weights = append(m.Weights, w)
	}
	keys := []string{"dept", "example.com/team", "scopes", "cost-center", "tier", "ä-ключ"}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	m.Keys = keys[:1+rng.IntN(3)]
	verbs := []string{"get", "list", "create", "update", "delete", "patch"}
	m.Verbs = verbs[:2+rng.IntN(len(verbs)-1)]
	types := []string{"core::pods", "core::secrets", "apps::deployments", "core::configmaps"}
	m.Types = types[:1+rng.IntN(len(types))]
	return m
}

// platformSpec is one policy of a mix.
type platformSpec struct {
	family       string
	tenant, form int
	verb, typ    string
	key          string
	forbid       bool
}

func (m PlatformMix) draw(rng *rand.Rand) platformSpec {
	total := 0
	for _, w := range m.Weights {
		total += w
	}
	r, fam := rng.IntN(max(total, 1)), FamilyExtra
	for i, w := range m.Weights {
		if r < w {
			fam = PlatformFamilies[i]
			break
		}
		r -= w
	}
	return platformSpec{family: fam, tenant: rng.IntN(m.Tenants), form: rng.IntN(2), verb: pick(rng, m.Verbs), typ: pick(rng, m.Types),
		key: pick(rng, m.Keys), forbid: rng.IntN(8) == 0}
}

// Platform is n policies of the platform workload drawn from seed.
func Platform(n int, seed uint64, noLabels bool) []string {
	m := NewPlatformMix(n, seed, noLabels)
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]string, n)
	for i := range out {
		out[i] = m.draw(rng).policy(i)
	}
	return out
}

// tenantValue is tenant t's constant; some are edge cases (tenant 3's is
// empty, others hold a literal "*" or unicode), each tenant's its own.
func tenantValue(t int) string {
	if t == 3 {
		return ""
	}
	switch t % 97 {
	case 5:
		return fmt.Sprintf("star*%d", t)
	case 7:
		return fmt.Sprintf("ümlaut-%d", t)
	}
	return fmt.Sprintf("t%d", t)
}

// cedarString is s as a Cedar string literal; in a pattern, `*` escaped.
func cedarString(s string, pattern bool) string {
	q := fmt.Sprintf("%q", s)
	if pattern {
		q = strings.ReplaceAll(q, "*", `\*`)
	}
	return q
}

const nsLabels = "resource.namespaceObject.metadata.labels"

func (s platformSpec) policy(i int) string {
	effect := "permit"
	if s.forbid {
		effect = "forbid"
	}
	v := tenantValue(s.tenant)
	var cond string
	switch s.family {
	case FamilyExtra:
		cond = fmt.Sprintf(`principal.hasTag(%q) && principal.getTag(%q).contains(%s)`, s.key, s.key, cedarString(v, false))
		if s.form == 1 {
			cond = fmt.Sprintf(`principal.hasTag(%q) && principal.getTag(%q).containsAny([%s, "other-%d"])`, s.key, s.key, cedarString(v, false), s.tenant)
		}
	case FamilyLabel:
		read := fmt.Sprintf(`resource has namespaceObject && resource.namespaceObject.metadata has labels && %s.hasTag(%q) && `, nsLabels, s.key)
		cond = read + fmt.Sprintf(`%s.getTag(%q) == %s`, nsLabels, s.key, cedarString(v, false))
		if s.form == 1 {
			cond = read + fmt.Sprintf(`[%s, "x-%d"].contains(%s.getTag(%q))`, cedarString(v, false), s.tenant, nsLabels, s.key)
		}
	case FamilySuffix:
		cond = fmt.Sprintf(`resource.name like "*-%s-prod"`, strings.Trim(cedarString(v, true), `"`))
		switch {
		case s.tenant%4 == 3:
			cond = fmt.Sprintf(`principal.username like "*-%s"`, strings.Trim(cedarString(v, true), `"`))
		case s.form == 1:
			cond = fmt.Sprintf(`resource.namespace like "*-%s"`, strings.Trim(cedarString(v, true), `"`))
		}
	case FamilyInner:
		cond = fmt.Sprintf(`resource.name like "%s-*-db"`, strings.Trim(cedarString(v, true), `"`))
		switch {
		case s.tenant%3 == 2:
			// Only an inner literal: no prefix or suffix to key on.
			cond = fmt.Sprintf(`resource.name like "*-%s-*"`, strings.Trim(cedarString(v, true), `"`))
		case s.form == 1:
			cond = fmt.Sprintf(`resource.name like "team-*-%s"`, strings.Trim(cedarString(v, true), `"`))
		}
	case FamilyNameSet:
		cond = fmt.Sprintf(`[%s, "%s-b", "%s-c"].contains(resource.name)`, cedarString(v, false), v, v)
	case FamilyGroupsAny:
		cond = fmt.Sprintf(`principal.groups.containsAny([%s, "g-%d-admins"])`, cedarString("g-"+v, false), s.tenant)
	case FamilyHasTag:
		cond = fmt.Sprintf(`principal.hasTag("k-%d")`, s.tenant)
		if s.form == 1 {
			cond = fmt.Sprintf(`resource has namespaceObject && resource.namespaceObject.metadata has labels && %s.hasTag("k-%d")`, nsLabels, s.tenant)
		}
	}
	if s.forbid && (s.family == FamilySuffix && s.form == 1) {
		cond = "resource has namespace && " + cond
	}
	return fmt.Sprintf("@id(\"platform-%d-%s\")\n%s (principal, action == k8s::Action::%q, resource is %s)\nwhen { %s };\n",
		i, s.family, effect, s.verb, s.typ, cond)
}

// PlatformNamespace is the name of tenant t's namespace; its labels
// (PlatformNamespaces) carry the tenant's value under every key.
func PlatformNamespace(t int) string { return fmt.Sprintf("ns-%d-%s", t, "x") }

// PlatformNamespaces are the Namespace objects of the mix's tenants (as a
// namespace lookup returns them); every tenth has no labels.
func PlatformNamespaces(m PlatformMix) map[string]map[string]any {
	out := map[string]map[string]any{}
	for t := range m.Tenants {
		md := map[string]any{"name": PlatformNamespace(t), "resourceVersion": "1"}
		if t%10 != 9 {
			labels := map[string]any{fmt.Sprintf("k-%d", t): "yes"}
			for _, k := range m.Keys {
				labels[k] = tenantValue(t)
			}
			md["labels"] = labels
		}
		out[PlatformNamespace(t)] = map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": md}
	}
	return out
}

// PlatformRequests are count requests on the mix of n policies from seed:
// each for a random tenant, matching a family's condition or missing it by
// a little (another tenant's value, no extra, a namespace without labels or
// unknown, "" and open values, cluster-scoped types).
func PlatformRequests(n, count int, seed uint64, noLabels bool) []*entities.Request {
	m := NewPlatformMix(n, seed, noLabels)
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]*entities.Request, count)
	for i := range out {
		out[i] = m.request(rng)
	}
	return out
}

func (m PlatformMix) request(rng *rand.Rand) *entities.Request {
	t := rng.IntN(m.Tenants)
	if rng.IntN(10) == 0 {
		t = rng.IntN(m.Tenants + 5) // a tenant with no policy or namespace
	}
	v := tenantValue(t)
	u := shapeUser(fmt.Sprintf("user-%d", t), "g-"+v)
	if rng.IntN(3) == 0 {
		u.Groups = append(u.Groups, fmt.Sprintf("g-%d-admins", t))
	}
	if rng.IntN(5) != 0 {
		u.Extra = map[string][]string{pick(rng, m.Keys): {v, "other"}, fmt.Sprintf("k-%d", t): {}}
	}
	name := pick(rng, []string{v, v + "-b", "app-" + v + "-prod", v + "-main-db", "team-x-" + v, "", "*", "other"})
	ns := pick(rng, []string{PlatformNamespace(t), PlatformNamespace(t), "team-" + v, "", "unknown-ns"})
	verb := pick(rng, m.Verbs)
	typ := pick(rng, m.Types)
	if rng.IntN(12) == 0 {
		typ, ns = pick(rng, []string{"core::nodes", "core::namespaces"}), ""
	}
	return resourceRequest(u, verb, typ, ns, name)
}

// PlatformFamilyOf is the family of a policy id Platform wrote.
func PlatformFamilyOf(id string) string {
	i := slices.IndexFunc(PlatformFamilies, func(f string) bool { return strings.HasSuffix(id, "-"+f) })
	if i < 0 {
		return ""
	}
	return PlatformFamilies[i]
}
