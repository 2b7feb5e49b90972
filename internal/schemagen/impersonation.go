package schemagen

import (
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
)

// Constrained impersonation (KEP-5284, beta and on by default since
// Kubernetes 1.36). When a request impersonates, the API server's
// impersonation filter (k8s.io/apiserver, endpoints/filters/impersonation)
// tries the modes below in order, then the legacy "impersonate" verb. Within
// a mode whose filter matches, it asks
//
//   - impersonate-on:<mode>:<verb> on the request being made (its resource or
//     non-resource path, the request's verb after the prefix), then
//   - impersonate:<mode> on each part of the identity being taken: the
//     authentication.k8s.io resources users, groups, nodes, serviceaccounts,
//     uids and userextras (legacy impersonation asks users, groups and
//     serviceaccounts in the core group).
//
// kcedar declares one action per such verb. The impersonate-on actions of a
// mode are members of the action group "impersonate-on:<mode>:*", itself a
// member of "*"; impersonate:<mode> is a member of "*". The legacy
// "impersonate" is unrelated to all of them, as in RBAC, which matches these
// verbs literally ("*" matches every verb).
const (
	// ImpersonatePrefix starts the verb asked on the identity taken:
	// impersonate:<mode>.
	ImpersonatePrefix = "impersonate:"
	// ImpersonateOnPrefix starts the verb asked on the request made while
	// impersonating: impersonate-on:<mode>:<verb>.
	ImpersonateOnPrefix = "impersonate-on:"
	// AuthenticationGroup is the API group of the identity resources that
	// constrained impersonation asks about.
	AuthenticationGroup = "authentication.k8s.io"
	// AssociatedNodeExtraKey is the only user extra the API server sends for
	// the requestor of associated-node impersonation: the names of its extra
	// keys (the values, the node name included, are dropped).
	AssociatedNodeExtraKey = "authentication.kubernetes.io/associated-node-keys"
)

// The constrained impersonation modes, in the order the API server tries them.
const (
	ModeAssociatedNode = "associated-node"
	ModeArbitraryNode  = "arbitrary-node"
	ModeServiceAccount = "serviceaccount"
	ModeUserInfo       = "user-info"
)

// ImpersonationModes lists the modes in the order the API server tries them.
var ImpersonationModes = []string{ModeAssociatedNode, ModeArbitraryNode, ModeServiceAccount, ModeUserInfo}

// RequestVerbs are the verbs the API server gives resource requests (its
// RequestInfo): the verbs an impersonate-on check can carry for a resource.
// Other resource verbs (bind, use, custom verbs) are checked by the handlers
// for the impersonated user, never prefixed.
var RequestVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// ImpersonateVerb is impersonate:<mode>.
func ImpersonateVerb(mode string) string { return ImpersonatePrefix + mode }

// ImpersonateOnVerb is impersonate-on:<mode>:<verb>.
func ImpersonateOnVerb(mode, verb string) string { return ImpersonateOnPrefix + mode + ":" + verb }

// ImpersonateOnGroup is the action group of a mode's impersonate-on actions:
// impersonate-on:<mode>:*.
func ImpersonateOnGroup(mode string) string { return ImpersonateOnVerb(mode, AllVerbs) }

// ParseImpersonateOn splits impersonate-on:<mode>:<verb>; ok is false for
// any other verb.
func ParseImpersonateOn(verb string) (mode, inner string, ok bool) {
	rest, ok := strings.CutPrefix(verb, ImpersonateOnPrefix)
	if !ok {
		return "", "", false
	}
	mode, inner, ok = strings.Cut(rest, ":")
	if !ok || mode == "" || inner == "" {
		return "", "", false
	}
	return mode, inner, true
}

// impersonationMode is the mode of an impersonate:<mode> or
// impersonate-on:<mode>:<verb> verb ("" for any other verb).
func impersonationMode(verb string) string {
	if mode, _, ok := ParseImpersonateOn(verb); ok {
		return mode
	}
	if mode, ok := strings.CutPrefix(verb, ImpersonatePrefix); ok {
		return mode
	}
	return ""
}

// IsActionGroup reports whether verb names an action group rather than a
// verb: "*" and impersonate-on:<mode>:*. A request whose verb is literally
// one of them is still decided as that literal verb (only a request for "*"
// stands for every verb), as RBAC matches it.
func IsActionGroup(verb string) bool {
	if verb == AllVerbs {
		return true
	}
	_, inner, ok := ParseImpersonateOn(verb)
	return ok && inner == AllVerbs
}

// ActionParents are the action groups k8s::Action::"<verb>" is directly a
// member of: none for "*"; "*" for impersonate-on:<mode>:* and every verb
// but impersonate-on:<mode>:<verb>, which is in impersonate-on:<mode>:*.
func ActionParents(verb string) []string {
	if verb == AllVerbs {
		return nil
	}
	if mode, inner, ok := ParseImpersonateOn(verb); ok && inner != AllVerbs {
		return []string{ImpersonateOnGroup(mode)}
	}
	return []string{AllVerbs}
}

// ActionIn reports whether k8s::Action::"<verb>" is in k8s::Action::"<group>"
// (itself, or a transitive member).
func ActionIn(verb, group string) bool {
	for v := verb; ; {
		if v == group {
			return true
		}
		parents := ActionParents(v)
		if len(parents) == 0 {
			return false
		}
		v = parents[0]
	}
}

// ActionAncestors lists the action groups verb is transitively in (without
// verb itself).
func ActionAncestors(verb string) []string {
	var out []string
	for p := ActionParents(verb); len(p) > 0; p = ActionParents(p[0]) {
		out = append(out, p[0])
	}
	return out
}

// IsNonResourceAction reports whether the action of verb applies to
// non-resource URLs: the non-resource verbs and their impersonate-on forms.
func IsNonResourceAction(verb string) bool {
	if _, inner, ok := ParseImpersonateOn(verb); ok {
		verb = inner
	}
	return slices.Contains(NonResourceVerbs, verb)
}

// NonResourceActions are the verbs a non-resource request for "*" stands
// for: the non-resource verbs and, for every mode, their impersonate-on forms.
// The slice is shared: do not modify it.
func NonResourceActions() []string { return nonResourceActions }

var nonResourceActions = func() []string {
	out := append([]string(nil), NonResourceVerbs...)
	for _, m := range ImpersonationModes {
		for _, v := range NonResourceVerbs {
			out = append(out, ImpersonateOnVerb(m, v))
		}
	}
	return out
}()

// ImpersonationVerbs are the verbs of constrained impersonation that every
// generated schema declares: impersonate:<mode>, and impersonate-on:<mode>:<v>
// for every request and non-resource verb v.
func ImpersonationVerbs() []string {
	var out []string
	for _, m := range ImpersonationModes {
		out = append(out, ImpersonateVerb(m))
		for _, v := range impersonateOnInner() {
			out = append(out, ImpersonateOnVerb(m, v))
		}
	}
	slices.Sort(out)
	return out
}

// impersonateOnInner are the verbs an impersonate-on check can carry: the
// request verbs and the non-resource verbs.
func impersonateOnInner() []string {
	out := append(append([]string(nil), RequestVerbs...), NonResourceVerbs...)
	slices.Sort(out)
	return slices.Compact(out)
}

// ActionPrincipals are the principal types the action of verb applies to:
// only ServiceAccounts for the associated-node mode (the API server only
// tries it for a ServiceAccount bound to the node's pod), every principal
// type otherwise.
func ActionPrincipals(verb string) []types.EntityType {
	if impersonationMode(verb) == ModeAssociatedNode {
		return []types.EntityType{ServiceAccountType}
	}
	return principalTypes
}

// AppliesToEveryPrincipal reports whether the action of verb applies to
// every principal type (all but the associated-node actions).
func AppliesToEveryPrincipal(verb string) bool {
	return len(ActionPrincipals(verb)) == len(principalTypes)
}

// identityResource is an authentication.k8s.io resource constrained
// impersonation asks about, and the modes that ask about it.
type identityResource struct {
	resource       string
	namespaced     bool
	anySubresource bool
	modes          []string
}

// identityResources: users (the username, name), groups (name; "*" when four
// or more are asked at once), nodes (the node name, without system:node:;
// "*" for associated-node), serviceaccounts (namespace and name), uids
// (name), userextras (the key as subresource, the value as name; both "*"
// when four or more values are asked at once).
var identityResources = []identityResource{
	{resource: "users", modes: []string{ModeUserInfo}},
	{resource: "groups", modes: []string{ModeUserInfo}},
	{resource: "nodes", modes: []string{ModeAssociatedNode, ModeArbitraryNode}},
	{resource: "serviceaccounts", namespaced: true, modes: []string{ModeServiceAccount}},
	{resource: "uids", modes: []string{ModeUserInfo}},
	{resource: "userextras", anySubresource: true, modes: []string{ModeUserInfo}},
}

// addImpersonation adds what constrained impersonation needs to s: the
// identity resources of authentication.k8s.io with their impersonate:<mode>
// verbs, and, on every resource that is not virtual, impersonate-on:<mode>:<v>
// for each of its request verbs v.
// claim, when not nil, gives each new resource its entity type (false: the
// type is taken, the resource is skipped).
func (s *Schema) addImpersonation(claim func(ResourceKey, types.EntityType) bool) {
	for _, r := range s.Resources {
		if r.Virtual {
			continue
		}
		set := toSet(r.Verbs)
		for _, v := range RequestVerbs {
			if set[v] {
				for _, m := range ImpersonationModes {
					set[ImpersonateOnVerb(m, v)] = true
				}
			}
		}
		r.Verbs = sortedSet(set)
	}
	for _, ir := range identityResources {
		key := ResourceKey{Group: AuthenticationGroup, Resource: ir.resource}
		r, ok := s.Resources[key]
		if !ok {
			et := ResourceEntityType(key.Group, key.Resource, "")
			if claim != nil && !claim(key, et) {
				continue
			}
			r = &Resource{
				Key: key, EntityType: et, Namespaced: ir.namespaced,
				Versions: map[string]*ObjectVersion{}, Virtual: true, AnySubresource: ir.anySubresource,
			}
			s.Resources[key] = r
		}
		set := toSet(r.Verbs)
		for _, m := range ir.modes {
			set[ImpersonateVerb(m)] = true
		}
		r.Verbs = sortedSet(set)
	}
}

// AddImpersonation adds constrained impersonation to a hand-built schema
// (Generate does it for generated ones): the identity resources, the
// impersonate-on verbs of the other resources, and the declared verbs.
func (s *Schema) AddImpersonation() {
	s.addImpersonation(nil)
	set := toSet(s.Verbs)
	for _, v := range ImpersonationVerbs() {
		set[v] = true
	}
	s.Verbs = sortedSet(set)
}
