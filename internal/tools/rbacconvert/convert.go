package rbacconvert

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/format"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
	"github.com/kcedar/kcedar/internal/schemagen"
)

const (
	kindRoleBinding        = "RoleBinding"
	kindClusterRoleBinding = "ClusterRoleBinding"
)

// binding is a RoleBinding or ClusterRoleBinding.
type binding struct {
	kind      string
	namespace string // "" for ClusterRoleBindings
	name      string
	roleRef   rbacv1.RoleRef
	subjects  []rbacv1.Subject
	bootstrap bool // created by kube-apiserver (IsBootstrap)
}

func (b binding) describe() string {
	if b.kind == kindRoleBinding {
		return b.kind + "/" + b.namespace + "/" + b.name
	}
	return b.kind + "/" + b.name
}

// origin is the binding as the subject of a warning.
func (b binding) origin() origin {
	return origin{desc: cedarlex.Visible(b.describe()), bootstrap: b.bootstrap}
}

// bindingsOf lists the bindings of in: ClusterRoleBindings by name, then
// RoleBindings by namespace and name.
func bindingsOf(in *Input) []binding {
	var out []binding
	for _, b := range in.ClusterRoleBindings {
		out = append(out, binding{kind: kindClusterRoleBinding, name: b.Name, roleRef: b.RoleRef, subjects: b.Subjects, bootstrap: IsBootstrap(b.ObjectMeta)})
	}
	for _, b := range in.RoleBindings {
		out = append(out, binding{kind: kindRoleBinding, namespace: b.Namespace, name: b.Name, roleRef: b.RoleRef, subjects: b.Subjects, bootstrap: IsBootstrap(b.ObjectMeta)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.kind != b.kind {
			return a.kind == kindClusterRoleBinding
		}
		if a.namespace != b.namespace {
			return a.namespace < b.namespace
		}
		return a.name < b.name
	})
	return out
}

type roleIndex struct {
	roles        map[string]*rbacv1.Role // namespace/name
	clusterRoles map[string]*rbacv1.ClusterRole
}

func newRoleIndex(in *Input) *roleIndex {
	idx := &roleIndex{roles: map[string]*rbacv1.Role{}, clusterRoles: map[string]*rbacv1.ClusterRole{}}
	for i := range in.Roles {
		r := &in.Roles[i]
		idx.roles[r.Namespace+"/"+r.Name] = r
	}
	for i := range in.ClusterRoles {
		r := &in.ClusterRoles[i]
		idx.clusterRoles[r.Name] = r
	}
	return idx
}

// rules resolves a binding's role as the RBAC authorizer does: a Role in the
// binding's namespace, or a ClusterRole.
func (idx *roleIndex) rules(b binding) ([]rbacv1.PolicyRule, string, bool) {
	switch b.roleRef.Kind {
	case "Role":
		if b.namespace == "" {
			return nil, "Role/" + b.roleRef.Name, false
		}
		r, ok := idx.roles[b.namespace+"/"+b.roleRef.Name]
		if !ok {
			return nil, "Role/" + b.namespace + "/" + b.roleRef.Name, false
		}
		return r.Rules, "Role/" + b.namespace + "/" + b.roleRef.Name, true
	case "ClusterRole":
		r, ok := idx.clusterRoles[b.roleRef.Name]
		if !ok {
			return nil, "ClusterRole/" + b.roleRef.Name, false
		}
		return r.Rules, "ClusterRole/" + b.roleRef.Name, true
	}
	return nil, b.roleRef.Kind + "/" + b.roleRef.Name, false
}

// bootstrapRole reports whether b's role is one of Kubernetes' bootstrap
// roles whose rules are kube-apiserver's own. An aggregated ClusterRole
// (admin, edit, view, ...) is not: its rules are gathered from other roles,
// yours included, so warnings on it are yours to read.
func (idx *roleIndex) bootstrapRole(b binding) bool {
	switch b.roleRef.Kind {
	case "Role":
		r, ok := idx.roles[b.namespace+"/"+b.roleRef.Name]
		return ok && IsBootstrap(r.ObjectMeta)
	case "ClusterRole":
		r, ok := idx.clusterRoles[b.roleRef.Name]
		return ok && IsBootstrap(r.ObjectMeta) && r.AggregationRule == nil
	}
	return false
}

// Result is a conversion's output.
type Result struct {
	// Policies is the Cedar text: deterministic for the same input and schema.
	Policies []byte
	// Parsed are the policies of Policies, parsed and checked to be the
	// ones built.
	Parsed []*cedarlang.Policy
	// Count is the number of policies.
	Count int
	// Bindings is the number of bindings converted (missing roles excluded).
	Bindings int
	// Warnings lists what was skipped or cannot be expressed, sorted.
	Warnings []string
	// Bootstrap is the part of Warnings about Kubernetes' bootstrap roles
	// and bindings (IsBootstrap), sorted: expected on every cluster, as
	// kube-apiserver's own roles name resources the schema does not type
	// (*/finalizers, leasecandidates, pods in metrics.k8s.io, ...).
	Bootstrap []string
}

// UserWarnings is Warnings without Bootstrap: the warnings on your own
// roles and bindings (and on the input), sorted.
func (r *Result) UserWarnings() []string {
	boot := make(map[string]bool, len(r.Bootstrap))
	for _, w := range r.Bootstrap {
		boot[w] = true
	}
	var out []string
	for _, w := range r.Warnings {
		if !boot[w] {
			out = append(out, w)
		}
	}
	return out
}

// Convert turns in into Cedar permits against s. See the package doc.
//
// Verbs the schema declares are action scopes (`action in [...]`); verbs it
// does not declare (custom verbs only RBAC rules mention) are matched through
// the context, in policies of their own: an unconstrained `action` with
// `when { context.verb == "frobnicate" }`. Resources of the form
// `<resource>/*` and `*/*` match, as in RBAC, only requests whose subresource
// is literally "*" (which land on k8s::Resource).
//
// RBAC's string-level corners convert exactly: a RoleBinding grants in the
// namespace the request names, for cluster-scoped resources too (their
// entities carry the request's namespace when it names one); "" in
// resourceNames matches requests that name no object (`!resource.named`),
// and other names only requests that do; a rule's resource "pods/exec" also
// matches a request whose resource is literally "pods/exec" (every split of
// the entry at a "/" is tried, on k8s::Resource).
//
// What is not converted, with a warning:
//   - bindings whose role does not exist (RBAC grants nothing for them either);
//   - subjects of unknown kinds, and ServiceAccount subjects of a
//     ClusterRoleBinding without a namespace (RBAC never matches them).
//
// Converted, with a warning: verbs and resources the schema does not know
// (custom verbs, CRDs not installed yet, typos such as "pod" or "lst": each
// is matched literally, as RBAC would), and rules that list every verb kcedar
// expands "*" into but not "*": kcedar allows a request for verb "*" by them
// (it decides every verb), RBAC does not.
//
// And silently: non-resource rules reached through RoleBindings (RBAC never
// applies them).
//
// Names from the input (of objects, subjects, resources, ...) are only
// ever quoted strings in the policies, and escaped text in comments and
// warnings. A permit that would need a string that is not valid UTF-8
// (which no Cedar string holds exactly) is skipped with a warning naming
// it; the rest converts as it would without it. The text written is
// parsed again and checked to be exactly the policies built, or Convert
// fails.
func Convert(s *schemagen.Schema, in *Input) (*Result, error) {
	c := &converter{schema: s, idx: newRoleIndex(in), warned: map[string]bool{}, declared: map[string]bool{}}
	for _, v := range s.Verbs {
		c.declared[v] = true
	}
	c.keys = append(c.keys, s.SortedResourceKeys()...)
	for _, w := range in.Warnings {
		c.record(w, false)
	}
	c.out.Commentf("RBAC converted by kcedar rbac convert: %d ClusterRoleBindings, %d RoleBindings,", len(in.ClusterRoleBindings), len(in.RoleBindings))
	c.out.Commentf("%d ClusterRoles, %d Roles. One permit per binding, subject, rule and target type.", len(in.ClusterRoles), len(in.Roles))
	for _, b := range bindingsOf(in) {
		c.binding(b)
	}
	parsed, err := format.VerifyFile("rbac.cedar", &c.out)
	if err != nil {
		return nil, err
	}
	sort.Strings(c.warnings)
	sort.Strings(c.bootstrap)
	return &Result{Policies: c.out.Bytes(), Parsed: parsed, Count: c.out.Len(), Bindings: c.bindings, Warnings: c.warnings, Bootstrap: c.bootstrap}, nil
}

type converter struct {
	schema   *schemagen.Schema
	keys     []schemagen.ResourceKey
	idx      *roleIndex
	declared map[string]bool
	out      cedarlex.File
	bindings int
	warnings []string
	warned   map[string]bool
	// bootstrap are the warnings on bootstrap roles and bindings.
	bootstrap []string
}

// origin is what a warning is about: a binding, or a rule of a role.
type origin struct {
	desc      string // "ClusterRoleBinding/x", "ClusterRole/x rule 3", ...
	bootstrap bool   // one of Kubernetes' bootstrap objects
}

// warn records the warning "<o.desc>: <message>".
func (c *converter) warn(o origin, format string, args ...any) {
	c.record(o.desc+": "+fmt.Sprintf(format, args...), o.bootstrap)
}

// record adds w to the warnings once (and to the bootstrap ones if
// bootstrap), every rune that could end or confuse its line escaped.
func (c *converter) record(w string, bootstrap bool) {
	w = cedarlex.Visible(w)
	if c.warned[w] {
		return
	}
	c.warned[w] = true
	c.warnings = append(c.warnings, w)
	if bootstrap {
		c.bootstrap = append(c.bootstrap, w)
	}
}

type principal struct {
	scope cedarlex.Scope
	cond  cedarlex.Expr // set when the scope alone cannot say it
	desc  string        // Kind/name
}

// userPrincipal is a User subject as RBAC matches it: by username alone.
// Most usernames are one principal type whatever their groups
// (entities.UsernameTypes), so the scope names the principal. A node's
// username is a Node in system:nodes and a User outside it, and RBAC's
// User subject matches both: the scope is then open and a condition names
// the username.
func userPrincipal(name string) principal {
	desc := "User/" + name
	if ts := entities.UsernameTypes(name); len(ts) > 1 {
		return principal{cond: cedarlex.Principal().Attr(schemagen.AttrUsername).Eq(cedarlex.Str(name)), desc: desc}
	}
	return principal{scope: cedarlex.ScopeEq(entities.PrincipalUID(name, nil)), desc: desc}
}

func (c *converter) principals(b binding) []principal {
	var out []principal
	for _, s := range b.subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			out = append(out, userPrincipal(s.Name))
		case rbacv1.GroupKind:
			out = append(out, principal{scope: cedarlex.ScopeIn(types.NewEntityUID(schemagen.GroupType, types.String(s.Name))), desc: "Group/" + s.Name})
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = b.namespace
			}
			if ns == "" {
				c.warn(b.origin(), "ServiceAccount subject %q has no namespace; RBAC never matches it, skipped", s.Name)
				continue
			}
			user := schemagen.ServiceAccountUserPrefix + ns + ":" + s.Name
			out = append(out, principal{scope: cedarlex.ScopeEq(entities.PrincipalUID(user, nil)), desc: "ServiceAccount/" + ns + "/" + s.Name})
		default:
			c.warn(b.origin(), "subject of unknown kind %q (%q) skipped", s.Kind, s.Name)
		}
	}
	return out
}

// target is one policy's action, resource scope and conditions.
type target struct {
	action   cedarlex.Scope
	resource cedarlex.Scope
	name     string // the entity type, or "any"
	conds    []cedarlex.Expr
	idSuffix string // "/<name>" when a rule has several targets, "/custom-verbs" for undeclared verbs
}

func (c *converter) binding(b binding) {
	rules, roleDesc, ok := c.idx.rules(b)
	c.out.Blank()
	c.out.Comment(strings.Repeat("=", 76))
	c.out.Commentf("%s -> %s", b.describe(), roleDesc)
	if !ok {
		c.warn(b.origin(), "%s not found; binding skipped (it grants nothing)", roleDesc)
		c.out.Commentf("skipped: %s not found (RBAC grants nothing for this binding)", roleDesc)
		return
	}
	if b.kind == kindClusterRoleBinding && b.roleRef.Kind != "ClusterRole" {
		c.warn(b.origin(), "refers to %s; skipped", roleDesc)
		return
	}
	c.bindings++
	prins := c.principals(b)
	descs := make([]string, len(prins))
	for i, p := range prins {
		descs[i] = strings.ReplaceAll(p.desc, "/", " ")
	}
	c.out.Commentf("subjects: %s", strings.Join(descs, ", "))
	if len(prins) == 0 {
		c.out.Comment("skipped: no subjects")
		return
	}
	if cr, ok := c.idx.clusterRoles[b.roleRef.Name]; ok && b.roleRef.Kind == "ClusterRole" && cr.AggregationRule != nil {
		c.out.Commentf("%s is aggregated: its rules as stored (filled in by the aggregation controller) are converted", roleDesc)
	}
	if len(rules) == 0 {
		c.out.Comment("no rules")
	}
	for i := range rules {
		c.rule(b, roleDesc, i, &rules[i], prins)
	}
}

// rule writes the permits of rule i of b's role (roleDesc) for each of
// the binding's principals.
func (c *converter) rule(b binding, roleDesc string, i int, rule *rbacv1.PolicyRule, prins []principal) {
	where := origin{desc: fmt.Sprintf("%s rule %d", cedarlex.Visible(roleDesc), i), bootstrap: c.idx.bootstrapRole(b)}
	targets := c.ruleTargets(b, where, rule)
	if len(targets) == 0 {
		c.out.Commentf("rule %d grants nothing here: %s", i, compactRule(*rule))
		return
	}
	base := fmt.Sprintf("rbac/%s/%s/%s/%s/%d", b.kind, b.namespace, b.name, b.roleRef.Name, i)
	for si, p := range prins {
		for _, t := range targets {
			id := base
			if len(prins) > 1 {
				id += "/s" + strconv.Itoa(si)
			}
			id += t.idSuffix
			c.writePolicy(where, id, b, roleDesc, i, p, t)
		}
	}
}

// writePolicy writes one permit, or skips it with a warning on where
// when it cannot be written exactly (a name that is not valid UTF-8, an
// id another binding's permit took).
func (c *converter) writePolicy(where origin, id string, b binding, roleDesc string, rule int, p principal, t target) {
	err := c.out.Add(&cedarlex.Policy{
		Blank: true,
		Annotations: []cedarlex.Annotation{{Key: "id", Value: id}, {Key: "binding", Value: b.describe()}, {Key: "role", Value: roleDesc},
			{Key: "rule", Value: strconv.Itoa(rule)}, {Key: "subject", Value: p.desc}},
		Principal: p.scope,
		Action:    t.action,
		Resource:  t.resource,
		When:      p.withCondition(t.conds),
	})
	if err != nil {
		c.warn(where, "the permits of binding %s for %s are skipped: %v", cedarlex.Visible(b.describe()), cedarlex.Visible(p.desc), err)
	}
}

// withCondition is conds after the principal's condition, if it has one.
func (p principal) withCondition(conds []cedarlex.Expr) []cedarlex.Expr {
	if p.cond.Text() == "" {
		return conds // none (the zero Expr)
	}
	return append([]cedarlex.Expr{p.cond}, conds...)
}

// pattern is one entry of a rule's resources.
type pattern struct {
	anyResource bool // "*/sub"
	resource    string
	sub         string
}

// ruleTargets converts rule of b (where names it in warnings).
func (c *converter) ruleTargets(b binding, where origin, rule *rbacv1.PolicyRule) []target {
	var declared, custom verbSel
	declared.all = slices.Contains(rule.Verbs, rbacv1.VerbAll)
	if !declared.all {
		for _, v := range rule.Verbs {
			switch {
			case slices.Contains(declared.verbs, v) || slices.Contains(custom.custom, v):
			case c.declared[v]:
				declared.verbs = append(declared.verbs, v)
			default:
				custom.custom = append(custom.custom, v)
			}
		}
	}
	if !declared.all {
		// kcedar decides a request for verb "*" as every verb the schema
		// declares (the non-resource verbs for non-resource requests); RBAC
		// only with a "*" rule.
		covers := func(all []string) bool {
			for _, v := range all {
				if !slices.Contains(declared.verbs, v) {
					return false
				}
			}
			return true
		}
		if len(rule.Resources) > 0 && len(rule.APIGroups) > 0 && covers(c.schema.Verbs) ||
			len(rule.NonResourceURLs) > 0 && b.kind == kindClusterRoleBinding && covers(schemagen.NonResourceActions()) {
			c.warn(where, "lists every verb kcedar expands \"*\" into but not \"*\": kcedar allows a SubjectAccessReview for verb \"*\" that RBAC denies")
		}
	}
	var out []target
	for _, vs := range []verbSel{declared, custom} {
		if vs.empty() {
			continue
		}
		var ts []target
		if len(rule.Resources) > 0 && len(rule.APIGroups) > 0 {
			ts = append(ts, c.resourceTargets(b, where, rule, vs)...)
		}
		if len(rule.NonResourceURLs) > 0 && b.kind == kindClusterRoleBinding {
			ts = append(ts, c.nonResourceTarget(rule, vs))
		}
		// Ids: the declared verbs' policies are named as if the undeclared
		// ones did not exist, so their ids do not change with them.
		for i := range ts {
			if len(ts) > 1 {
				ts[i].idSuffix = "/" + ts[i].name
			}
			if len(vs.custom) > 0 {
				ts[i].idSuffix += "/custom-verbs"
			}
		}
		out = append(out, ts...)
	}
	return out
}

// verbSel is the verbs of a rule one policy covers: every verb, verbs the
// schema declares (an action scope), or verbs it does not declare (a
// condition on context.verb).
type verbSel struct {
	all    bool
	verbs  []string // declared verbs
	custom []string // undeclared verbs
}

func (v verbSel) empty() bool { return !v.all && len(v.verbs) == 0 && len(v.custom) == 0 }

// actionScope returns the action scope for vs on a target whose applicable
// verbs are applies (nil: all declared verbs apply), and the conditions: on
// the context's verb for undeclared verbs, on the action when no listed verb
// applies to the target and every principal type by the schema (the schema's
// actions apply to the verbs discovery lists; RBAC grants any verb).
func actionScope(vs verbSel, applies func(string) bool) (cedarlex.Scope, []cedarlex.Expr) {
	switch {
	case vs.all:
		return cedarlex.Scope{}, nil
	case len(vs.custom) > 0:
		return cedarlex.Scope{}, []cedarlex.Expr{cedarlex.OneOf(cedarlex.Context().Attr(schemagen.AttrVerb), vs.custom)}
	}
	verbs := vs.verbs
	uids := make([]types.EntityUID, len(verbs))
	for i, v := range verbs {
		uids[i] = schemagen.ActionUID(v)
	}
	for _, v := range verbs {
		// An action that applies to some principal types only (the
		// associated-node verbs: ServiceAccounts) is not a scope for any
		// subject: RBAC grants it to every subject.
		if (applies == nil || applies(v)) && schemagen.AppliesToEveryPrincipal(v) {
			if len(verbs) == 1 {
				return cedarlex.ScopeEq(uids[0]), nil
			}
			return cedarlex.ScopeInSet(uids), nil
		}
	}
	return cedarlex.Scope{}, []cedarlex.Expr{actionIn(uids)}
}

// actionIn is the condition `action == A` or `action in [A, B]`.
func actionIn(uids []types.EntityUID) cedarlex.Expr {
	if len(uids) == 1 {
		return cedarlex.ActionVar().Eq(cedarlex.Entity(uids[0]))
	}
	elems := make([]cedarlex.Expr, len(uids))
	for i, uid := range uids {
		elems[i] = cedarlex.Entity(uid)
	}
	return cedarlex.ActionVar().In(cedarlex.Set(elems...))
}

// attr is resource.<name>.
func attr(name string) cedarlex.Expr { return cedarlex.Resource().Attr(name) }

// has is `resource has <name>`.
func has(name string) cedarlex.Expr { return cedarlex.Resource().Has(name) }

func (c *converter) nonResourceTarget(rule *rbacv1.PolicyRule, vs verbSel) target {
	t := newTarget(vs, schemagen.IsNonResourceAction, string(schemagen.NonResourceURLType))
	var exact []string
	var alts []cedarlex.Expr
	for _, u := range rule.NonResourceURLs {
		switch {
		case u == rbacv1.NonResourceAll:
			return t
		case strings.HasSuffix(u, "*"):
			alts = append(alts, attr(schemagen.AttrPath).LikePrefix(strings.TrimRight(u, "*")))
		default:
			exact = append(exact, u)
		}
	}
	if len(exact) > 0 {
		alts = append([]cedarlex.Expr{cedarlex.OneOf(attr(schemagen.AttrPath), exact)}, alts...)
	}
	t.conds = append(t.conds, cedarlex.Or(alts...))
	return t
}

// newTarget is the target of the entity type name for the verbs vs, with the action scope and condition of actionScope (see
// there for applies) and the resource scope `resource is <name>`.
func newTarget(vs verbSel, applies func(string) bool, name string) target {
	act, actConds := actionScope(vs, applies)
	return target{action: act, resource: cedarlex.ScopeIs(types.EntityType(name)), name: name, conds: actConds}
}

// resourceTargets converts the resource part of a rule of b: one target per
// typed resource it matches, plus one on k8s::Resource for what no typed
// resource covers, or a single target for any resource when the rule lists
// "*".
func (c *converter) resourceTargets(b binding, where origin, rule *rbacv1.PolicyRule, vs verbSel) []target {
	rr := newResourceRule(b, rule)
	c.warnUnknown(where, rule, rr.groups, rr.groupsAll, rr.pats)
	if rr.all {
		return []target{rr.anyResourceTarget(vs)}
	}
	if len(rr.pats) == 0 {
		return nil
	}
	var out []target
	for _, k := range c.keys {
		if t, ok := rr.typedTarget(c.schema.Resources[k], vs); ok {
			out = append(out, t)
		}
	}
	if !c.needsGenericResource(rr) {
		return out
	}
	return append(out, rr.genericResourceTarget(vs))
}

// resourceRule is a resource rule of one binding, taken apart for
// conversion.
type resourceRule struct {
	b    binding
	rule *rbacv1.PolicyRule
	// groups are the rule's apiGroups without duplicates; groupsAll is
	// whether they include "*".
	groups    []string
	groupsAll bool
	// pats are the rule's resources other than "*"; literal the same
	// entries as RBAC compares them (strings, without duplicates); all is
	// whether the resources include "*".
	pats    []pattern
	literal []string
	all     bool
	// names are the rule's resourceNames other than "", without duplicates;
	// emptyName is whether they include "".
	names     []string
	emptyName bool
}

// newResourceRule takes rule of b apart.
func newResourceRule(b binding, rule *rbacv1.PolicyRule) *resourceRule {
	rr := &resourceRule{b: b, rule: rule, groupsAll: slices.Contains(rule.APIGroups, rbacv1.APIGroupAll)}
	for _, g := range rule.APIGroups {
		if !slices.Contains(rr.groups, g) {
			rr.groups = append(rr.groups, g)
		}
	}
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll {
			rr.all = true
			continue
		}
		if !slices.Contains(rr.literal, r) {
			rr.literal = append(rr.literal, r)
		}
		rr.pats = append(rr.pats, parsePattern(r))
	}
	for _, n := range rule.ResourceNames {
		switch {
		case n == "":
			rr.emptyName = true
		case !slices.Contains(rr.names, n):
			rr.names = append(rr.names, n)
		}
	}
	return rr
}

// parsePattern reads one entry of a rule's resources (not "*").
func parsePattern(r string) pattern {
	res, sub, _ := strings.Cut(r, "/")
	switch {
	case sub == "":
		// "pods", or "pods/": RBAC compares the whole string.
		return pattern{resource: r}
	case res == "*":
		// "*/scale"; also "*/*": any resource whose requested subresource
		// is literally "*".
		return pattern{anyResource: true, sub: sub}
	default:
		return pattern{resource: res, sub: sub}
	}
}

// nameCond is the condition of the rule's resourceNames (false without
// them): RBAC matches a request whose name is one of them; "" matches a
// request that names no object (resource.named is false). optional: the
// entity may lack a name attribute.
func (rr *resourceRule) nameCond(optional bool) (cedarlex.Expr, bool) {
	if len(rr.rule.ResourceNames) == 0 {
		return cedarlex.Expr{}, false
	}
	var alts []cedarlex.Expr
	if rr.emptyName {
		alts = append(alts, cedarlex.Not(attr(schemagen.AttrNamed)))
	}
	if len(rr.names) > 0 {
		c := cedarlex.OneOf(attr(schemagen.AttrName), rr.names)
		if optional {
			c = cedarlex.And(has(schemagen.AttrName), c)
		}
		if !rr.emptyName {
			// RBAC matches no request without a name with them (a
			// create, a list with a field selector on the name).
			c = cedarlex.And(attr(schemagen.AttrNamed), c)
		}
		alts = append(alts, c)
	}
	return cedarlex.Or(alts...), true
}

// nsCond is the condition of a RoleBinding's namespace. A RoleBinding grants
// in its namespace: the namespace the request names, for namespaced and
// cluster-scoped resources alike (RBAC looks up the RoleBindings of the
// request's namespace). Cluster-scoped entities and k8s::Resource have it
// (optional) when the request names one.
func (rr *resourceRule) nsCond(optional bool) cedarlex.Expr {
	c := attr(schemagen.AttrNamespace).Eq(cedarlex.Str(rr.b.namespace))
	if optional {
		return cedarlex.And(has(schemagen.AttrNamespace), c)
	}
	return c
}

// anyResourceTarget is the target of a rule whose resources include "*":
// any resource of its groups.
func (rr *resourceRule) anyResourceTarget(vs verbSel) target {
	t := newTarget(vs, nil, "any")
	t.resource = cedarlex.Scope{} // every entity type
	if rr.groupsAll {
		t.conds = append(t.conds, cedarlex.Not(cedarlex.Resource().Is(schemagen.NonResourceURLType)))
	} else {
		t.conds = append(t.conds, has(schemagen.AttrAPIGroup), cedarlex.OneOf(attr(schemagen.AttrAPIGroup), rr.groups))
	}
	if rr.b.kind == kindRoleBinding {
		t.conds = append(t.conds, rr.nsCond(true))
	}
	if nc, ok := rr.nameCond(true); ok {
		t.conds = append(t.conds, has(schemagen.AttrNamed), nc)
	}
	return t
}

// typedTarget is the target of the typed resource r, and whether the rule
// matches r at all.
func (rr *resourceRule) typedTarget(r *schemagen.Resource, vs verbSel) (target, bool) {
	k := r.Key
	if !rr.groupsAll && !slices.Contains(rr.rule.APIGroups, k.Group) {
		return target{}, false
	}
	matched, subConds := rr.matchTyped(r)
	if !matched {
		return target{}, false
	}
	t := newTarget(vs, func(v string) bool { return slices.Contains(r.Verbs, v) }, string(r.EntityType))
	if rr.b.kind == kindRoleBinding {
		t.conds = append(t.conds, rr.nsCond(!r.Namespaced))
	}
	if len(subConds) > 0 {
		t.conds = append(t.conds, cedarlex.OneOf(attr(schemagen.AttrSubresource), subConds))
	}
	if nc, ok := rr.nameCond(false); ok {
		t.conds = append(t.conds, nc)
	}
	return t, true
}

// matchTyped reports whether a pattern of the rule matches the typed
// resource r and, when r has AnySubresource, the subresources they allow.
func (rr *resourceRule) matchTyped(r *schemagen.Resource) (matched bool, subs []string) {
	k := r.Key
	for _, p := range rr.pats {
		switch {
		case p.sub == rbacv1.ResourceAll:
			// A request for the subresource "*" is never typed.
		case r.AnySubresource:
			if p.resource == k.Resource || p.anyResource {
				if !slices.Contains(subs, p.sub) {
					subs = append(subs, p.sub)
				}
				matched = true
			}
		case p.anyResource:
			matched = matched || k.Subresource != "" && k.Subresource == p.sub
		default:
			matched = matched || p.resource == k.Resource && p.sub == k.Subresource
		}
	}
	return matched, subs
}

// needsGenericResource reports whether the rule needs a target on
// k8s::Resource: for wildcard requests, resources the schema does not know,
// and a "/" inside a request's resource (RBAC compares resource + "/" +
// subresource with the rule's entry as strings).
func (c *converter) needsGenericResource(rr *resourceRule) bool {
	needed := rr.groupsAll
	for _, p := range rr.pats {
		if p.anyResource || p.sub != "" {
			needed = true
		}
		for _, g := range rr.groups {
			if _, ok := c.schema.Lookup(g, p.resource, p.sub); !ok {
				needed = true
			}
		}
	}
	return needed
}

// genericResourceTarget is the rule's target on k8s::Resource, matching the
// rule's resources as RBAC compares strings.
func (rr *resourceRule) genericResourceTarget(vs verbSel) target {
	t := newTarget(vs, nil, string(schemagen.ResourceType))
	if !rr.groupsAll {
		t.conds = append(t.conds, cedarlex.OneOf(attr(schemagen.AttrAPIGroup), rr.groups))
	}
	t.conds = append(t.conds, cedarlex.Or(resourceAlts(rr.literal)...))
	if rr.b.kind == kindRoleBinding {
		t.conds = append(t.conds, rr.nsCond(true))
	}
	if nc, ok := rr.nameCond(true); ok {
		t.conds = append(t.conds, nc)
	}
	return t
}

// resourceAlts returns conditions on a k8s::Resource entity that hold exactly
// when RBAC's combined string (the resource, plus "/" and the subresource when
// there is one) equals one of entries: every way of splitting an entry at a
// "/" into a resource and a non-empty subresource, the whole entry as a
// resource without subresource, and for "*/<sub>" any resource with that
// subresource.
func resourceAlts(entries []string) []cedarlex.Expr {
	var plain, anySub []string
	var prefixes []string
	subsOf := map[string][]string{}
	for _, e := range entries {
		if !slices.Contains(plain, e) {
			plain = append(plain, e)
		}
		for i := 0; i < len(e)-1; i++ {
			if e[i] != '/' {
				continue
			}
			prefix, suffix := e[:i], e[i+1:]
			if i == 1 && prefix == rbacv1.ResourceAll {
				if !slices.Contains(anySub, suffix) {
					anySub = append(anySub, suffix)
				}
				continue
			}
			if _, ok := subsOf[prefix]; !ok {
				prefixes = append(prefixes, prefix)
			}
			if !slices.Contains(subsOf[prefix], suffix) {
				subsOf[prefix] = append(subsOf[prefix], suffix)
			}
		}
	}
	var alts []cedarlex.Expr
	if len(plain) > 0 {
		alts = append(alts, cedarlex.And(cedarlex.Not(has(schemagen.AttrSubresource)), cedarlex.OneOf(attr(schemagen.AttrResource), plain)))
	}
	if len(anySub) > 0 {
		alts = append(alts, cedarlex.And(has(schemagen.AttrSubresource), cedarlex.OneOf(attr(schemagen.AttrSubresource), anySub)))
	}
	for _, p := range prefixes {
		var subs []string
		for _, s := range subsOf[p] {
			if !slices.Contains(anySub, s) { // covered by "*/<s>"
				subs = append(subs, s)
			}
		}
		if len(subs) > 0 {
			alts = append(alts, cedarlex.And(attr(schemagen.AttrResource).Eq(cedarlex.Str(p)), has(schemagen.AttrSubresource),
				cedarlex.OneOf(attr(schemagen.AttrSubresource), subs)))
		}
	}
	return alts
}

// compactRule describes a rule for comments: each list Go-quoted.
func compactRule(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(k string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s=%q", k, v))
		}
	}
	add("apiGroups", r.APIGroups)
	add("resources", r.Resources)
	add("resourceNames", r.ResourceNames)
	add("nonResourceURLs", r.NonResourceURLs)
	add("verbs", r.Verbs)
	return strings.Join(parts, " ")
}

// warnUnknown warns about a rule's verbs and resources the schema does not
// know: they are converted literally (verbs through context.verb, resources
// onto k8s::Resource) and match what RBAC would match, but a typo such as
// "pod" or "lst" grants nothing in RBAC either, and is worth a look.
func (c *converter) warnUnknown(where origin, rule *rbacv1.PolicyRule, groups []string, groupsAll bool, pats []pattern) {
	for _, v := range rule.Verbs {
		if v == rbacv1.VerbAll || c.declared[v] {
			continue
		}
		hint := ""
		if m := closest(v, c.schema.Verbs); m != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", m)
		}
		c.warn(where, "verb %q is not a verb the schema declares%s; converted as context.verb == %q", v, hint, v)
	}
	if groupsAll {
		groups = nil
		for _, k := range c.keys {
			if !slices.Contains(groups, k.Group) {
				groups = append(groups, k.Group)
			}
		}
	}
	for _, p := range pats {
		if p.anyResource {
			continue
		}
		sub := p.sub
		if sub == rbacv1.ResourceAll {
			sub = ""
		}
		found := false
		var near []string
		for _, g := range groups {
			if _, ok := c.schema.Lookup(g, p.resource, sub); ok {
				found = true
				break
			}
		}
		if found {
			continue
		}
		for _, k := range c.keys {
			if !slices.Contains(groups, k.Group) {
				continue
			}
			if sub == "" && k.Subresource == "" {
				near = append(near, k.Resource)
			} else if sub != "" && k.Resource == p.resource && k.Subresource != "" {
				near = append(near, k.Resource+"/"+k.Subresource)
			} else if sub != "" && k.Subresource == sub {
				near = append(near, k.Resource+"/"+k.Subresource)
			}
		}
		name := p.resource
		if p.sub != "" {
			name += "/" + p.sub
		}
		hint := ""
		if m := closest(name, near); m != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", m)
		}
		gs := "any group"
		if !groupsAll {
			q := make([]string, len(groups))
			for i, g := range groups {
				q[i] = strconv.Quote(g)
			}
			gs = "group " + strings.Join(q, ", ")
		}
		c.warn(where, "resource %q is not in the schema for %s%s; converted onto %s (it matches only requests for that literal resource)", name, gs, hint, schemagen.ResourceType)
	}
}

// maxHintBytes bounds the words closest looks up: no verb or resource is
// longer, and the edit distance of a longer word costs its length times
// every candidate's.
const maxHintBytes = 253

// closest is schemagen.Closest for words of at most maxHintBytes, "" for
// longer ones.
func closest(word string, candidates []string) string {
	if len(word) > maxHintBytes {
		return ""
	}
	return schemagen.Closest(word, candidates)
}
