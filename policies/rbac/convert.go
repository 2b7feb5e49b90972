package rbac

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/schemagen"
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
}

func (b binding) describe() string {
	if b.kind == kindRoleBinding {
		return b.kind + "/" + b.namespace + "/" + b.name
	}
	return b.kind + "/" + b.name
}

// bindingsOf lists the bindings of in: ClusterRoleBindings by name, then
// RoleBindings by namespace and name.
func bindingsOf(in *Input) []binding {
	var out []binding
	for _, b := range in.ClusterRoleBindings {
		out = append(out, binding{kind: kindClusterRoleBinding, name: b.Name, roleRef: b.RoleRef, subjects: b.Subjects})
	}
	for _, b := range in.RoleBindings {
		out = append(out, binding{kind: kindRoleBinding, namespace: b.Namespace, name: b.Name, roleRef: b.RoleRef, subjects: b.Subjects})
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

// Result is a conversion's output.
type Result struct {
	// Policies is the Cedar text: deterministic for the same input and schema.
	Policies []byte
	// Count is the number of policies.
	Count int
	// Bindings is the number of bindings converted (missing roles excluded).
	Bindings int
	// Warnings lists what was skipped or cannot be expressed, sorted.
	Warnings []string
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
// What is not converted, with a warning:
//   - bindings whose role does not exist (RBAC grants nothing for them either);
//   - subjects of unknown kinds, and ServiceAccount subjects of a
//     ClusterRoleBinding without a namespace (RBAC never matches them);
//   - "" in resourceNames: RBAC matches a request without a name with it,
//     kcedar reads a missing name as "every name" (an open value), which no
//     condition can tell apart from a given one;
//   - and, converted, rules that list every verb kcedar expands "*" into but
//     not "*": kcedar allows a request for verb "*" by them (it decides every
//     verb), RBAC does not.
//
// And silently, since no real request can match them: RoleBinding grants on
// cluster-scoped typed resources other than namespaces (RBAC would allow a
// SubjectAccessReview that names a namespace for them; kcedar's entities of
// cluster-scoped resources have no namespace), and non-resource rules reached
// through RoleBindings. A RoleBinding grant on namespaces becomes a condition on
// the namespace's name, as kube-apiserver sets a namespace request's namespace
// to its name.
func Convert(s *schemagen.Schema, in *Input) (*Result, error) {
	c := &converter{schema: s, idx: newRoleIndex(in), warned: map[string]bool{}, declared: map[string]bool{}}
	for _, v := range s.Verbs {
		c.declared[v] = true
	}
	for _, k := range s.SortedResourceKeys() {
		c.keys = append(c.keys, k)
	}
	for _, w := range in.Warnings {
		c.warn("%s", w)
	}
	fmt.Fprintf(&c.out, "// RBAC converted by kcedar rbac convert: %d ClusterRoleBindings, %d RoleBindings,\n// %d ClusterRoles, %d Roles. One permit per binding, subject, rule and target type.\n",
		len(in.ClusterRoleBindings), len(in.RoleBindings), len(in.ClusterRoles), len(in.Roles))
	for _, b := range bindingsOf(in) {
		c.binding(b)
	}
	sort.Strings(c.warnings)
	return &Result{Policies: c.out.Bytes(), Count: c.count, Bindings: c.bindings, Warnings: c.warnings}, nil
}

type converter struct {
	schema   *schemagen.Schema
	keys     []schemagen.ResourceKey
	idx      *roleIndex
	declared map[string]bool
	out      bytes.Buffer
	count    int
	bindings int
	warnings []string
	warned   map[string]bool
}

func (c *converter) warn(format string, args ...any) {
	w := fmt.Sprintf(format, args...)
	if !c.warned[w] {
		c.warned[w] = true
		c.warnings = append(c.warnings, w)
	}
}

type principal struct {
	scope string // principal scope
	desc  string // Kind/name
}

func (c *converter) principals(b binding) []principal {
	var out []principal
	for _, s := range b.subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			out = append(out, principal{scope: "principal == " + entityUID(cedar.PrincipalUID(s.Name)), desc: "User/" + s.Name})
		case rbacv1.GroupKind:
			out = append(out, principal{scope: "principal in " + entityUID(types.NewEntityUID(schemagen.GroupType, types.String(s.Name))), desc: "Group/" + s.Name})
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = b.namespace
			}
			if ns == "" {
				c.warn("%s: ServiceAccount subject %q has no namespace; RBAC never matches it, skipped", b.describe(), s.Name)
				continue
			}
			user := schemagen.ServiceAccountUserPrefix + ns + ":" + s.Name
			out = append(out, principal{scope: "principal == " + entityUID(cedar.PrincipalUID(user)), desc: "ServiceAccount/" + ns + "/" + s.Name})
		default:
			c.warn("%s: subject of unknown kind %q (%q) skipped", b.describe(), s.Kind, s.Name)
		}
	}
	return out
}

// target is one policy's action, resource scope and conditions.
type target struct {
	action   string // action scope
	resource string // resource scope
	name     string // the entity type, or "any"
	conds    []string
	idSuffix string // "/<name>" when a rule has several targets, "/custom-verbs" for undeclared verbs
}

func (c *converter) binding(b binding) {
	rules, roleDesc, ok := c.idx.rules(b)
	fmt.Fprintf(&c.out, "\n// ============================================================================\n")
	fmt.Fprintf(&c.out, "// %s -> %s\n", b.describe(), roleDesc)
	if !ok {
		c.warn("%s: %s not found; binding skipped (it grants nothing)", b.describe(), roleDesc)
		fmt.Fprintf(&c.out, "// skipped: %s not found (RBAC grants nothing for this binding)\n", roleDesc)
		return
	}
	if b.kind == kindClusterRoleBinding && b.roleRef.Kind != "ClusterRole" {
		c.warn("%s: refers to %s; skipped", b.describe(), roleDesc)
		return
	}
	c.bindings++
	prins := c.principals(b)
	descs := make([]string, len(prins))
	for i, p := range prins {
		descs[i] = strings.ReplaceAll(p.desc, "/", " ")
	}
	fmt.Fprintf(&c.out, "// subjects: %s\n", strings.Join(descs, ", "))
	if len(prins) == 0 {
		fmt.Fprintf(&c.out, "// skipped: no subjects\n")
		return
	}
	if cr, ok := c.idx.clusterRoles[b.roleRef.Name]; ok && b.roleRef.Kind == "ClusterRole" && cr.AggregationRule != nil {
		fmt.Fprintf(&c.out, "// %s is aggregated: its rules as stored (filled in by the aggregation controller) are converted\n", roleDesc)
	}
	if len(rules) == 0 {
		fmt.Fprintf(&c.out, "// no rules\n")
	}
	for i := range rules {
		targets := c.ruleTargets(b, roleDesc, i, &rules[i])
		if len(targets) == 0 {
			fmt.Fprintf(&c.out, "// rule %d grants nothing here: %s\n", i, compactRule(rules[i]))
			continue
		}
		base := fmt.Sprintf("rbac/%s/%s/%s/%s/%d", b.kind, b.namespace, b.name, b.roleRef.Name, i)
		for si, p := range prins {
			for _, t := range targets {
				id := base
				if len(prins) > 1 {
					id += "/s" + strconv.Itoa(si)
				}
				id += t.idSuffix
				c.writePolicy(id, b, roleDesc, i, p, t)
			}
		}
	}
}

func (c *converter) writePolicy(id string, b binding, roleDesc string, rule int, p principal, t target) {
	c.count++
	w := &c.out
	fmt.Fprintf(w, "\n@id(%s)\n", quote(id))
	fmt.Fprintf(w, "@binding(%s)\n", quote(b.describe()))
	fmt.Fprintf(w, "@role(%s)\n", quote(roleDesc))
	fmt.Fprintf(w, "@rule(%s)\n", quote(strconv.Itoa(rule)))
	fmt.Fprintf(w, "@subject(%s)\n", quote(p.desc))
	fmt.Fprintf(w, "permit (\n  %s,\n  %s,\n  %s\n)", p.scope, t.action, t.resource)
	if len(t.conds) > 0 {
		fmt.Fprintf(w, "\nwhen {\n  %s\n}", strings.Join(t.conds, " &&\n  "))
	}
	w.WriteString(";\n")
}

// pattern is one entry of a rule's resources.
type pattern struct {
	anyResource bool // "*/sub"
	resource    string
	sub         string
}

func (c *converter) ruleTargets(b binding, roleDesc string, ruleIdx int, rule *rbacv1.PolicyRule) []target {
	where := fmt.Sprintf("%s rule %d", roleDesc, ruleIdx)
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
			len(rule.NonResourceURLs) > 0 && b.kind == kindClusterRoleBinding && covers(schemagen.NonResourceVerbs) {
			c.warn("%s: lists every verb kcedar expands \"*\" into but not \"*\": kcedar allows a SubjectAccessReview for verb \"*\" that RBAC denies", where)
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
// verbs are applies (nil: all declared verbs apply), and a condition: on the
// context's verb for undeclared verbs, on the action when no listed verb
// applies to the target by the schema (the schema's actions apply to the verbs
// discovery lists; RBAC grants any verb).
func actionScope(vs verbSel, applies func(string) bool) (string, string) {
	switch {
	case vs.all:
		return "action", ""
	case len(vs.custom) > 0:
		return "action", inList("context."+schemagen.AttrVerb, vs.custom)
	}
	verbs := vs.verbs
	list := actionList(verbs)
	for _, v := range verbs {
		if applies == nil || applies(v) {
			if len(verbs) == 1 {
				return "action == " + list[0], ""
			}
			return "action in [" + strings.Join(list, ", ") + "]", ""
		}
	}
	if len(verbs) == 1 {
		return "action", "action == " + list[0]
	}
	return "action", "action in [" + strings.Join(list, ", ") + "]"
}

func actionList(verbs []string) []string {
	out := make([]string, len(verbs))
	for i, v := range verbs {
		out[i] = entityUID(schemagen.ActionUID(v))
	}
	return out
}

func (c *converter) nonResourceTarget(rule *rbacv1.PolicyRule, vs verbSel) target {
	nonRes := map[string]bool{}
	for _, v := range schemagen.NonResourceVerbs {
		nonRes[v] = true
	}
	act, actCond := actionScope(vs, func(v string) bool { return nonRes[v] })
	t := target{action: act, resource: "resource is " + string(schemagen.NonResourceURLType), name: string(schemagen.NonResourceURLType)}
	if actCond != "" {
		t.conds = append(t.conds, actCond)
	}
	var exact []string
	var alts []string
	for _, u := range rule.NonResourceURLs {
		switch {
		case u == rbacv1.NonResourceAll:
			return t
		case strings.HasSuffix(u, "*"):
			alts = append(alts, "resource.path like "+likePattern(strings.TrimRight(u, "*")))
		default:
			exact = append(exact, u)
		}
	}
	if len(exact) > 0 {
		alts = append([]string{inList("resource.path", exact)}, alts...)
	}
	t.conds = append(t.conds, or(alts))
	return t
}

func (c *converter) resourceTargets(b binding, where string, rule *rbacv1.PolicyRule, vs verbSel) []target {
	groupsAll := slices.Contains(rule.APIGroups, rbacv1.APIGroupAll)
	groupMatch := func(g string) bool { return groupsAll || slices.Contains(rule.APIGroups, g) }
	var pats []pattern
	all := false
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll {
			all = true
			continue
		}
		res, sub, _ := strings.Cut(r, "/")
		switch {
		case sub == "":
			// "pods", or "pods/": RBAC compares the whole string.
			pats = append(pats, pattern{resource: r})
		case res == "*":
			// "*/scale"; also "*/*": any resource whose requested subresource
			// is literally "*".
			pats = append(pats, pattern{anyResource: true, sub: sub})
		default:
			pats = append(pats, pattern{resource: res, sub: sub})
		}
	}
	var names []string
	for _, n := range rule.ResourceNames {
		if n == "" {
			c.warn("%s: resourceNames contains \"\" (RBAC matches requests without a name with it); ignored", where)
			continue
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(rule.ResourceNames) > 0 && len(names) == 0 {
		return nil
	}
	var groups []string
	for _, g := range rule.APIGroups {
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	nsCond := func() string {
		return "resource.namespace == " + quote(b.namespace)
	}

	if all {
		act, actCond := actionScope(vs, nil)
		t := target{action: act, resource: "resource", name: "any"}
		if actCond != "" {
			t.conds = append(t.conds, actCond)
		}
		if groupsAll {
			t.conds = append(t.conds, "!(resource is "+string(schemagen.NonResourceURLType)+")")
		} else {
			t.conds = append(t.conds, "resource has apiGroup", inList("resource.apiGroup", groups))
		}
		if b.kind == kindRoleBinding {
			alts := []string{"resource has namespace && " + nsCond()}
			for _, k := range c.keys {
				if k.Group == "" && k.Resource == "namespaces" && !c.schema.Resources[k].Namespaced && groupMatch("") {
					alts = append(alts, "resource is "+string(c.schema.Resources[k].EntityType)+" && resource.name == "+quote(b.namespace))
				}
			}
			t.conds = append(t.conds, or(alts))
		}
		if len(names) > 0 {
			t.conds = append(t.conds, "resource has name", inList("resource.name", names))
		}
		return []target{t}
	}
	if len(pats) == 0 {
		return nil
	}

	var out []target
	// Typed resources the rule matches.
	for _, k := range c.keys {
		r := c.schema.Resources[k]
		if !groupMatch(k.Group) {
			continue
		}
		var subConds []string // AnySubresource: allowed values of the subresource attribute
		matched := false
		for _, p := range pats {
			switch {
			case p.sub == rbacv1.ResourceAll:
				// A request for the subresource "*" is never typed.
			case r.AnySubresource:
				if p.resource == k.Resource || p.anyResource {
					if !slices.Contains(subConds, p.sub) {
						subConds = append(subConds, p.sub)
					}
					matched = true
				}
			case p.anyResource:
				matched = matched || k.Subresource != "" && k.Subresource == p.sub
			default:
				matched = matched || p.resource == k.Resource && p.sub == k.Subresource
			}
		}
		if !matched {
			continue
		}
		act, actCond := actionScope(vs, func(v string) bool { return slices.Contains(r.Verbs, v) })
		t := target{action: act, resource: "resource is " + string(r.EntityType), name: string(r.EntityType)}
		if actCond != "" {
			t.conds = append(t.conds, actCond)
		}
		if b.kind == kindRoleBinding {
			switch {
			case r.Namespaced:
				t.conds = append(t.conds, nsCond())
			case k.Group == "" && k.Resource == "namespaces":
				t.conds = append(t.conds, "resource.name == "+quote(b.namespace))
			default:
				continue // no real request names a namespace for a cluster-scoped resource
			}
		}
		if len(subConds) > 0 {
			t.conds = append(t.conds, inList("resource.subresource", subConds))
		}
		if len(names) > 0 {
			t.conds = append(t.conds, inList("resource.name", names))
		}
		out = append(out, t)
	}

	// k8s::Resource: wildcard requests and resources the schema does not know.
	needed := groupsAll
	for _, p := range pats {
		if p.anyResource || p.sub == rbacv1.ResourceAll {
			needed = true
		}
		for _, g := range groups {
			if _, ok := c.schema.Lookup(g, p.resource, p.sub); !ok {
				needed = true
			}
		}
	}
	if !needed {
		return out
	}
	t := target{resource: "resource is " + string(schemagen.ResourceType), name: string(schemagen.ResourceType)}
	act, actCond := actionScope(vs, nil)
	t.action = act
	if actCond != "" {
		t.conds = append(t.conds, actCond)
	}
	if !groupsAll {
		t.conds = append(t.conds, inList("resource.apiGroup", groups))
	}
	var plain []string
	var alts []string
	anySub := map[string]bool{} // subresources a "*/<sub>" pattern matches on every resource
	for _, p := range pats {
		if p.anyResource {
			anySub[p.sub] = true
		}
	}
	for _, p := range pats {
		switch {
		case !p.anyResource && p.sub != "" && anySub[p.sub]:
			// "pods/*" next to "*/*": covered.
		case p.anyResource:
			alts = append(alts, "resource has subresource && resource.subresource == "+quote(p.sub))
		case p.sub == "":
			if !slices.Contains(plain, p.resource) {
				plain = append(plain, p.resource)
			}
		default:
			alts = append(alts, "resource.resource == "+quote(p.resource)+" && resource has subresource && resource.subresource == "+quote(p.sub))
		}
	}
	if len(plain) > 0 {
		alts = append([]string{"!(resource has subresource) && " + inList("resource.resource", plain)}, alts...)
	}
	t.conds = append(t.conds, or(alts))
	if b.kind == kindRoleBinding {
		t.conds = append(t.conds, "resource has namespace", nsCond())
	}
	if len(names) > 0 {
		t.conds = append(t.conds, "resource has name", inList("resource.name", names))
	}
	return append(out, t)
}

// or joins alternatives, parenthesized when there are several (one per line
// when they are long).
func or(alts []string) string {
	if len(alts) == 1 {
		return alts[0]
	}
	parts := make([]string, len(alts))
	for i, a := range alts {
		if strings.Contains(a, "&&") {
			a = "(" + a + ")"
		}
		parts[i] = a
	}
	line := "(" + strings.Join(parts, " || ") + ")"
	if len(line) <= 100 {
		return line
	}
	return "(\n    " + strings.Join(parts, " ||\n    ") + "\n  )"
}

// inList is `x == "a"` or `["a", "b"].contains(x)`.
func inList(x string, vals []string) string {
	if len(vals) == 1 {
		return x + " == " + quote(vals[0])
	}
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = quote(v)
	}
	return "[" + strings.Join(q, ", ") + "].contains(" + x + ")"
}

func entityUID(uid types.EntityUID) string {
	return string(uid.Type) + "::" + quote(string(uid.ID))
}

// quote is a Cedar string literal.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u{%x}`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// likePattern is a Cedar like pattern matching every string that starts
// with prefix: the prefix's own `*` are escaped.
func likePattern(prefix string) string {
	q := quote(prefix)
	q = strings.ReplaceAll(q[:len(q)-1], "*", `\*`)
	return q + `*"`
}

// compactRule describes a rule for comments.
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
	return strings.ReplaceAll(strings.Join(parts, " "), "\n", " ")
}
