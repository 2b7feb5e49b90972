package testgen

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/kcedar/kcedar/internal/entities"
)

// Shapes of OtherShapes (the "set with other shapes"), each a
// policy's form for one tenant; its literals name the tenant only, so a
// perfect index finds a request's few policies however many tenants there
// are.
const (
	// ShapeRelation relates request attributes (principal.namespace ==
	// resource.namespace) plus a literal namespace or ServiceAccount name.
	ShapeRelation = "relation"
	// ShapeNamespacePrefix keys on `resource.namespace like "tenant-7-*"`.
	ShapeNamespacePrefix = "namespace-prefix"
	// ShapeCommonGroupPrefix: non-resource path and object-name prefixes (and
	// one exact path) of one common group, "engineering".
	ShapeCommonGroupPrefix = "common-group-prefix"
	// ShapeBigGroup: one of a few big groups (platform, readers, operators),
	// each policy pinning a namespace or a name.
	ShapeBigGroup = "big-group"
	// ShapeBreakGlass: forbids keyed by namespace, with an `unless`
	// break-glass exception.
	ShapeBreakGlass = "forbid-breakglass"
	// ShapeUsernameSet: a set of usernames (`.contains(principal.username)`
	// or `principal in [k8s::User::...]`).
	ShapeUsernameSet = "username-set"
	// ShapeDisjunction: a disjunction across dimensions (`resource.namespace
	// == "team-7" || principal in k8s::Group::"team-7-admins"`).
	ShapeDisjunction = "disjunction"
)

// OtherShapeWeights are the shapes of OtherShapes and their weights
// (percent).
var OtherShapeWeights = []struct {
	Name   string
	Weight int
}{
	{ShapeRelation, 18}, {ShapeNamespacePrefix, 12}, {ShapeCommonGroupPrefix, 14}, {ShapeBigGroup, 18},
	{ShapeBreakGlass, 8}, {ShapeUsernameSet, 14}, {ShapeDisjunction, 16},
}

// shapeForms is the number of forms each shape is written in.
var shapeForms = map[string]int{
	ShapeRelation: 4, ShapeNamespacePrefix: 3, ShapeCommonGroupPrefix: 4, ShapeBigGroup: 4,
	ShapeBreakGlass: 3, ShapeUsernameSet: 3, ShapeDisjunction: 3,
}

// ShapeSpec is one policy of the other shapes: its shape, the form it is
// written in, and its tenant.
type ShapeSpec struct {
	Shape        string
	Form, Tenant int
}

// DrawShapeSpec draws a shape (by OtherShapeWeights), a form and one of
// tenants tenants.
func DrawShapeSpec(rng *rand.Rand, tenants int) ShapeSpec {
	shape := OtherShapeWeights[0].Name
	r := rng.IntN(100)
	for _, s := range OtherShapeWeights {
		if r < s.Weight {
			shape = s.Name
			break
		}
		r -= s.Weight
	}
	return ShapeSpec{Shape: shape, Form: rng.IntN(shapeForms[shape]), Tenant: rng.IntN(max(1, tenants))}
}

// OtherShapesTenants is the number of tenants of an n-policy OtherShapes set.
func OtherShapesTenants(n int) int { return max(4, n/8) }

// shapeSpecs are the n policies of OtherShapes(n).
func shapeSpecs(n int) []ShapeSpec {
	rng := rand.New(rand.NewPCG(23, 0x5a))
	tenants := OtherShapesTenants(n)
	out := make([]ShapeSpec, n)
	for i := range out {
		out[i] = DrawShapeSpec(rng, tenants)
	}
	return out
}

// OtherShapes is the set with other shapes, n policies (one string
// each, with its @id): relations between request attributes, namespace
// prefixes, path and name prefixes under one common group, one big group,
// forbids with a break-glass exception, username sets and disjunctions
// across dimensions, each over n/8 distinct tenants.
func OtherShapes(n int) []string {
	out := make([]string, 0, n)
	for i, s := range shapeSpecs(n) {
		out = append(out, fmt.Sprintf("@id(\"shape-%d-%s\")\n%s\n", i, s.Shape, s.Policy()))
	}
	return out
}

// OtherShapesRequests are count requests against OtherShapes(n): 80% made
// for one of its policies (allowed by a permit, denied by a forbid, or a
// forbid's break-glass exception), 20% made for a shape drawn over all
// tenants and a quarter more, which the set may not hold (mostly no
// opinion). They include ServiceAccounts, plain users, non-resource
// requests and lists.
func OtherShapesRequests(n, count int) []*entities.Request {
	specs := shapeSpecs(n)
	rng := rand.New(rand.NewPCG(23, 0x5b))
	tenants := OtherShapesTenants(n)
	out := make([]*entities.Request, 0, count)
	for len(out) < count {
		s := specs[rng.IntN(len(specs))]
		if rng.IntN(5) == 0 {
			s = DrawShapeSpec(rng, tenants+tenants/4)
		}
		out = append(out, s.Request(rng))
	}
	return out
}

const (
	shapeRead  = `[k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"]`
	shapeWrite = `[k8s::Action::"create", k8s::Action::"update", k8s::Action::"patch", k8s::Action::"delete"]`
	shapeEdit  = `[k8s::Action::"get", k8s::Action::"update", k8s::Action::"patch"]`
)

var bigGroups = []string{"platform", "readers", "operators"}

// bigGroup is the big group of a ShapeBigGroup policy.
func (s ShapeSpec) bigGroup() string { return bigGroups[(s.Tenant+s.Form)%len(bigGroups)] }

// Policy is the policy's text (without @id).
func (s ShapeSpec) Policy() string {
	t := s.Tenant
	switch s.Shape {
	case ShapeRelation:
		return relationPolicy(s.Form, t)
	case ShapeNamespacePrefix:
		return namespacePrefixPolicy(s.Form, t)
	case ShapeCommonGroupPrefix:
		return commonGroupPrefixPolicy(s.Form, t)
	case ShapeBigGroup:
		return bigGroupPolicy(s.Form, t, s.bigGroup())
	case ShapeBreakGlass:
		return breakGlassPolicy(s.Form, t)
	case ShapeUsernameSet:
		return usernameSetPolicy(s.Form, t)
	case ShapeDisjunction:
		return disjunctionPolicy(s.Form, t)
	}
	panic("testgen: unknown shape " + s.Shape)
}

func relationPolicy(form, t int) string {
	switch form {
	case 0:
		return fmt.Sprintf("permit (principal is k8s::ServiceAccount, action in %s, resource is core::configmaps)\nwhen { principal.namespace == resource.namespace && resource.namespace == \"tenant-%d\" };", shapeRead, t)
	case 1:
		return fmt.Sprintf("permit (principal is k8s::ServiceAccount, action in %s, resource is apps::deployments)\nwhen { resource.namespace == principal.namespace && principal.name == \"deployer-%d\" };", shapeEdit, t)
	case 2:
		return fmt.Sprintf("permit (principal is k8s::ServiceAccount, action in %s, resource is core::secrets)\nwhen { principal.name == \"deployer-%d\" && principal.namespace == resource.namespace };", shapeRead, t)
	}
	return fmt.Sprintf("permit (principal is k8s::ServiceAccount, action in %s, resource is core::pods)\nwhen { resource.namespace == \"tenant-%d\" && principal.namespace == resource.namespace };", shapeRead, t)
}

func namespacePrefixPolicy(form, t int) string {
	switch form {
	case 0:
		return fmt.Sprintf("permit (principal in k8s::Group::\"developers\", action in %s, resource is core::pods)\nwhen { resource.namespace like \"tenant-%d-*\" };", shapeRead, t)
	case 1:
		return fmt.Sprintf("permit (principal is k8s::User, action in %s, resource is apps::deployments)\nwhen { resource.namespace like \"tenant-%d-*\" && principal.groups.contains(\"developers\") };", shapeWrite, t)
	}
	return fmt.Sprintf("permit (principal, action, resource is core::services)\nwhen { principal in k8s::Group::\"developers\" && resource.namespace like \"tenant-%d-*\" };", t)
}

func commonGroupPrefixPolicy(form, t int) string {
	const scope = "permit (principal in k8s::Group::\"engineering\", "
	switch form {
	case 0:
		return fmt.Sprintf(scope+"action == k8s::Action::\"get\", resource is k8s::NonResourceURL)\nwhen { resource.path like \"/apis/tenant-%d/*\" };", t)
	case 1:
		return fmt.Sprintf(scope+"action == k8s::Action::\"get\", resource is k8s::NonResourceURL)\nwhen { resource.path == \"/healthz/%d\" };", t)
	case 2:
		return fmt.Sprintf(scope+"action in %s, resource is core::configmaps)\nwhen { resource.name like \"app-%d-*\" };", shapeRead, t)
	}
	return fmt.Sprintf(scope+"action in %s, resource is apps::deployments)\nwhen { resource.name like \"app-%d-*\" };", shapeEdit, t)
}

func bigGroupPolicy(form, t int, group string) string {
	switch form {
	case 0:
		return fmt.Sprintf("permit (principal in k8s::Group::%q, action in %s, resource is core::pods)\nwhen { resource.namespace == \"tenant-%d\" };", group, shapeRead, t)
	case 1:
		return fmt.Sprintf("permit (principal in k8s::Group::%q, action in %s, resource is apps::deployments)\nwhen { resource.namespace == \"tenant-%d\" && resource.name == \"svc-%d\" };", group, shapeWrite, t, t)
	case 2:
		return fmt.Sprintf("permit (principal in k8s::Group::%q, action in %s, resource is core::configmaps)\nwhen { resource.name == \"cfg-%d\" };", group, shapeRead, t)
	}
	return fmt.Sprintf("permit (principal, action in %s, resource is core::services)\nwhen { principal.groups.contains(%q) && resource.namespace == \"tenant-%d\" };", shapeRead, group, t)
}

func breakGlassPolicy(form, t int) string {
	switch form {
	case 0:
		return fmt.Sprintf("forbid (principal, action in [k8s::Action::\"delete\", k8s::Action::\"deletecollection\"], resource)\nwhen { resource has namespace && resource.namespace == \"tenant-%d\" }\nunless { principal in k8s::Group::\"breakglass\" };", t)
	case 1:
		return fmt.Sprintf("forbid (principal, action, resource is core::secrets)\nwhen { resource.namespace == \"tenant-%d\" && resource.name == \"root-%d\" }\nunless { principal.groups.contains(\"breakglass-%d\") };", t, t, t)
	}
	return fmt.Sprintf("forbid (principal is k8s::User, action in %s, resource is core::configmaps)\nwhen { resource.namespace == \"tenant-%d\" }\nunless { principal in k8s::Group::\"breakglass\" || principal.username == \"oncall-%d\" };", shapeWrite, t, t)
}

func usernameSetPolicy(form, t int) string {
	switch form {
	case 0:
		return fmt.Sprintf("permit (principal is k8s::User, action in %s, resource is core::pods)\nwhen { [\"alice-%d\", \"bob-%d\"].contains(principal.username) && resource.namespace == \"tenant-%d\" };", shapeRead, t, t, t)
	case 1:
		return fmt.Sprintf("permit (principal, action in %s, resource is core::configmaps)\nwhen { principal in [k8s::User::\"alice-%d\", k8s::User::\"bob-%d\", k8s::User::\"carol-%d\"] };", shapeRead, t, t, t)
	}
	return fmt.Sprintf("permit (principal is k8s::User, action, resource is core::services)\nwhen { [\"alice-%d\", \"bob-%d\"].contains(principal.username) };", t, t)
}

func disjunctionPolicy(form, t int) string {
	switch form {
	case 0:
		return fmt.Sprintf("permit (principal, action in %s, resource is core::pods)\nwhen { resource.namespace == \"team-%d\" || principal in k8s::Group::\"team-%d-admins\" };", shapeRead, t, t)
	case 1:
		return fmt.Sprintf("permit (principal, action in %s, resource is apps::deployments)\nwhen { principal.groups.contains(\"team-%d-admins\") || resource.namespace == \"team-%d\" };", shapeRead, t, t)
	}
	return fmt.Sprintf("permit (principal, action in %s, resource is core::configmaps)\nwhen { principal.username == \"lead-%d\" || (resource.namespace == \"team-%d\" && principal in k8s::Group::\"team-%d\") };", shapeWrite, t, t, t)
}

// Request is a request the policy decides: one its permit allows, or its
// forbid denies (one in five escapes it through the break-glass exception).
// Other policies of the set may decide it too.
func (s ShapeSpec) Request(rng *rand.Rand) *entities.Request {
	t := s.Tenant
	switch s.Shape {
	case ShapeRelation:
		return relationRequest(rng, s.Form, t)
	case ShapeNamespacePrefix:
		u := shapeUser(fmt.Sprintf("dev-%d", rng.IntN(50)), "developers")
		ns := fmt.Sprintf("tenant-%d-%s", t, pick(rng, []string{"prod", "staging", "dev"}))
		switch s.Form {
		case 0:
			return readRequest(rng, u, "core::pods", ns, "web")
		case 1:
			return resourceRequest(u, "update", "apps::deployments", ns, "web")
		}
		return resourceRequest(u, pick(rng, []string{"get", "create", "delete"}), "core::services", ns, "api")
	case ShapeCommonGroupPrefix:
		u := shapeUser(fmt.Sprintf("eng-%d", rng.IntN(50)), "engineering")
		switch s.Form {
		case 0:
			return &entities.Request{User: u, Verb: "get", Path: fmt.Sprintf("/apis/tenant-%d/v1/widgets", t)}
		case 1:
			return &entities.Request{User: u, Verb: "get", Path: fmt.Sprintf("/healthz/%d", t)}
		case 2:
			return readRequest(rng, u, "core::configmaps", "shared", fmt.Sprintf("app-%d-web", t)) // a list is conditional on the name
		}
		return resourceRequest(u, "patch", "apps::deployments", "shared", fmt.Sprintf("app-%d-api", t))
	case ShapeBigGroup:
		return bigGroupRequest(rng, s)
	case ShapeBreakGlass:
		return breakGlassRequest(rng, s)
	case ShapeUsernameSet:
		u := shapeUser(pick(rng, []string{"alice", "bob"}) + fmt.Sprintf("-%d", t))
		switch s.Form {
		case 0:
			return readRequest(rng, u, "core::pods", fmt.Sprintf("tenant-%d", t), "web")
		case 1:
			return readRequest(rng, u, "core::configmaps", "shared", "settings")
		}
		return resourceRequest(u, "create", "core::services", fmt.Sprintf("tenant-%d", t), "api")
	case ShapeDisjunction:
		return disjunctionRequest(rng, s)
	}
	panic("testgen: unknown shape " + s.Shape)
}

func relationRequest(rng *rand.Rand, form, t int) *entities.Request {
	ns := fmt.Sprintf("tenant-%d", t)
	deployer := serviceAccount(ns, fmt.Sprintf("deployer-%d", t))
	switch form {
	case 0:
		return readRequest(rng, serviceAccount(ns, fmt.Sprintf("app-%d", rng.IntN(3))), "core::configmaps", ns, "settings")
	case 1:
		return resourceRequest(deployer, "update", "apps::deployments", ns, "web")
	case 2:
		return resourceRequest(deployer, "get", "core::secrets", ns, "tls")
	}
	return readRequest(rng, serviceAccount(ns, fmt.Sprintf("sa-%d", rng.IntN(3))), "core::pods", ns, "web")
}

func bigGroupRequest(rng *rand.Rand, s ShapeSpec) *entities.Request {
	t := s.Tenant
	u := shapeUser(fmt.Sprintf("member-%d", rng.IntN(100)), s.bigGroup())
	ns := fmt.Sprintf("tenant-%d", t)
	switch s.Form {
	case 0:
		return readRequest(rng, u, "core::pods", ns, "web")
	case 1:
		return resourceRequest(u, "update", "apps::deployments", ns, fmt.Sprintf("svc-%d", t))
	case 2:
		return resourceRequest(u, "get", "core::configmaps", "shared", fmt.Sprintf("cfg-%d", t))
	}
	return readRequest(rng, u, "core::services", ns, "api")
}

func breakGlassRequest(rng *rand.Rand, s ShapeSpec) *entities.Request {
	t := s.Tenant
	groups := []string{pick(rng, bigGroups)}
	if rng.IntN(5) == 0 {
		groups = append(groups, "breakglass", fmt.Sprintf("breakglass-%d", t))
	}
	u := shapeUser(fmt.Sprintf("member-%d", rng.IntN(100)), groups...)
	ns := fmt.Sprintf("tenant-%d", t)
	switch s.Form {
	case 0:
		return resourceRequest(u, "delete", "core::pods", ns, "web")
	case 1:
		return resourceRequest(u, "get", "core::secrets", ns, fmt.Sprintf("root-%d", t))
	}
	return resourceRequest(u, "update", "core::configmaps", ns, "settings")
}

func disjunctionRequest(rng *rand.Rand, s ShapeSpec) *entities.Request {
	t := s.Tenant
	// Either side of the disjunction: the namespace, or the principal.
	ns, u := fmt.Sprintf("team-%d", t), shapeUser(fmt.Sprintf("visitor-%d", rng.IntN(100)))
	if rng.IntN(2) == 0 {
		ns, u = "shared", shapeUser(fmt.Sprintf("admin-%d", rng.IntN(100)), fmt.Sprintf("team-%d-admins", t))
	}
	switch s.Form {
	case 0:
		return readRequest(rng, u, "core::pods", ns, "web")
	case 1:
		return readRequest(rng, u, "apps::deployments", ns, "web")
	}
	if ns == "shared" {
		u = shapeUser(fmt.Sprintf("lead-%d", t))
	} else {
		u.Groups = append(u.Groups, fmt.Sprintf("team-%d", t))
	}
	return resourceRequest(u, "update", "core::configmaps", ns, "settings")
}

// shapeUser is a plain user in groups (and system:authenticated).
func shapeUser(name string, groups ...string) entities.UserInfo {
	return entities.UserInfo{Name: name, Groups: append(append([]string{}, groups...), "system:authenticated")}
}

// serviceAccount is ServiceAccount ns/name with its groups.
func serviceAccount(ns, name string) entities.UserInfo {
	return entities.UserInfo{Name: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
}

// readRequest gets name, or lists or watches the namespace (no name).
func readRequest(rng *rand.Rand, u entities.UserInfo, typ, ns, name string) *entities.Request {
	verb := pick(rng, []string{"get", "get", "list", "watch"})
	if verb != "get" {
		name = ""
	}
	return resourceRequest(u, verb, typ, ns, name)
}

// resourceRequest is a request on typ ("core::pods", "apps::deployments").
func resourceRequest(u entities.UserInfo, verb, typ, ns, name string) *entities.Request {
	group, resource, _ := strings.Cut(typ, "::")
	if group == "core" {
		group = ""
	}
	return &entities.Request{User: u, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "v1", Resource: resource, Namespace: ns, Name: name}
}
