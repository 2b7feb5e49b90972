package accessmatrix

import (
	"slices"
	"strings"

	cedarast "github.com/cedar-policy/cedar-go/ast"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// In the cluster's matrix the namespace is open, so a grant in some
// namespaces (a RoleBinding's, or `resource.namespace == "dev"`) comes
// back from who-can as a condition on resource.namespace. The matrix shows
// it as the row's scope instead: the namespaces where the rest holds.

// condHead and condTail wrap a condition into a policy, to parse it and
// print what is left of it.
const (
	condHead = "permit ( principal, action, resource )\nwhen { "
	condTail = " };"
)

// namespaceScope splits a who-can condition into a namespace scope and
// the rest: a first conjunct that only restricts resource.namespace (== a
// name, like a pattern, a list's contains, or a || of those) becomes the
// scope, written as the namespaces it admits ("dev", "team-a-*", "dev,
// prod"); the other conjuncts are the rest ("" when none). ok is false
// when the condition does not start with such a restriction. Only the
// first conjunct moves: Cedar evaluates it first, and on a namespaced
// resource it never fails, so the rest is evaluated exactly in the scope's
// namespaces, as in the condition (a later one could follow a conjunct
// that fails, and a forbid that fails denies everywhere).
func namespaceScope(cond string) (scope, rest string, ok bool) {
	ps, err := cedarlang.ParsePolicies("condition", []byte(condHead+cond+condTail))
	if err != nil || len(ps) != 1 || len(ps[0].AST.Conditions) != 1 {
		return "", cond, false
	}
	conjuncts := flattenAnd(ps[0].AST.Conditions[0].Body)
	names, ok := namespaceNames(conjuncts[0])
	if !ok {
		return "", cond, false
	}
	if len(conjuncts) == 1 {
		return strings.Join(names, ", "), "", true
	}
	text, ok := exprText(andOf(conjuncts[1:]))
	if !ok {
		return "", cond, false
	}
	return strings.Join(names, ", "), text, true
}

// flattenAnd lists the conjuncts of n, left to right.
func flattenAnd(n ast.IsNode) []ast.IsNode {
	if and, ok := n.(ast.NodeTypeAnd); ok {
		return append(flattenAnd(and.Left), flattenAnd(and.Right)...)
	}
	return []ast.IsNode{n}
}

// andOf is the conjunction of nodes, left-associated as Cedar parses it.
func andOf(nodes []ast.IsNode) ast.IsNode {
	n := nodes[0]
	for _, next := range nodes[1:] {
		n = ast.NodeTypeAnd{BinaryNode: ast.BinaryNode{Left: n, Right: next}}
	}
	return n
}

// exprText prints an expression as Cedar text.
func exprText(n ast.IsNode) (string, bool) {
	p := ast.Permit().When(ast.NewNode(n))
	text := string((*cedarast.Policy)(p).MarshalCedar())
	if !strings.HasPrefix(text, condHead) || !strings.HasSuffix(text, condTail) {
		return "", false
	}
	return text[len(condHead) : len(text)-len(condTail)], true
}

// namespaceNames are the namespaces (names or like patterns) a namespace
// restriction admits; ok is false when n restricts anything else.
func namespaceNames(n ast.IsNode) ([]string, bool) {
	switch v := n.(type) {
	case ast.NodeTypeEquals:
		for _, lr := range [2][2]ast.IsNode{{v.Left, v.Right}, {v.Right, v.Left}} {
			if s, ok := stringValue(lr[1]); ok && isResourceNamespace(lr[0]) {
				return []string{s}, true
			}
		}
	case ast.NodeTypeLike:
		if isResourceNamespace(v.Arg) {
			text := string(v.Value.MarshalCedar())
			return []string{strings.TrimSuffix(strings.TrimPrefix(text, `"`), `"`)}, true
		}
	case ast.NodeTypeContains:
		return containsNames(v)
	case ast.NodeTypeOr:
		left, okL := namespaceNames(v.Left)
		right, okR := namespaceNames(v.Right)
		return append(left, right...), okL && okR
	}
	return nil, false
}

// containsNames are the names of `["a", "b"].contains(resource.namespace)`.
func containsNames(v ast.NodeTypeContains) ([]string, bool) {
	if !isResourceNamespace(v.Right) {
		return nil, false
	}
	var names []string
	switch set := v.Left.(type) {
	case ast.NodeTypeSet:
		for _, e := range set.Elements {
			s, ok := stringValue(e)
			if !ok {
				return nil, false
			}
			names = append(names, s)
		}
	case ast.NodeValue:
		vs, ok := set.Value.(types.Set)
		if !ok {
			return nil, false
		}
		for e := range vs.All() {
			s, ok := e.(types.String)
			if !ok {
				return nil, false
			}
			names = append(names, string(s))
		}
	default:
		return nil, false
	}
	slices.Sort(names)
	return names, len(names) > 0
}

func isResourceNamespace(n ast.IsNode) bool {
	acc, ok := n.(ast.NodeTypeAccess)
	if !ok || acc.Value != schemagen.AttrNamespace {
		return false
	}
	v, ok := acc.Arg.(ast.NodeTypeVariable)
	return ok && v.Name == "resource"
}

func stringValue(n ast.IsNode) (string, bool) {
	v, ok := n.(ast.NodeValue)
	if !ok {
		return "", false
	}
	s, ok := v.Value.(types.String)
	return string(s), ok
}

// mayOverlap reports whether two scopes ("" for every namespace) may share
// a namespace: a name of one matches a name or pattern of the other, or
// both have patterns (which may always share one, as far as this tells).
func mayOverlap(a, b string) bool {
	if a == "" || b == "" || a == b {
		return true
	}
	as, bs := strings.Split(a, ", "), strings.Split(b, ", ")
	for _, x := range as {
		for _, y := range bs {
			switch {
			case !isPattern(x):
				if likeMatch(y, x) {
					return true
				}
			case !isPattern(y):
				if likeMatch(x, y) {
					return true
				}
			default:
				return true
			}
		}
	}
	return false
}

// isPattern reports whether a scope's name is a like pattern (has an
// unescaped *).
func isPattern(s string) bool {
	return strings.Contains(strings.ReplaceAll(s, `\*`, ""), "*")
}

// likeMatch reports whether name matches a like pattern as Cedar writes it
// (* any run of characters, \* a star, \\ a backslash).
func likeMatch(pattern, name string) bool {
	if pattern == "" {
		return name == ""
	}
	if strings.HasPrefix(pattern, "*") {
		for i := 0; i <= len(name); i++ {
			if likeMatch(pattern[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	c, rest := pattern[:1], pattern[1:]
	if c == `\` && rest != "" {
		c, rest = rest[:1], rest[1:]
	}
	return strings.HasPrefix(name, c) && likeMatch(rest, name[1:])
}

// NamedSubresources are the schema's subresources (pods/exec, pods/log)
// whose entity type a policy's resource scope names (`resource is
// core::pods_exec`, `resource == ...`, `resource is ... in ...`), in the
// schema's order, namespaced ones only when namespacedOnly.
func NamedSubresources(s *schemagen.Schema, policies []*cedarlang.Policy, namespacedOnly bool) []*schemagen.Resource {
	named := map[types.EntityType]bool{}
	for _, p := range policies {
		switch sc := p.AST.Resource.(type) {
		case ast.ScopeTypeIs:
			named[sc.Type] = true
		case ast.ScopeTypeIsIn:
			named[sc.Type] = true
		case ast.ScopeTypeEq:
			named[sc.Entity.Type] = true
		}
	}
	var out []*schemagen.Resource
	for _, k := range s.SortedResourceKeys() {
		r := s.Resources[k]
		if k.Subresource != "" && named[r.EntityType] && (!namespacedOnly || r.Namespaced) {
			out = append(out, r)
		}
	}
	return out
}
