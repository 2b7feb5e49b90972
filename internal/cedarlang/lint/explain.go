package lint

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/resolved"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// cedar-go's validator messages (x/exp/schema/validate), without the
// "for policy `id`, " prefix.
var (
	reAttrNotFound  = regexp.MustCompile("^attribute `([^`]+)` on entity types? `?([^`]+?)`? not found$")
	reAttrInContext = regexp.MustCompile("^attribute `([^`]+)` in context for (.+) not found$")
	reOptional      = regexp.MustCompile("^unable to guarantee safety of access to optional attribute `([^`]+)` on entity types? `?([^`]+?)`?$")
	reOptionalCtx   = regexp.MustCompile("^unable to guarantee safety of access to optional attribute `([^`]+)`")
	reTag           = regexp.MustCompile("^unable to guarantee safety of access to tag `([^`]+)` on entity types? `?([^`]+?)`?$")
	reUnknownType   = regexp.MustCompile("^unrecognized entity type `([^`]+)`$")
	reUnknownAction = regexp.MustCompile("^unrecognized action `([^`]+)`$")
	reIncompatible  = regexp.MustCompile("^the types (.+) and (.+) are not compatible$")
	reUnexpected    = regexp.MustCompile("^unexpected type: expected (.+) but saw (.+)$")
	reExtParse      = regexp.MustCompile("^error during extension function argument validation: .*`(\"[^`]*\")`$")
	rePolicyPrefix  = regexp.MustCompile("^for policy `[^`]*`, ")
)

const notApplicable = "unable to find an applicable action given the policy scope constraints"

// explain turns cedar-go's complaints about one policy into diagnostics:
// deduplicated (cedar-go repeats a complaint for every principal, action
// and resource type it checked), positioned and with hints.
func (c *Checker) explain(ps *policySource, errs []error) []Diagnostic {
	cs := &complaints{groups: map[string]*complaintGroup{}}
	for _, e := range errs {
		cs.classify(rePolicyPrefix.ReplaceAllString(e.Error(), ""))
	}
	longest := cs.dropImpliedOptional()
	mismatch := false
	for _, g := range cs.groups {
		mismatch = mismatch || g.code == CodeTypeMismatch
	}
	var out []Diagnostic
	for _, k := range cs.order {
		g := cs.groups[k]
		switch {
		case g.code == "":
			continue
		case g.code == CodeOptionalAttr && mismatch:
			continue // cedar-go loses the has guards of an ill-typed expression
		case g.code == CodeNotApplicable && cs.unknownType:
			continue // a consequence of the unknown type or action
		}
		sort.Strings(g.types) // cedar-go's order is a map's
		out = append(out, c.explainGroup(ps, g.code, g.key, g.msgs[0], g.types, longest[g.key]))
	}
	return out
}

// complaintGroup is cedar-go's complaints with one code about one thing (an
// attribute, a type...): their messages and the entity types they name.
type complaintGroup struct {
	code, key string
	msgs      []string
	types     []string
}

// complaints groups one policy's complaints, in the order first seen.
type complaints struct {
	order  []string // code + "\x00" + key
	groups map[string]*complaintGroup
	// unknownType: a complaint about an unknown type or action (or an empty
	// scope), which makes "no applicable action" a mere consequence.
	unknownType bool
}

// add files a complaint under (code, key), noting entity type typ if any.
func (cs *complaints) add(code, key, msg, typ string) {
	g, ok := cs.groups[code+"\x00"+key]
	if !ok {
		g = &complaintGroup{code: code, key: key}
		cs.groups[code+"\x00"+key] = g
		cs.order = append(cs.order, code+"\x00"+key)
	}
	g.msgs = append(g.msgs, msg)
	if typ != "" && !slices.Contains(g.types, typ) {
		g.types = append(g.types, typ)
	}
}

// classify recognizes one of cedar-go's messages (without the policy prefix)
// and adds it under its code and key.
func (cs *complaints) classify(msg string) {
	switch {
	case reUnknownType.MatchString(msg):
		cs.unknownType = true
		cs.add(CodeUnknownType, reUnknownType.FindStringSubmatch(msg)[1], msg, "")
	case reUnknownAction.MatchString(msg):
		cs.unknownType = true
		cs.add(CodeUnknownAction, reUnknownAction.FindStringSubmatch(msg)[1], msg, "")
	case reAttrNotFound.MatchString(msg):
		m := reAttrNotFound.FindStringSubmatch(msg)
		cs.add(CodeUnknownAttr, m[1], msg, m[2])
	case reAttrInContext.MatchString(msg):
		// cedar-go names the context when an attribute is missing on a
		// record; it is a missing attribute of whatever was accessed.
		cs.add(CodeUnknownAttr, reAttrInContext.FindStringSubmatch(msg)[1], msg, "")
	case reOptional.MatchString(msg):
		m := reOptional.FindStringSubmatch(msg)
		cs.add(CodeOptionalAttr, m[1], msg, m[2])
	case reOptionalCtx.MatchString(msg):
		cs.add(CodeOptionalAttr, reOptionalCtx.FindStringSubmatch(msg)[1], msg, "")
	case reTag.MatchString(msg):
		m := reTag.FindStringSubmatch(msg)
		cs.add(CodeUnguardedTag, m[1], msg, m[2])
	case reIncompatible.MatchString(msg), reUnexpected.MatchString(msg):
		cs.add(CodeTypeMismatch, msg, msg, "")
	case reExtParse.MatchString(msg):
		cs.add(CodeExtension, reExtParse.FindStringSubmatch(msg)[1], msg, "")
	case msg == notApplicable:
		cs.add(CodeNotApplicable, "", msg, "")
	case strings.HasPrefix(msg, "empty set literals are forbidden"):
		cs.unknownType = true // the scope is empty: no action applies, of course
		cs.add(CodeInvalid, msg, msg, "")
	default:
		cs.add(CodeInvalid, msg, msg, "")
	}
}

// dropImpliedOptional drops the optional-attribute complaints that one about
// a prefix of their path implies (their code becomes ""): the shortest
// unguarded path is reported, and the longest guarded. It returns, by kept
// path, the longest path it implied.
func (cs *complaints) dropImpliedOptional() map[string]string {
	longest := map[string]string{}
	for _, k := range cs.order {
		g := cs.groups[k]
		if g.code != CodeOptionalAttr {
			continue
		}
		for _, k2 := range cs.order {
			g2 := cs.groups[k2]
			if g2.code == CodeOptionalAttr && strings.HasPrefix(g.key, g2.key+".") {
				if len(g.key) > len(longest[g2.key]) {
					longest[g2.key] = g.key
				}
				g.code = "" // dropped
			}
		}
	}
	return longest
}

// explainGroup is the diagnostic of one group of complaints: code and key
// as grouped, msg the first message, typs the entity types named, and
// longestPath the longest optional path the group implies.
func (c *Checker) explainGroup(ps *policySource, code, key, msg string, typs []string, longestPath string) Diagnostic {
	switch code {
	case CodeUnknownType:
		return c.explainUnknownType(ps, key)
	case CodeUnknownAction:
		verb := key
		if i := strings.Index(key, `::"`); i >= 0 {
			verb = strings.TrimSuffix(key[i+3:], `"`)
		}
		at := ps.find(`"` + verb + `"`)
		return ps.diag(Error, code, fmt.Sprintf("unknown action %s", key), c.verbHint(verb), at)
	case CodeUnknownAttr:
		return c.explainUnknownAttr(ps, key, typs, msg)
	case CodeOptionalAttr:
		return c.explainOptionalAttr(ps, key, typs, longestPath)
	case CodeUnguardedTag:
		return explainUnguardedTag(ps, key)
	case CodeTypeMismatch:
		return ps.diag(Error, code, msg, typeMismatchHint(msg), ps.mismatchAt(msg))
	case CodeExtension:
		return ps.diag(Error, code, msg, "the literal is checked when the policy loads: fix its syntax (ip(\"10.0.0.0/8\"), decimal(\"1.5\"), datetime(\"2024-01-01\"))", ps.find(key))
	case CodeNotApplicable:
		return c.explainNotApplicable(ps)
	}
	if strings.HasPrefix(msg, "empty set literals are forbidden") {
		at := ps.find("[]")
		hint := "Cedar refuses empty sets; write a set with at least one element"
		if _, ok := ps.p.AST.Action.(ast.ScopeTypeInSet); ok && at >= 0 && at < ps.condStartOrEnd() {
			hint = `list at least one action, e.g. action in [k8s::Action::"get"], or leave action unconstrained`
		}
		return ps.diag(Error, code, "empty set literals are forbidden in policies", hint, at)
	}
	return ps.diag(Error, code, msg, "", ps.condStart())
}

// explainUnknownType is the diagnostic of an unknown entity type name.
func (c *Checker) explainUnknownType(ps *policySource, name string) Diagnostic {
	at := ps.find(name)
	hint := ""
	if m := c.closestType(name); m != "" {
		hint = "did you mean " + m + "?"
	}
	if strings.HasSuffix(name, "::Group") || name == "k8s::Groups" {
		hint = `groups are k8s::Group::"<name>" entities: principal in k8s::Group::"dev"`
	}
	return ps.diag(Error, CodeUnknownType, fmt.Sprintf("unknown entity type %s", name), hint, at)
}

// explainOptionalAttr is the diagnostic of optional attribute path key read
// without a guard, on entity types typs; the hint guards longestPath (or
// key).
func (c *Checker) explainOptionalAttr(ps *policySource, key string, typs []string, longestPath string) Diagnostic {
	segs := strings.Split(key, ".")
	root := c.rootVar(typs)
	at := ps.find(root + "." + key)
	if at >= 0 {
		at += len(root) + 1 + len(key) - len(segs[len(segs)-1])
	} else if at = ps.find("." + segs[len(segs)-1]); at >= 0 {
		at++
	}
	full := key
	if longestPath != "" {
		full = longestPath
	}
	where := ""
	if len(typs) == 1 {
		where = " on " + typs[0]
	} else if len(typs) > 1 {
		where = fmt.Sprintf(" on %d entity types", len(typs))
	}
	hint := "guard it: " + c.guard(root, full, typs)
	if root == "resource" && key == schemagen.AttrNamespace && len(typs) == 1 {
		if res := c.byType[types.EntityType(typs[0])]; res != nil && !res.Namespaced {
			hint = fmt.Sprintf("%s is cluster-scoped: it has a namespace only when a request names one (a namespaces request, or a SubjectAccessReview, for which RBAC applies that namespace's RoleBindings); %s", typs[0], hint)
		}
	}
	return ps.diag(Error, CodeOptionalAttr, fmt.Sprintf("%s.%s%s is optional and is read without a `has` guard", root, key, where), hint, at)
}

// explainUnguardedTag is the diagnostic of tag key read with getTag without
// a hasTag guard.
func explainUnguardedTag(ps *policySource, key string) Diagnostic {
	at := ps.find("getTag(" + key + ")")
	if at < 0 {
		at = ps.find("getTag(")
	} else {
		at += len("getTag(")
	}
	expr := "X"
	if at >= 0 {
		expr = ps.exprBefore(ps.find("getTag(" + key + ")"))
	}
	return ps.diag(Error, CodeUnguardedTag, fmt.Sprintf("tag %s is read with getTag without a hasTag guard", key),
		fmt.Sprintf("guard it: %s.hasTag(%s) && %s.getTag(%s)", expr, key, expr, key), at)
}

// typeMismatchHint suggests a fix for cedar-go's type mismatch msg, or "".
func typeMismatchHint(msg string) string {
	hint := ""
	if strings.Contains(msg, "Set<") && strings.Contains(msg, "String") {
		hint = `to test whether a set holds a value use .contains("v"), e.g. principal.groups.contains("dev")`
	}
	if strings.Contains(msg, "expected Set") {
		hint = "contains, containsAll and containsAny work on sets; for strings use like \"*x*\""
	}
	if strings.Contains(msg, "Long") && strings.Contains(msg, "String") {
		hint = "compare like with like: quote strings (\"3\"), leave numbers bare (3); check the field's type with `kcedar schema export`"
	}
	return hint
}

// rootVar guesses which variable an attribute error is about from the
// entity types cedar-go named.
func (c *Checker) rootVar(typs []string) string {
	for _, t := range typs {
		switch types.EntityType(t) {
		case schemagen.UserType, schemagen.NodeType, schemagen.ServiceAccountType:
			return "principal"
		}
	}
	return "resource"
}

// explainUnknownAttr is the diagnostic of attribute path key, which entity
// types typs (or the record msg names) lack.
func (c *Checker) explainUnknownAttr(ps *policySource, key string, typs []string, msg string) Diagnostic {
	segs := strings.Split(key, ".")
	last := segs[len(segs)-1]
	at := ps.unknownAttrAt(key, last, len(segs))
	inContext := strings.Contains(msg, " in context for ")
	m := fmt.Sprintf("unknown attribute %s%s", key, unknownAttrWhere(typs))
	if inContext {
		m = fmt.Sprintf("unknown attribute %s", last)
	}
	return ps.diag(Error, CodeUnknownAttr, m, c.unknownAttrHint(ps, segs, typs, inContext, at), at)
}

// unknownAttrAt finds where the unknown attribute last (of path key, with
// nsegs segments) is read: at the whole path, else at its last segment.
func (ps *policySource) unknownAttrAt(key, last string, nsegs int) int {
	at := -1
	if nsegs > 1 {
		if at = ps.find("." + key); at >= 0 {
			at += 1 + len(key) - len(last)
		}
	}
	if at < 0 {
		if at = ps.find("." + last); at >= 0 {
			at++
		}
	}
	return at
}

// unknownAttrWhere names the entity types an unknown attribute is missing
// on, for the message: " on A", " on A, B", or " on N entity types (...)".
func unknownAttrWhere(typs []string) string {
	switch {
	case len(typs) == 1:
		return " on " + typs[0]
	case len(typs) > 1 && len(typs) <= 3:
		return " on " + strings.Join(typs, ", ")
	case len(typs) > 3:
		return fmt.Sprintf(" on %d entity types (%s, ...)", len(typs), strings.Join(typs[:3], ", "))
	}
	return ""
}

// unknownAttrHint suggests a fix for the unknown attribute path segs on
// entity types typs (inContext: cedar-go named a record, not a type), read
// at offset at; "" when none applies. The first that applies wins: a known
// mistake, then constraining the type, then a similar attribute, then (for
// a record) hints about what was read.
func (c *Checker) unknownAttrHint(ps *policySource, segs, typs []string, inContext bool, at int) string {
	last := segs[len(segs)-1]
	var et types.EntityType
	if len(typs) > 0 {
		et = types.EntityType(typs[0])
	}
	if hint := c.knownAttrMistake(ps, et, segs, at); hint != "" {
		return hint
	}
	if len(typs) > 3 {
		return fmt.Sprintf("these types have no %s: constrain the type (resource is <type>) or test it with has", last)
	}
	if cands := c.attrNames(et, segs[:len(segs)-1]); len(cands) > 0 {
		if m := closest(last, cands); m != "" {
			return "did you mean " + m + "?"
		} else if len(cands) <= 12 {
			return "attributes here: " + strings.Join(cands, ", ")
		}
	}
	if !inContext {
		return ""
	}
	if at > 0 {
		if hint := c.recordAttrHint(ps, last, at); hint != "" {
			return hint
		}
	}
	if scopeType(ps.p.AST.Resource) == "" {
		return fmt.Sprintf("not every resource type has %s here: constrain the type (resource is core::pods) or test it with has", last)
	}
	return "check the field names with `kcedar schema export` (field names are as in the Kubernetes API, e.g. spec.nodeName)"
}

// knownAttrMistake recognizes common mistakes behind an unknown attribute
// path segs on entity type et, read at offset at: a map read as a record, a
// namespace or name the type lacks, a subresource, an object field without
// its version. It returns their hint, or "".
func (c *Checker) knownAttrMistake(ps *policySource, et types.EntityType, segs []string, at int) string {
	last := segs[len(segs)-1]
	res := c.byType[et]
	switch {
	case et == "k8s::StringMap" || strings.HasSuffix(string(et), "Map") && c.resolved.Entities[et].Tags != nil:
		expr := ps.exprBefore(at - 1)
		return fmt.Sprintf("maps such as labels and annotations are tags: %s.hasTag(%q) && %s.getTag(%q)", expr, last, expr, last)
	case last == schemagen.AttrNamespace && res != nil && !res.Namespaced && len(segs) == 1:
		return fmt.Sprintf("%s is cluster-scoped: it has no namespace; drop the condition", et)
	case last == schemagen.AttrNamespace && len(segs) == 1 && (et == schemagen.UserType || et == schemagen.NodeType):
		return "only service accounts have a namespace: principal is k8s::ServiceAccount && principal.namespace == \"...\""
	case last == schemagen.AttrName && len(segs) == 1 && et == schemagen.UserType:
		return "users have no name attribute: use principal.username, or principal is k8s::Node / k8s::ServiceAccount"
	case last == schemagen.AttrSubresource && len(segs) == 1 && res != nil:
		return fmt.Sprintf("%s is not a subresource; subresources are types of their own, e.g. resource is core::pods_exec", et)
	case len(segs) == 2 && (segs[0] == schemagen.AttrObject || segs[0] == schemagen.AttrOldObject):
		v := "v1"
		if res != nil {
			if vs := sortedVersions(res); len(vs) > 0 {
				v = vs[0]
			}
		}
		return fmt.Sprintf("objects are per version: resource.%s.%s.%s (after resource has %s && resource.%s has %s)", segs[0], v, last, segs[0], segs[0], v)
	case last == schemagen.AttrMetadata && strings.Contains(ps.file.mask[ps.start:ps.end], "."+last):
		return "metadata is not per version: resource.object.metadata"
	}
	return ""
}

// recordAttrHint is a hint for attribute last missing on a record (cedar-go
// says "in context"), from the expression read before offset at: context
// has nothing, and a resource path of the scope's type has what the schema
// lists. "" when there is none.
func (c *Checker) recordAttrHint(ps *policySource, last string, at int) string {
	recv := ps.exprBefore(at - 1)
	switch {
	case strings.HasPrefix(recv, "context"):
		return "kcedar's actions have no context attributes: what a request carries is on principal and resource"
	case strings.HasPrefix(recv, "resource."):
		if t := scopeType(ps.p.AST.Resource); t != "" {
			cands := c.attrNames(t, strings.Split(recv, ".")[1:])
			if m := closest(last, cands); m != "" {
				return "did you mean " + m + "?"
			} else if len(cands) > 0 && len(cands) <= 12 {
				return recv + " has: " + strings.Join(cands, ", ")
			}
		}
	}
	return ""
}

func sortedVersions(r *schemagen.Resource) []string {
	var vs []string
	for v := range r.Versions {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	return vs
}

// attrNames lists the attributes of entity type et at path.
func (c *Checker) attrNames(et types.EntityType, path []string) []string {
	e, ok := c.resolved.Entities[et]
	if !ok {
		return nil
	}
	rec := e.Shape
	for _, seg := range path {
		a, ok := rec[types.String(seg)]
		if !ok {
			return nil
		}
		r, ok := a.Type.(resolved.RecordType)
		if !ok {
			return nil
		}
		rec = r
	}
	var out []string
	for k := range rec {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// guard spells the has-chain that makes root.path safe to read, testing only
// the optional steps when the schema says which they are.
func (c *Checker) guard(root, path string, typs []string) string {
	segs := strings.Split(path, ".")
	var rec resolved.RecordType
	if len(typs) > 0 {
		if e, ok := c.resolved.Entities[types.EntityType(typs[0])]; ok {
			rec = e.Shape
		}
	}
	var parts []string
	expr := root
	for _, seg := range segs {
		optional := true
		if rec != nil {
			if a, ok := rec[types.String(seg)]; ok {
				optional = a.Optional
				rec, _ = a.Type.(resolved.RecordType)
			} else {
				rec = nil
			}
		}
		if optional {
			parts = append(parts, expr+" has "+seg)
		}
		expr += "." + seg
	}
	return strings.Join(parts, " && ")
}

// exprBefore returns the dotted expression that ends just before offset end
// (the receiver of `.getTag(` or `.attr`), e.g. resource.object.metadata.labels.
func (ps *policySource) exprBefore(end int) string {
	if end < 0 {
		return "X"
	}
	text := ps.file.mask
	i := end
	for i > ps.start && (isNameByte(text[i-1]) || text[i-1] == '.') {
		i--
	}
	s := strings.TrimSuffix(text[i:end], ".")
	if s == "" {
		return "X"
	}
	return s
}

func (c *Checker) explainNotApplicable(ps *policySource) Diagnostic {
	a := ps.p.AST
	at := ps.find("action")
	msg := "no action in the scope applies to the principal and resource types in the scope, so the policy can never apply"
	hint := ""
	switch s := a.Principal.(type) {
	case ast.ScopeTypeEq:
		if s.Entity.Type == schemagen.GroupType {
			return ps.diag(Error, CodeNotApplicable, "principals are users, service accounts and nodes, never groups: `principal == k8s::Group::...` never matches",
				fmt.Sprintf("write principal in %s", s.Entity), ps.find("principal"))
		}
	case ast.ScopeTypeIs:
		if s.Type == schemagen.GroupType {
			return ps.diag(Error, CodeNotApplicable, "principals are users, service accounts and nodes, never groups",
				`write principal in k8s::Group::"<name>"`, ps.find("principal"))
		}
	}
	if s, ok := a.Action.(ast.ScopeTypeEq); ok && s.Entity == schemagen.AllVerbsAction {
		return ps.diag(Error, CodeNotApplicable, `k8s::Action::"*" is the group of all verbs, not a verb: `+"`action == k8s::Action::\"*\"` never matches",
			`write action in k8s::Action::"*" (or leave action unconstrained)`, at)
	}
	if s, ok := a.Action.(ast.ScopeTypeEq); ok && s.Entity.Type == schemagen.ActionType && schemagen.IsActionGroup(string(s.Entity.ID)) {
		return ps.diag(Error, CodeNotApplicable, fmt.Sprintf("%s is an action group, not a verb: `action == %s` never matches", s.Entity, s.Entity),
			fmt.Sprintf("write action in %s", s.Entity), at)
	}
	if h := impersonationHint(a); h != "" {
		return ps.diag(Error, CodeNotApplicable, msg, h, at)
	}
	if rt, ok := cedarlang.ScopeResourceType(a.Resource); ok {
		if verbs := c.verbsFor(rt); len(verbs) > 0 {
			hint = fmt.Sprintf("%s supports the verbs: %s", rt, strings.Join(verbs, ", "))
		} else {
			hint = fmt.Sprintf("no verb applies to %s", rt)
		}
	}
	return ps.diag(Error, CodeNotApplicable, msg, hint, at)
}

// verbsFor lists the verbs whose actions apply to entity type t.
func (c *Checker) verbsFor(t types.EntityType) []string {
	var out []string
	for uid, a := range c.resolved.Actions {
		if a.AppliesTo != nil && slices.Contains(a.AppliesTo.Resources, t) {
			out = append(out, string(uid.ID))
		}
	}
	sort.Strings(out)
	return summarizeVerbs(out)
}

// summarizeVerbs shortens a sorted verb list for a hint: the
// impersonate-on:<mode>:<verb> verbs there for every mode become one last
// entry.
func summarizeVerbs(verbs []string) []string {
	have := map[string]bool{}
	for _, v := range verbs {
		have[v] = true
	}
	out := make([]string, 0, len(verbs))
	folded := false
	for _, v := range verbs {
		_, inner, ok := schemagen.ParseImpersonateOn(v)
		if !ok {
			out = append(out, v)
			continue
		}
		every := true
		for _, m := range schemagen.ImpersonationModes {
			every = every && have[schemagen.ImpersonateOnVerb(m, inner)]
		}
		if every {
			folded = true
		} else {
			out = append(out, v)
		}
	}
	if folded {
		out = append(out, "impersonate-on:<mode>:<verb> of these")
	}
	return out
}

// verbHint suggests a verb for an unknown action.
func (c *Checker) verbHint(verb string) string {
	aliases := map[string]string{
		"read":  `reads are get, list and watch: action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"]`,
		"write": `writes are create, update, patch and delete: action in [k8s::Action::"create", k8s::Action::"update", k8s::Action::"patch", k8s::Action::"delete"]`,
		"all":   `every verb: action in k8s::Action::"*"`,
		"any":   `every verb: action in k8s::Action::"*"`,
		"exec":  `exec is a subresource, not a verb: action == k8s::Action::"create", resource is core::pods_exec`,
		"logs":  `logs are a subresource: action == k8s::Action::"get", resource is core::pods_log`,
	}
	if h, ok := aliases[strings.ToLower(verb)]; ok {
		return h
	}
	verbs := append([]string(nil), c.Schema.Verbs...)
	if m := closest(verb, verbs); m != "" {
		return fmt.Sprintf(`did you mean k8s::Action::"%s"?`, m)
	}
	return "actions are Kubernetes verbs: " + strings.Join(summarizeVerbs(verbs), ", ")
}

// closestType finds the entity type nearest to name: the same resource name
// in another namespace (networking::ingresses -> io::k8s::networking::ingresses),
// else the smallest edit distance.
func (c *Checker) closestType(name string) string {
	base := name[strings.LastIndex(name, "::")+2:]
	var sameBase []string
	for _, t := range c.typeNames {
		if strings.HasSuffix(t, "::"+base) {
			sameBase = append(sameBase, t)
		}
	}
	if len(sameBase) == 1 {
		return sameBase[0]
	}
	for _, t := range sameBase {
		if strings.HasSuffix(t, name) {
			return t
		}
	}
	return closest(name, c.typeNames)
}

// closest returns the candidate within a small edit distance of s, or "".
func closest(s string, cands []string) string {
	best, bestD := "", max(2, len(s)/3)+1
	for _, c := range cands {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if a == b {
		return 0
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// scopeType is the entity type a resource scope names, or "".
func scopeType(s ast.IsResourceScopeNode) types.EntityType {
	switch v := s.(type) {
	case ast.ScopeTypeIs:
		return v.Type
	case ast.ScopeTypeIsIn:
		return v.Type
	}
	return ""
}

var (
	reCompareNumber = regexp.MustCompile(`(==|!=|<=|>=|<|>)\s*-?[0-9]|-?[0-9]\s*(==|!=)`)
	reOrderString   = regexp.MustCompile(`(<=|>=|<|>)\s*"`)
	reSetMethod     = regexp.MustCompile(`\.(contains|containsAll|containsAny|isEmpty)\(`)
	reSetEqString   = regexp.MustCompile(`\.(groups|finalizers|audiences|[a-zA-Z]+s)\s*(==|!=)\s*"`)
)

// mismatchAt guesses where a type mismatch is (cedar-go does not say): the
// first comparison of a number, a string ordered with <, a set method on a
// string, a set compared with a string; else the first condition.
func (ps *policySource) mismatchAt(msg string) int {
	cond := ps.condStart()
	if cond < 0 {
		return -1
	}
	text := ps.file.mask[cond:ps.end]
	try := func(re *regexp.Regexp) int {
		if loc := re.FindStringIndex(text); loc != nil {
			return cond + loc[0]
		}
		return -1
	}
	var at = -1
	switch {
	case strings.Contains(msg, "expected Set"):
		if at = try(reSetMethod); at >= 0 {
			at++ // the method, after the dot
		}
	case strings.Contains(msg, "Set<") && strings.Contains(msg, "String"):
		if at = try(reSetEqString); at >= 0 {
			at++ // the attribute, after the dot
		}
	case strings.Contains(msg, "Long") && strings.Contains(msg, "String"):
		if at = try(reCompareNumber); at < 0 {
			at = try(reOrderString)
		}
	}
	if at < 0 {
		return cond
	}
	return at
}

// impersonationHint explains a legacy impersonate on the identities of
// constrained impersonation (authentication.k8s.io users, groups, nodes,
// serviceaccounts), and a constrained verb on the legacy ones (core users,
// groups, serviceaccounts): the API server asks each on its own resources.
func impersonationHint(a *ast.Policy) string {
	s, ok := a.Action.(ast.ScopeTypeEq)
	rt, okT := cedarlang.ScopeResourceType(a.Resource)
	if !ok || !okT || s.Entity.Type != schemagen.ActionType {
		return ""
	}
	verb := string(s.Entity.ID)
	ns := schemagen.GroupNamespace(schemagen.AuthenticationGroup) + "::"
	switch {
	case verb == "impersonate" && strings.HasPrefix(string(rt), ns):
		return fmt.Sprintf("the legacy impersonate verb is asked on core::users, core::groups and core::serviceaccounts; on %s the API server asks the constrained verbs (Kubernetes 1.36+): impersonate:<mode>, e.g. k8s::Action::\"impersonate:user-info\"", rt)
	case strings.HasPrefix(verb, schemagen.ImpersonatePrefix) && strings.HasPrefix(string(rt), "core::"):
		return fmt.Sprintf("%s is asked on the identities of authentication.k8s.io (%susers, groups, nodes, serviceaccounts, uids, userextras), not on %s (which the legacy impersonate verb uses)", verb, ns, rt)
	}
	return ""
}
