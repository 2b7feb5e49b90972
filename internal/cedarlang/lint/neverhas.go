package lint

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/resolved"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// CodeHasNeverHolds: a `has` test names an attribute that no type the scope
// allows declares (records are closed), so it is always false. cedar-go's
// validator types it False and says nothing; the condition needing it never
// holds.
const CodeHasNeverHolds = "has-never-holds"

// shape is what an expression can be on the typed schema: an entity (ent,
// with its attributes and whether it has tags) or a record (ent ""), reached
// from the scope's entity type root.
type shape struct {
	rec  resolved.RecordType
	ent  types.EntityType
	tags bool
	root types.EntityType
}

// hasTest is one `recv has attr` whose receiver is an attribute path of
// principal, resource or context, and its number among the tests of attr.
type hasTest struct {
	root string   // principal, resource or context
	path []string // the receiver's attributes after root
	attr string
	nth  int
}

// recv spells the receiver, e.g. resource.object.
func (h hasTest) recv() string { return strings.Join(append([]string{h.root}, h.path...), ".") }

// hasTests lists the `has` tests of p's conditions on attribute paths, in
// source order.
func hasTests(p *ast.Policy) []hasTest {
	var out []hasTest
	counts := map[types.String]int{}
	for _, cond := range p.Conditions {
		ast.Inspect(ast.NewNode(cond.Body), func(n ast.IsNode) bool {
			h, ok := n.(ast.NodeTypeHas)
			if !ok {
				return true
			}
			nth := counts[h.Value]
			counts[h.Value]++
			if root, path, ok := attrPath(h.Arg); ok {
				out = append(out, hasTest{root: root, path: path, attr: string(h.Value), nth: nth})
			}
			return true
		})
	}
	return out
}

// attrPath reads n as `<variable>.a.b...`: the variable (not action) and the
// attribute names.
func attrPath(n ast.IsNode) (string, []string, bool) {
	var path []string
	for {
		switch v := n.(type) {
		case ast.NodeTypeAccess:
			path = append(path, string(v.Value))
			n = v.Arg
		case ast.NodeTypeVariable:
			if v.Name == "action" {
				return "", nil, false
			}
			slices.Reverse(path)
			return string(v.Name), path, true
		default:
			return "", nil, false
		}
	}
}

// neverHasDiagnostics warns about each `has` test of ps that no type its
// scope allows can satisfy.
func (c *Checker) neverHasDiagnostics(ps *policySource) []Diagnostic {
	tests := hasTests(ps.p.AST)
	if len(tests) == 0 {
		return nil
	}
	roots := c.scopeShapes(ps.p.AST)
	var out []Diagnostic
	for _, h := range tests {
		start := roots[h.root]
		recv := c.walkShapes(start, h.path)
		if len(recv) == 0 || slices.ContainsFunc(recv, func(s shape) bool { _, ok := s.rec[types.String(h.attr)]; return ok }) {
			continue // unreachable (an earlier test is false) or can hold
		}
		msg := fmt.Sprintf("`%s has %s` never holds: %s", h.recv(), h.attr, neverWhere(h, recv))
		out = append(out, ps.diag(Warning, CodeHasNeverHolds, msg, c.neverHasHint(h, start, recv), ps.findHas(h.attr, h.nth)))
	}
	return out
}

// neverWhere says which types lack the attribute of h, read on recv.
func neverWhere(h hasTest, recv []shape) string {
	full := h.recv() + "." + h.attr
	if h.root == "context" {
		return "the context of the actions in the scope has no " + full
	}
	ts := rootTypes(recv)
	switch {
	case len(ts) == 1:
		return fmt.Sprintf("%s has no %s", ts[0], full)
	case len(ts) <= 3:
		return fmt.Sprintf("%s have no %s", strings.Join(ts, ", "), full)
	}
	return fmt.Sprintf("none of the %d %s types the scope allows has %s", len(ts), h.root, full)
}

// rootTypes lists the entity types shapes were reached from, sorted.
func rootTypes(shapes []shape) []string {
	var ts []string
	for _, s := range shapes {
		if !slices.Contains(ts, string(s.root)) {
			ts = append(ts, string(s.root))
		}
	}
	sort.Strings(ts)
	return ts
}

// walkShapes follows path from shapes: the shapes of the records and
// entities it leads to (a step an attribute does not exist on, or to a
// value that is neither, ends there).
func (c *Checker) walkShapes(from []shape, path []string) []shape {
	cur := from
	for _, seg := range path {
		var next []shape
		for _, s := range cur {
			if child, ok := c.child(s, seg); ok {
				next = append(next, child)
			}
		}
		cur = next
	}
	return cur
}

// child is the shape of attribute seg of s, when it is a record or entity.
func (c *Checker) child(s shape, seg string) (shape, bool) {
	a, ok := s.rec[types.String(seg)]
	if !ok {
		return shape{}, false
	}
	switch t := a.Type.(type) {
	case resolved.RecordType:
		return shape{rec: t, root: s.root}, true
	case resolved.EntityType:
		e := c.resolved.Entities[types.EntityType(t)]
		return shape{rec: e.Shape, ent: types.EntityType(t), tags: e.Tags != nil, root: s.root}, true
	}
	return shape{}, false
}

// entityShapes are the shapes of entity types ts.
func (c *Checker) entityShapes(ts []types.EntityType) []shape {
	out := make([]shape, 0, len(ts))
	for _, t := range ts {
		e := c.resolved.Entities[t]
		out = append(out, shape{rec: e.Shape, ent: t, tags: e.Tags != nil, root: t})
	}
	return out
}

// scopeShapes are the shapes principal, resource and context can have under
// p's scope: the types the scoped actions apply to, narrowed by the
// principal and resource scopes, and those actions' contexts. They may
// include combinations no request has (each variable is narrowed on its
// own), which only makes the check more cautious.
func (c *Checker) scopeShapes(p *ast.Policy) map[string][]shape {
	applies := c.scopeAppliesTo(p.Action)
	principals := slices.DeleteFunc(slices.Clone(applies.principals), func(t types.EntityType) bool { return !c.inScope(p.Principal, t) })
	resources := slices.DeleteFunc(slices.Clone(applies.resources), func(t types.EntityType) bool { return !c.inScope(p.Resource, t) })
	contexts := applies.contexts
	return map[string][]shape{
		"principal": c.entityShapes(principals),
		"resource":  c.entityShapes(resources),
		"context":   contexts,
	}
}

func appendNew(to []types.EntityType, ts ...types.EntityType) []types.EntityType {
	for _, t := range ts {
		if !slices.Contains(to, t) {
			to = append(to, t)
		}
	}
	return to
}

// appliesTo is what the actions an action scope allows apply to: their
// principal and resource types, and their contexts.
type appliesTo struct {
	principals, resources []types.EntityType
	contexts              []shape
}

// scopeAppliesTo is what the actions of action scope s apply to (shared:
// read only).
func (c *Checker) scopeAppliesTo(s ast.IsActionScopeNode) appliesTo {
	key := actionScopeKey(s)
	if out, ok := c.scopes.get(key); ok {
		return out
	}
	var out appliesTo
	for _, a := range c.scopeActions(s) {
		if a.AppliesTo == nil {
			continue
		}
		out.principals = appendNew(out.principals, a.AppliesTo.Principals...)
		out.resources = appendNew(out.resources, a.AppliesTo.Resources...)
		out.contexts = append(out.contexts, shape{rec: a.AppliesTo.Context})
	}
	c.scopes.put(key, out)
	return out
}

// scopeActions are the actions an action scope allows, sorted.
func (c *Checker) scopeActions(s ast.IsActionScopeNode) []resolved.Action {
	var out []resolved.Action
	for uid, a := range c.resolved.Actions {
		ok := true
		switch v := s.(type) {
		case ast.ScopeTypeEq:
			ok = uid == v.Entity
		case ast.ScopeTypeInSet:
			ok = slices.ContainsFunc(v.Entities, func(g types.EntityUID) bool { return c.actionIn(uid, g, 0) })
		case ast.ScopeTypeIn:
			ok = c.actionIn(uid, v.Entity, 0)
		}
		if ok {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entity.UID.String() < out[j].Entity.UID.String() })
	return out
}

// actionIn reports whether action uid is group g or in it (depth guards
// against a cycle).
func (c *Checker) actionIn(uid, g types.EntityUID, depth int) bool {
	if uid == g {
		return true
	}
	if depth > 16 {
		return false
	}
	for parent := range c.resolved.Actions[uid].Entity.Parents.All() {
		if c.actionIn(parent, g, depth+1) {
			return true
		}
	}
	return false
}

// inScope reports whether a principal or resource scope allows entity type
// t: `is`, `==`, and `in` an entity of t's type or of a type t can be a
// member of.
func (c *Checker) inScope(s ast.IsScopeNode, t types.EntityType) bool {
	switch v := s.(type) {
	case ast.ScopeTypeIs:
		return v.Type == t
	case ast.ScopeTypeIsIn:
		return v.Type == t
	case ast.ScopeTypeEq:
		return v.Entity.Type == t
	case ast.ScopeTypeIn:
		return c.typeIn(t, v.Entity.Type, 0)
	case ast.ScopeTypeInSet:
		return slices.ContainsFunc(v.Entities, func(e types.EntityUID) bool { return c.typeIn(t, e.Type, 0) })
	}
	return true
}

// typeIn reports whether entities of type t can be in an entity of type g.
func (c *Checker) typeIn(t, g types.EntityType, depth int) bool {
	if t == g {
		return true
	}
	if depth > 16 {
		return false
	}
	for _, p := range c.resolved.Entities[t].ParentTypes {
		if c.typeIn(p, g, depth+1) {
			return true
		}
	}
	return false
}

// neverHasHint suggests what h meant, given the shapes of its root (start)
// and of its receiver (recv): a similar attribute, hasTag for a map,
// metadata one level up (it is not per version), the attribute a few levels
// down (objects sit under their version) or one level up, else what the
// receiver has.
func (c *Checker) neverHasHint(h hasTest, start, recv []shape) string {
	recvText := h.recv()
	if h.root == "context" {
		return "kcedar's actions have no context attributes: what a request carries is on principal and resource"
	}
	names := attrNamesOf(recv)
	if m := closest(h.attr, names); m != "" {
		return "did you mean " + recvText + "." + m + "?"
	}
	if slices.ContainsFunc(recv, func(s shape) bool { return s.tags }) {
		if len(names) == 0 {
			return fmt.Sprintf("maps such as labels and annotations are tags: %s.hasTag(%q)", recvText, h.attr)
		}
		return fmt.Sprintf("`has` tests an attribute; to test a tag write %s.hasTag(%q)", recvText, h.attr)
	}
	if h.attr == schemagen.AttrMetadata {
		if hint := c.parentHint(h, start); hint != "" {
			return hint + " metadata is not per version"
		}
	}
	if below, root := c.findBelow(recv, h.attr, 3); below != nil {
		full := append(append([]string(nil), h.path...), below...)
		var typs []string // the guard tests every step unless one type is in scope
		if len(rootTypes(recv)) == 1 {
			typs = []string{string(root)}
		}
		return fmt.Sprintf("did you mean %s.%s? guard it: %s", recvText, strings.Join(below, "."), c.guard(h.root, strings.Join(full, "."), typs))
	}
	if hint := c.parentHint(h, start); hint != "" {
		return hint
	}
	switch {
	case len(names) == 0:
		return recvText + " has no attributes"
	case len(names) <= 12:
		return recvText + " has: " + strings.Join(names, ", ")
	}
	return "check the field names with `kcedar schema export` (objects sit under their version: resource.object.v1.spec)"
}

// parentHint is "did you mean <the receiver's parent>.<attr>?" when the
// receiver's parent (under h's scope, from start) can have attr, else "".
func (c *Checker) parentHint(h hasTest, start []shape) string {
	if len(h.path) == 0 {
		return ""
	}
	up := append([]string(nil), h.path[:len(h.path)-1]...)
	if !slices.ContainsFunc(c.walkShapes(start, up), func(s shape) bool { _, ok := s.rec[types.String(h.attr)]; return ok }) {
		return ""
	}
	return "did you mean " + strings.Join(append([]string{h.root}, append(up, h.attr)...), ".") + "?"
}

// attrNamesOf lists the attributes any of shapes declares, sorted.
func attrNamesOf(shapes []shape) []string {
	var out []string
	for _, s := range shapes {
		for k := range s.rec {
			if !slices.Contains(out, string(k)) {
				out = append(out, string(k))
			}
		}
	}
	sort.Strings(out)
	return out
}

// findBelow finds the shortest path (at most depth attributes, in sorted
// order) from one of shapes to a record or entity that declares attr, and
// the root type of the shape it starts from; nil when there is none.
func (c *Checker) findBelow(shapes []shape, attr string, depth int) ([]string, types.EntityType) {
	type step struct {
		s    shape
		path []string
	}
	level := make([]step, len(shapes))
	for i, s := range shapes {
		level[i] = step{s: s}
	}
	for d := 0; d < depth && len(level) > 0; d++ {
		var next []step
		for _, st := range level {
			for _, k := range sortedKeys(st.s.rec) {
				child, ok := c.child(st.s, k)
				if !ok {
					continue
				}
				p := append(append([]string(nil), st.path...), k)
				if _, has := child.rec[types.String(attr)]; has {
					return append(p, attr), child.root
				}
				next = append(next, step{s: child, path: p})
			}
		}
		level = next
	}
	return nil, ""
}

func sortedKeys(r resolved.RecordType) []string {
	out := make([]string, 0, len(r))
	for k := range r {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// actionScopeKey names an action scope: what scopeActions depends on.
func actionScopeKey(s ast.IsActionScopeNode) string {
	switch v := s.(type) {
	case ast.ScopeTypeEq:
		return "=" + v.Entity.String()
	case ast.ScopeTypeIn:
		return "in " + v.Entity.String()
	case ast.ScopeTypeInSet:
		parts := make([]string, len(v.Entities))
		for i, e := range v.Entities {
			parts[i] = e.String()
		}
		return "in [" + strings.Join(parts, ", ") + "]"
	}
	return "all"
}

// scopeCache holds scopeAppliesTo's answers, up to maxScopes of them (a
// set may write many action sets; each answer is at most every type and
// action's context).
type scopeCache struct {
	mu sync.Mutex
	m  map[string]appliesTo
}

const maxScopes = 1024

func (c *scopeCache) get(key string) (appliesTo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, ok := c.m[key]
	return out, ok
}

func (c *scopeCache) put(key string, a appliesTo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxScopes {
		c.m = map[string]appliesTo{}
	}
	c.m[key] = a
}
